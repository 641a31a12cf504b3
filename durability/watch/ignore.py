"""Which paths of a worktree may trigger a watch capture.

Never anything under ``.jj/`` or ``.git/`` (a capture itself writes there, so
those would loop), nor a path the repository ignores.  jj follows git's ignore
rules (``.gitignore`` files, ``.git/info/exclude``, ``core.excludesFile``), so
the git repository behind the worktree answers, through pygit2.  Answers are
cached, and an ignored folder answers for everything below it, so a build
writing thousands of files into ``target/`` costs one lookup.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

__all__ = ["IgnoreRules", "open_repository"]

_ALWAYS = frozenset({".jj", ".git"})
# Bounded: a flood of distinct paths cannot grow the cache without limit.
_CACHE_SIZE = 8192


class IgnoreRules:
    """The ignore rules of one worktree."""

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self._prefix = str(worktree).rstrip(os.sep) + os.sep
        self._repo: Any = _open_repo(worktree)
        self._cache: OrderedDict[str, bool] = OrderedDict()
        self._lock = threading.Lock()

    def relative(self, path: str) -> str | None:
        """``path`` relative to the worktree, or None when outside it."""
        if path == str(self.worktree):
            return ""
        return path[len(self._prefix):] if path.startswith(self._prefix) else None

    def triggers(self, path: str, *, is_dir: bool = False, parent_checked: bool = False) -> bool:
        """Whether an event on ``path`` should lead to a capture.  With
        ``parent_checked`` (a walk that only enters folders that trigger) the
        folders above are not looked up again."""
        rel = self.relative(path)
        if rel is None:
            return False
        if rel == "":
            return True  # the root itself: a child created, deleted or renamed
        parts = rel.split(os.sep)
        if parts[0] in _ALWAYS:
            return False
        if not parent_checked:
            for depth in range(1, len(parts)):
                if self._ignored(os.sep.join(parts[:depth]) + "/"):
                    return False
        return not self._ignored(rel + "/" if is_dir else rel)

    def ignored_root(self, path: str, *, is_dir: bool = False) -> str | None:
        """The outermost ignored folder holding ``path``, or ``path`` itself
        when ignored (worktree-relative, ``/``-separated); None when it is not
        ignored, outside the worktree, or under ``.jj``/``.git``."""
        rel = self.relative(path)
        if not rel:
            return None
        parts = rel.split(os.sep)
        if parts[0] in _ALWAYS:
            return None
        for depth in range(1, len(parts)):
            if self._ignored(os.sep.join(parts[:depth]) + "/"):
                return "/".join(parts[:depth])
        return "/".join(parts) if self._ignored(rel + "/" if is_dir else rel) else None

    def _ignored(self, rel: str) -> bool:
        if self._repo is None:
            return False
        with self._lock:
            hit = self._cache.get(rel)
            if hit is not None:
                self._cache.move_to_end(rel)
                return hit
            try:
                answer = bool(self._repo.path_is_ignored(rel.replace(os.sep, "/")))
            except Exception:  # an unreadable rule file must not stop the watch
                answer = False
            self._cache[rel] = answer
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
            return answer

    def outside_stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        """Stat data of the files outside the worktree that can change these
        rules (the user's git config and excludes file): no event inside the
        worktree reports their change, so whoever trusts events compares this."""
        return tuple(_stat_key(p) for p in self._outside_files())

    def _outside_files(self) -> list[Path]:
        home = Path(os.path.expanduser("~"))
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        files = [home / ".gitconfig", xdg / "git" / "config", xdg / "git" / "ignore"]
        if os.environ.get("GIT_CONFIG_GLOBAL"):
            files.append(Path(os.environ["GIT_CONFIG_GLOBAL"]))
        excludes = None
        if self._repo is not None:
            try:
                excludes = self._repo.config["core.excludesFile"]
            except Exception:  # unset, or an unreadable config: the defaults stand
                excludes = None
        if isinstance(excludes, str) and excludes:
            files.append(Path(os.path.expanduser(excludes)))
        return files

    def forget(self) -> None:
        """Drop cached answers (a ``.gitignore`` changed)."""
        with self._lock:
            self._cache.clear()


def open_repository(worktree: Path) -> Any:
    """The git repository behind ``worktree`` (its store holds the
    checkpoints of both backends), or None."""
    return _open_repo(worktree)


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _open_repo(worktree: Path) -> Any:
    """The git repository whose rules apply, with ``worktree`` as its workdir."""
    import pygit2

    if (worktree / ".git").exists():  # colocated: the worktree is git's workdir too
        try:
            return pygit2.Repository(str(worktree))
        except (pygit2.GitError, KeyError, OSError):
            pass
    try:
        from durability.backends.jj import git_dir

        repo = pygit2.Repository(str(git_dir(worktree)))
        # In memory only: tells libgit2 where the ignore files live.
        repo.workdir = str(worktree) + os.sep
        return repo
    except Exception:
        return None  # no git store: only .jj/ and .git/ are filtered
