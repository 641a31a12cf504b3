"""git's ignore rules for deep paths, read confined.

libgit2's ``path_is_ignored`` looks up a ``.gitignore`` in every folder of
the path by its full path string: at depth n one call costs n lookups of up
to n components each (4 ms at depth 100, 100 ms at 800, over PATH_MAX past
about 2,000), so a first capture of a 2,000-deep untracked tree took minutes
under the worktree lock.  The scan (``git_scan``) asks libgit2 for shallow
paths and these rules for paths deeper than ``DEEP``: the patterns of the
``.gitignore`` of each folder on the way (read from the folder's descriptor,
once per folder), then ``info/exclude`` and ``core.excludesFile``, with
gitignore(5)'s semantics: the last matching pattern decides, a deeper file
overrides a shallower one, ``!`` re-includes, a trailing ``/`` matches
folders only, a pattern with a ``/`` is anchored to its file's folder, and
``*``, ``?``, ``[...]`` and ``**`` match as git's wildmatch does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pygit2

from durability.backends.git_repo import common_dir

__all__ = ["DEEP", "Rules", "base_rules"]

#: Paths with at least this many folders above them use these rules.
DEEP = 24


class _Pattern(NamedTuple):
    base: str  # the folder of the file it came from ("" for the root and global files)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    basename: bool


class Rules:
    """The patterns that apply at and below one folder, lowest precedence first."""

    def __init__(self, patterns: tuple[_Pattern, ...]) -> None:
        self.patterns = patterns

    def child(self, folder: str, text: bytes | None) -> Rules:
        """The rules below ``folder``, whose ``.gitignore`` holds ``text``."""
        if not text:
            return self
        return Rules(self.patterns + tuple(_parse(text, folder)))

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the patterns ignore ``path`` itself (its folders above it
        are the walk's business: it never enters an ignored one)."""
        name = path.rpartition("/")[2]
        for p in reversed(self.patterns):
            if p.dir_only and not is_dir:
                continue
            if p.basename:
                target = name
            elif not p.base:
                target = path
            elif path.startswith(p.base + "/"):
                target = path[len(p.base) + 1:]
            else:
                continue
            if p.regex.fullmatch(target):
                return not p.negate
        return False


def base_rules(repo: pygit2.Repository, read_root_gitignore: Callable[[], bytes | None]) -> Rules:
    """``core.excludesFile``, ``info/exclude`` and the root ``.gitignore``."""
    patterns: list[_Pattern] = []
    # A linked worktree's git reads the shared info/exclude, not its own git dir's.
    exclude = str(common_dir(Path(repo.path)) / "info" / "exclude")
    for path in (_excludes_file(repo), exclude):
        if path:
            try:
                with open(path, "rb") as f:
                    patterns += _parse(f.read(), "")
            except OSError:
                pass
    return Rules(tuple(patterns)).child("", read_root_gitignore())


def _excludes_file(repo: pygit2.Repository) -> str | None:
    try:
        value = repo.config["core.excludesFile"]
    except (KeyError, pygit2.GitError):
        value = None
    if isinstance(value, str) and value:
        return os.path.expanduser(value)
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(xdg, "git", "ignore")


def _parse(text: bytes, base: str) -> list[_Pattern]:
    found = []
    for raw in text.decode("utf-8", "surrogateescape").splitlines():
        line = _strip_trailing(raw)
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        basename = "/" not in line
        line = line.lstrip("/") if not basename else line
        try:
            regex = re.compile(_translate(line), re.DOTALL)
        except re.error:
            continue
        found.append(_Pattern(base, regex, negate, dir_only, basename))
    return found


def _strip_trailing(line: str) -> str:
    """Trailing spaces go unless escaped with a backslash."""
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        return stripped[:-1] + " "
    return stripped


def _translate(pattern: str) -> str:
    """A wildmatch pattern (``*`` and ``?`` never match ``/``) as a regex."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                before = i == 0 or pattern[i - 1] == "/"
                after = i + 2 == n or pattern[i + 2] == "/"
                if before and after:
                    if i + 2 == n:
                        out.append(".*")  # "a/**": everything inside
                        i += 2
                    else:
                        out.append("(?:.*/)?")  # "**/": zero or more folders
                        i += 3
                    continue
            out.append("[^/]*")
            while i < n and pattern[i] == "*":
                i += 1
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            end = i + 1
            if end < n and pattern[end] in "!^":
                end += 1
            if end < n and pattern[end] == "]":
                end += 1
            while end < n and pattern[end] != "]":
                end += 1
            if end >= n:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)
