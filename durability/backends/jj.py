"""The jj backend: captures through the jj CLI, pins with pygit2.

A capture is one ``jj log -r @`` (every jj command snapshots the working copy
first, so this snapshots and reads the new ``@`` in a single process), then a
ref ``refs/durability/jj/<commit>`` in the git store behind jj so that neither
``jj util gc`` nor ``git gc`` can drop the commit while its row exists.  Once
the operations that knew a commit are abandoned and collected, jj no longer
resolves its id.  A restore never runs ``jj restore``: it writes the pinned
commit's files from the git store with the confined writer (``tree_files``)
and lets jj's next snapshot record them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability.backends.base import MOVING, Changes, Progress, Skipped, Snapshot, Stamp
from durability.backends.moving import MAX_TRIES, is_snapshot_race, pause
from durability.backends.unreadable import find_unreadable, is_unreadable
from durability.config import DEFAULT_MAX_NEW_FILE_SIZE
from durability.ground import proc
from durability.ground.errors import (
    JjFailed,
    JjMissing,
    JjTimeout,
    JjTooOld,
    NotAJjRepo,
    PathSwapped,
    PathTooLong,
    UnreadablePath,
    WorktreeMissing,
)
from durability.ground.fsutil import replace_file
from durability.ground.ids import missing_repository_part

if TYPE_CHECKING:
    import pygit2

__all__ = ["JJ_COLUMNS", "MIN_VERSION", "JjBackend", "JjBinary", "find_jj", "git_dir", "jj_env",
           "repo_dir"]

MIN_VERSION = (0, 30)
PIN_PREFIX = "refs/durability/jj/"
_TEMPLATE = 'commit_id ++ " " ++ change_id ++ "\\n"'
_HEX = re.compile(r"[0-9a-f]{40}")
# `jj --version` is answered without touching a repository: a short ceiling.
_VERSION_TIMEOUT_S = 15.0
# jj's warning when it leaves new files over snapshot.max-new-file-size out of
# a snapshot (jj 0.30 to 0.46): a header, then one indented line per file,
# "  <path>: <size> (<n> bytes); the maximum size allowed is ...".
_REFUSED_HEADER = "Refused to snapshot some files:"
_REFUSED_LINE = re.compile(r"^  (?P<path>.+?): [0-9.]+ ?[KMGTP]?i?B \(\d+ bytes\);")
# jj's warning when it leaves out a path whose name is not UTF-8 (it cannot
# record one; seen in jj 0.46): a header, then one line per file or folder,
# '  <its folder, "." at the root>: "<its name, escaped as Rust debug-prints>"'.
_NOT_UTF8_HEADER = "Skipped some paths because they are not valid UTF-8:"
_NOT_UTF8_LINE = re.compile(r'^  (?P<folder>.+): "(?P<name>(?:[^"\\]|\\.)*)"$')
_RUST_ESCAPE = re.compile(r'\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)')
_RUST_SIMPLE = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0"}


@dataclass(frozen=True)
class JjBinary:
    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


_cache: dict[tuple[str, float], JjBinary] = {}
_cache_lock = threading.Lock()


def usual_places(env: Mapping[str, str]) -> list[str]:
    """Where jj's installers put it (cargo, a prebuilt binary, Nix, Homebrew):
    a hook whose harness started from a desktop launcher runs with a PATH like
    ``/usr/bin:/bin`` that holds none of them, and a pipx or uv tool install
    has no jj beside its Python."""
    home = env.get("HOME", "")
    cargo = env.get("CARGO_HOME") or (f"{home}/.cargo" if home else "")
    places = [f"{cargo}/bin/jj" if cargo else "",
              *([f"{home}/.local/bin/jj", f"{home}/.nix-profile/bin/jj"] if home else []),
              "/opt/homebrew/bin/jj", "/usr/local/bin/jj", "/home/linuxbrew/.linuxbrew/bin/jj"]
    return [p for p in places if p.startswith("/")]


#: The terminal width jj is told when nobody told it one: without COLUMNS
#: every jj command spawns ``tput cols`` and ``tput lines`` (2-3 ms of each
#: capture, more on a loaded machine).  Nothing we parse depends on it: our
#: templates print no graph and wrap nothing.
JJ_COLUMNS = "200"


def jj_env(env: Mapping[str, str] = os.environ) -> dict[str, str] | None:
    """The environment of a jj command we run: ``env`` with ``COLUMNS`` set
    when it is not (None: ``env`` as it is, when it is the process's own)."""
    if env.get("COLUMNS"):
        return None if env is os.environ else dict(env)
    return {**env, "COLUMNS": JJ_COLUMNS}


def find_jj(env: Mapping[str, str] = os.environ) -> JjBinary:
    """``$DURABILITY_JJ``, else ``jj`` on PATH, else ``jj`` beside the running
    Python (a project venv), else in the usual install places; it must be
    jj >= 0.30."""
    explicit = env.get("DURABILITY_JJ")
    if explicit:
        candidates = [explicit]
    else:
        candidates = [c for c in (shutil.which("jj", path=env.get("PATH")),
                                  str(Path(sys.executable).parent / "jj"),
                                  *usual_places(env)) if c]
    path = next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if path is None:
        where = (f"DURABILITY_JJ={explicit}" if explicit
                 else "PATH, beside Python or in " + ", ".join(usual_places(env)))
        raise JjMissing(f"jj not found ({where}); install jj >= 0.30 (see README)")
    key = (path, os.stat(path).st_mtime)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    found = JjBinary(path, _version(path))
    if found.version[:2] < MIN_VERSION:
        raise JjTooOld(f"{path} is jj {found.version_text}; jj >= 0.30 is required")
    with _cache_lock:
        _cache[key] = found
    return found


def _version(path: str) -> tuple[int, int, int]:
    try:
        done = proc.run([path, "--version"], timeout=_VERSION_TIMEOUT_S)
    except (proc.TimedOut, OSError) as exc:
        raise JjMissing(f"{path} does not run: {exc}") from exc
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", done.stdout)
    if done.returncode != 0 or not match:
        raise JjMissing(f"{path} --version said {done.stdout.strip() or done.stderr.strip()!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def repo_dir(worktree: Path) -> Path:
    """The jj repo folder of a workspace (``.jj/repo``, or where it points)."""
    link = worktree / ".jj" / "repo"
    if link.is_file():
        target = Path(link.read_text(encoding="utf-8").strip())
        return (worktree / ".jj" / target).resolve() if not target.is_absolute() else target
    return link


def git_dir(worktree: Path) -> Path:
    """The git repository jj stores its commits in."""
    store = repo_dir(worktree) / "store"
    target = store / "git_target"
    if not target.is_file():
        raise JjFailed(f"{worktree} is not backed by git ({target} missing)")
    path = Path(target.read_text(encoding="utf-8").strip())
    return path if path.is_absolute() else (store / path).resolve()


class JjBackend:
    """Capture and restore jj working copies."""

    name = "jj"
    stamps_commits = False

    def __init__(self, jj: JjBinary, *, timeout_s: float,
                 max_new_file_size: int | None = None, deadline: float | None = None) -> None:
        self.jj = jj
        self.timeout_s = timeout_s
        #: ``time.monotonic()`` past which no jj command may run (a hook's
        #: budget), or None.
        self.deadline = deadline
        self.max_new_file_size = max_new_file_size or DEFAULT_MAX_NEW_FILE_SIZE
        #: What the last jj command's snapshot left out.
        self.skipped: tuple[Skipped, ...] = ()
        #: The snapshot the last restore ended with (see ``Backend.restored``).
        self.restored: Snapshot | None = None

    def _timeout(self) -> float:
        """``timeout_s``, cut to what is left before ``deadline`` as this jj
        command starts, not as the backend was made: what ran in between (the
        ``jj --version`` check, an earlier command of the same capture) comes
        out of it, so a hanging jj is still a ``jj-timeout`` gap filed within
        the hook's budget rather than its watchdog's ``timeout``."""
        if self.deadline is None:
            return self.timeout_s
        return max(min(self.timeout_s, self.deadline - time.monotonic()), 0.1)

    def _run(self, worktree: Path, *args: str) -> str:
        """Run a jj command (each one snapshots the working copy first).

        A path jj cannot read fails jj's snapshot outright; a new one can be
        kept out of it (``snapshot.auto-track``), so on such a failure the
        unreadable paths are found and the command is run once more without
        them.  A tracked file that changed and then became unreadable, or an
        unreadable folder, still fails jj (it opens the file, or the folder's
        ``.gitignore``): that is an ``unreadable-path`` error naming them.
        """
        if not worktree.is_dir():
            raise WorktreeMissing(f"worktree {worktree} does not exist")
        size = f"snapshot.max-new-file-size={self.max_new_file_size}"
        # Paths this process already found unreadable here are left out from
        # the first run while they stay so: one jj run, not three, per capture.
        track, known = _left_out.get(worktree, ("", []))
        unreadable = [p for p in known if is_unreadable(worktree, p)]
        config = [size] + ([_auto_track_config(track, unreadable)] if unreadable else [])
        done = self._exec(worktree, config, args)
        if done.returncode != 0 and _permission_denied(done.stderr):
            found = find_unreadable(worktree)
            if found and found != unreadable:
                track = track or self._auto_track(worktree)
                unreadable = found
                done = self._exec(worktree, [size, _auto_track_config(track, found)], args)
        if unreadable:
            _left_out[worktree] = (track, unreadable)
        else:
            _left_out.pop(worktree, None)
        if done.returncode != 0:
            if is_snapshot_race(done.stderr):
                raise _StillMoving(f"jj {args[0]} in {worktree}: the tree kept changing "
                                   f"under {MAX_TRIES} snapshots")
            if unreadable and _permission_denied(done.stderr):
                raise UnreadablePath(f"jj cannot snapshot {worktree} around unreadable "
                                     f"path(s) {_listing(unreadable)}")
            raise _jj_error(worktree, args[0], done.stderr)
        self.skipped = (tuple(Skipped(p, "unreadable-path") for p in unreadable)
                        + tuple(Skipped(p, "file-too-large") for p in _refused(done.stderr))
                        + tuple(Skipped(p, "unreadable-path") for p in _not_utf8(done.stderr)))
        return done.stdout

    def _exec(self, worktree: Path, config: list[str],
              args: Sequence[str]) -> proc.Finished:
        """Run jj, again (at most ``MAX_TRIES`` times in all) while its
        snapshot fails because a path changed under it (``moving``)."""
        for attempt in range(1, MAX_TRIES + 1):
            if attempt > 1:
                pause(attempt - 1)
            done = self._exec_once(worktree, config, args)
            if done.returncode == 0 or not is_snapshot_race(done.stderr):
                break
        return done

    def _exec_once(self, worktree: Path, config: list[str],
                   args: Sequence[str]) -> proc.Finished:
        # "-R ." with the worktree as cwd names the same workspace, and works
        # where the path is not UTF-8 (jj refuses such an argument).
        argv = [self.jj.path, "--no-pager", "--color=never", "-R", "."]
        for item in config:
            argv += ["--config", item]
        try:
            return proc.run([*argv, *args], cwd=str(worktree), timeout=self._timeout(),
                            env=jj_env())
        except proc.TimedOut as exc:
            raise JjTimeout(f"jj {args[0]} in {worktree}: {exc}") from exc
        except OSError as exc:
            raise JjMissing(f"cannot run {self.jj.path}: {exc.strerror}") from exc

    def _auto_track(self, worktree: Path) -> str:
        """The user's ``snapshot.auto-track`` fileset (jj's default: all())."""
        try:
            done = proc.run([self.jj.path, "--no-pager", "--color=never", "-R", str(worktree),
                             "--ignore-working-copy", "config", "get", "snapshot.auto-track"],
                            cwd=str(worktree), timeout=self._timeout(), env=jj_env())
        except (proc.TimedOut, OSError):
            return "all()"
        value = done.stdout.strip()
        return value if done.returncode == 0 and value else "all()"

    def snapshot(
        self,
        worktree: Path,
        stamps: Sequence[Stamp] = (),
        *,
        changed_paths: Collection[str] | None = None,
    ) -> Snapshot:
        # jj scans the working copy itself and names no attempt in its
        # commits: ``stamps`` and ``changed_paths`` are not needed here.
        log = ("log", "-r", "@", "--no-graph", "-T", _TEMPLATE)
        moving: tuple[Skipped, ...] = ()
        try:
            out = self._run(worktree, *log)
        except _StillMoving:
            # Still moving after every try: answer with jj's last snapshot
            # (a state the tree really had); the next capture takes the rest.
            # The tree now may hold anything: a restore must not write over it.
            out = self._run(worktree, "--ignore-working-copy", *log)
            moving = (Skipped("", MOVING),)
        fields = out.strip().split()
        if len(fields) != 2 or not _HEX.fullmatch(fields[0]):
            raise JjFailed(f"unexpected jj log output {out.strip()[:200]!r}")
        commit_id, change_id = fields
        gone = missing_repository_part(worktree)
        if gone is not None:
            # Deleted while jj ran: the swap check's mark and the pin would
            # be made again in folders the delete already emptied.
            raise WorktreeMissing(f"worktree {worktree} was deleted during its capture "
                                  f"({gone} is gone): nothing recorded")
        if not moving:
            check_swapped(worktree, git_dir(worktree), commit_id)
        pin(git_dir(worktree), commit_id)
        return Snapshot(commit_id, change_id, _operation_id(worktree),
                        skipped=self.skipped + moving)

    def restore(self, worktree: Path, commit_id: str, *, pre_restore: str | None = None,
                paths: Sequence[str] | None = None, dry_run: bool = False,
                progress: Progress | None = None) -> Changes:
        """Write ``commit_id``'s files with the confined writer (never ``jj
        restore``, whose checkout follows a folder swapped for a symlink),
        then snapshot so jj records them; that snapshot is kept as
        ``restored``, for the verification."""
        from durability.backends.tree_files import write_commit

        self.restored = None
        current = pre_restore or self.snapshot(worktree).commit_id
        done = write_commit(git_dir(worktree), worktree, commit_id, current,
                            pre_restore=pre_restore, paths=paths,
                            dry_run=dry_run, progress=progress)
        if not dry_run:
            self.restored = self._record_written(worktree, commit_id, paths)
        return done

    def _record_written(self, worktree: Path, commit_id: str,
                        paths: Sequence[str] | None) -> Snapshot | None:
        """Snapshot the tree just written, so jj records it; the snapshot, or
        None when files had to be tracked after it (then it is not the tree
        jj holds now).

        Files of the checkpoint that jj's snapshot leaves untracked (ignored
        now, or over jj's new-file size limit) are tracked: ``jj restore``
        would have tracked them, so the restore does too (those it wrote:
        the ``paths`` restored, when given).  Usually there are none, and
        this one jj run is the restore's last (decision 0054)."""
        import pygit2

        from durability.backends.selection import covers

        after = self.snapshot(worktree)
        repo = pygit2.Repository(str(git_dir(worktree)))
        want = repo[commit_id].peel(pygit2.Commit).tree
        got = repo[after.commit_id].peel(pygit2.Commit).tree
        if want.id == got.id:
            return after
        missing = [d.new_file.path for d in got.diff_to_tree(want).deltas
                   if d.status == pygit2.enums.DeltaStatus.ADDED
                   and (paths is None or covers(paths, d.new_file.path))]
        if not missing:
            return after  # it differs otherwise: the verification names where
        self._run(worktree, "file", "track", "--include-ignored",
                  *(_root_file(p) for p in missing))
        return None

    def tree_id(self, worktree: Path, commit_id: str) -> str:
        import pygit2

        repo = pygit2.Repository(str(git_dir(worktree)))
        try:
            return str(repo[commit_id].peel(pygit2.Commit).tree_id)
        except (KeyError, ValueError) as exc:
            raise JjFailed(f"commit {commit_id} is not in {worktree}'s store") from exc

    @staticmethod
    def checkpoint_repository(worktree: Path) -> pygit2.Repository:
        """The git store behind jj (see ``Backend.checkpoint_repository``):
        ``.git`` when colocated, else ``.jj/repo/store/git`` (bare), as
        ``git_dir`` finds it; a second workspace's is the first one's."""
        import pygit2

        return pygit2.Repository(str(git_dir(worktree)),
                                 pygit2.enums.RepositoryOpenFlag.NO_SEARCH)


class _StillMoving(JjFailed):
    """jj's snapshot failed on a path changing under it on every try."""


def _root_file(path: str) -> str:
    """A jj fileset naming exactly one worktree-relative path."""
    quoted = path.replace("\\", "\\\\").replace('"', '\\"')
    return f'root-file:"{quoted}"'


def check_swapped(worktree: Path, git: Path, commit_id: str) -> None:
    """Refuse a snapshot that holds a path below a folder that is now a
    symlink (or a file): jj lists and reads the tree by path strings, so a
    folder swapped for a link during its snapshot sends its reads through
    the link (another folder's files, or a folder outside the worktree).
    The folders of every path the snapshot added or changed are walked from
    the worktree root without following links (``confined``); one that is
    not a folder is a ``path-swapped`` error, and nothing is pinned or
    recorded.  The next capture takes the tree as it is then.

    What the snapshot changed is the difference from the last snapshot this
    check passed (its commit is kept in ``.jj/durability``), not from the
    working-copy commit's parent: that parent may be the root, or a long
    session old, and then every folder of the tree was opened on every
    capture.  Without a readable last one (the first capture, another
    store), the parent is the baseline."""
    import pygit2

    from durability.backends.confined import ConfinedTree
    from durability.ground.errors import RestoreError

    last = _last_checked(worktree)
    if last == commit_id:
        return  # nothing new since a snapshot this check passed
    try:
        repo = pygit2.Repository(str(git))
        commit = repo[commit_id].peel(pygit2.Commit)
        base = None
        if last is not None:
            try:
                base = repo[last].peel(pygit2.Commit).tree
            except (KeyError, ValueError, pygit2.GitError):
                base = None
        if base is None:
            try:
                base = commit.parents[0].tree
            except (IndexError, KeyError, pygit2.GitError):
                base = repo[repo.TreeBuilder().write()].peel(pygit2.Tree)
        folders = _changed_folders(repo, base, commit.tree)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise JjFailed(f"cannot read commit {commit_id} from {git}: {exc}") from exc
    folders.discard("")
    if not folders:
        _remember_checked(worktree, commit_id)
        return
    with ConfinedTree(worktree) as tree:
        for folder in sorted(folders):
            try:
                tree.dir_fd(folder)
            except RestoreError:
                raise PathSwapped(
                    f"jj's snapshot of {worktree} read below {_shown(folder)}, which is not "
                    "a folder now (swapped for a symlink or a file during the capture): "
                    "nothing recorded, the next capture takes the tree as it is") from None
            except OSError:
                continue  # gone or unreadable since: a writer, not a link
    _remember_checked(worktree, commit_id)


def _changed_folders(repo: Any, old: Any, new: Any) -> set[str]:
    """The folders holding a file (or link, or gitlink) that ``new`` adds or
    changes from ``old``.  A subtree whose id is unchanged is not entered
    (libgit2's tree-to-tree diff walks every entry of both trees: 40-70 ms
    for one changed file among 30,000); a stack, not recursion."""
    import pygit2

    tree_mode = int(pygit2.enums.FileMode.TREE)
    found: set[str] = set()
    stack: list[tuple[str, Any, Any]] = [("", old, new)]
    while stack:
        prefix, before, after = stack.pop()
        was = {e.raw_name: e for e in before} if before is not None else {}
        for entry in after:
            prev = was.get(entry.raw_name)
            if prev is not None and prev.id == entry.id and prev.filemode == entry.filemode:
                continue
            name = os.fsdecode(entry.raw_name)
            path = f"{prefix}/{name}" if prefix else name
            if entry.filemode == tree_mode:
                below = repo[prev.id] if prev is not None and prev.filemode == tree_mode \
                    else None
                stack.append((path, below, repo[entry.id]))
            else:
                found.add(prefix)
    return found


#: Where ``check_swapped`` keeps the last commit it passed, per workspace.
_CHECKED = ("durability", "swap-checked")


def _last_checked(worktree: Path) -> str | None:
    try:
        with open(worktree.joinpath(".jj", *_CHECKED), "rb") as f:
            text = f.read(100).decode("ascii").strip()
    except (OSError, UnicodeError):
        return None
    return text if _HEX.fullmatch(text) else None


def _remember_checked(worktree: Path, commit_id: str) -> None:
    """Best effort: without it the next check takes the parent as baseline."""
    path = worktree.joinpath(".jj", *_CHECKED)
    try:
        path.parent.mkdir(exist_ok=True)
        replace_file(path, (commit_id + "\n").encode("ascii"), mode=0o644)
    except OSError:
        pass

def _shown(path: str) -> str:
    return path if len(path) <= 120 else f"{path[:60]}...{path[-40:]}"


def pin(git: Path, commit_id: str) -> None:
    """Keep ``commit_id`` reachable for git gc (and so for jj util gc)."""
    import pygit2

    try:
        repo = pygit2.Repository(str(git))
        repo.references.create(PIN_PREFIX + commit_id, pygit2.Oid(hex=commit_id), force=True)
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise JjFailed(f"cannot pin {commit_id} in {git}: {exc}") from exc


def _operation_id(worktree: Path) -> str | None:
    """The operation just written: the single op head, when there is one
    (a concurrent jj command elsewhere may briefly leave two)."""
    try:
        heads = os.listdir(repo_dir(worktree) / "op_heads" / "heads")
    except OSError:
        return None
    return heads[0] if len(heads) == 1 else None


#: worktree -> (the user's snapshot.auto-track, paths found unreadable there).
_left_out: dict[Path, tuple[str, list[str]]] = {}


def _auto_track_config(track: str, paths: Sequence[str]) -> str:
    """A ``--config`` value that keeps ``paths`` out of jj's snapshot."""
    left_out = " | ".join(map(_fileset_path, paths))
    return "snapshot.auto-track=" + json.dumps(f"({track}) & ~({left_out})",
                                               ensure_ascii=False)


def _permission_denied(stderr: str) -> bool:
    return "Permission denied" in stderr or "os error 13" in stderr


def _fileset_path(path: str) -> str:
    """A fileset naming exactly ``path`` (a file) or everything under it."""
    literal = '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"root:{literal}"


def _not_utf8(stderr: str) -> list[str]:
    """The paths jj's "not valid UTF-8" warning names, in its order, as
    ``str`` with the undecodable bytes as surrogates (``os.fsdecode``)."""
    paths: list[str] = []
    lines = iter(stderr.splitlines())
    for line in lines:
        if _NOT_UTF8_HEADER not in line:
            continue
        for item in lines:
            match = _NOT_UTF8_LINE.match(item)
            if match is None:
                break
            name = _unescape_rust(match["name"])
            folder = match["folder"]
            raw = name if folder == "." else folder.encode("utf-8", "surrogateescape") + b"/" + name
            paths.append(raw.decode("utf-8", "surrogateescape"))
    return paths


def _unescape_rust(text: str) -> bytes:
    """The bytes of a name Rust's ``Debug`` escaped (``\\xFF``, ``\\u{7f}``,
    ``\\n``, ``\\"``...)."""
    out = bytearray()
    pos = 0
    for match in _RUST_ESCAPE.finditer(text):
        out += text[pos:match.start()].encode("utf-8", "surrogateescape")
        code = match[1]
        if code[0] == "x" and len(code) == 3:
            out.append(int(code[1:], 16))
        elif code.startswith("u{"):
            out += chr(int(code[2:-1], 16)).encode("utf-8", "surrogatepass")
        else:
            out += _RUST_SIMPLE.get(code, code.encode("utf-8"))
        pos = match.end()
    out += text[pos:].encode("utf-8", "surrogateescape")
    return bytes(out)


def _refused(stderr: str) -> list[str]:
    """The paths jj's "Refused to snapshot" warning names, in its order."""
    paths: list[str] = []
    lines = iter(stderr.splitlines())
    for line in lines:
        if _REFUSED_HEADER not in line:
            continue
        for item in lines:
            match = _REFUSED_LINE.match(item)
            if match is None:
                break
            paths.append(match["path"])
    return paths


def _long_path(stderr: str) -> str:
    """The over-long path jj names, shortened, or what it said."""
    match = re.search(r"(/\S{60,}?)(?::| \(| Caused|$)", stderr)
    found = match[1] if match else " ".join(stderr.split())
    return found if len(found) <= 120 else f"{found[:60]}...{found[-40:]}"


def _listing(paths: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _jj_error(worktree: Path, command: str, stderr: str) -> Exception:
    text = " ".join(stderr.split())[:500]
    if "no jj repo" in text.lower():
        return NotAJjRepo(f"{worktree} is not a jj repository")
    if "(os error 28)" in stderr or "No space left on device" in stderr:
        from durability.backends.space import disk_full

        full = disk_full(JjFailed(text), [worktree])
        if full is not None:
            return full
    if "(os error 36)" in stderr:
        # ENAMETOOLONG: a path past PATH_MAX, which jj cannot read.
        return PathTooLong(f"jj cannot snapshot {worktree}: a path in it is longer than "
                           f"the system allows a path to be ({_long_path(stderr)})")
    return JjFailed(f"jj {command} failed in {worktree}: {text or 'no message'}")
