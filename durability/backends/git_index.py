"""Staging a worktree into its private index, as ``git add -A`` would.

A full scan asks libgit2 for the differences between the private index and
the working directory (untracked files included, ignored ones not: the ignore
rules are git's own, ``.gitignore``, ``.git/info/exclude`` and
``core.excludesFile``), then stages exactly those paths.  Unchanged files cost
one ``lstat``: libgit2 trusts an entry whose stat data matches, except when the
file is as new as the index file itself (git's "racily clean" rule), which is
why the index is written after every full scan.

A watcher-informed scan stages only the paths a watcher saw change.  It is
only used once this process has fully scanned the worktree, and falls back
to a full scan whenever the ignore rules or attributes may have changed.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import DeltaStatus, DiffOption, FileMode
from pygit2.ffi import C, ffi
from pygit2.utils import StrArray

from durability.backends.git_repo import common_dir, open_worktree, private_index_path
from durability.backends.moving import (
    MAX_RETRIES_PER_CAPTURE,
    MAX_TRIES,
    is_git_read_race,
    pause,
    stat_key,
)
from durability.backends.unreadable import find_unreadable, is_unreadable
from durability.errors import GitFailed

__all__ = ["WorktreeIndex", "index_lock_path"]

log = logging.getLogger("durability.backends")

# UPDATE_INDEX: when an entry's stat data is stale but its content turns out
# unchanged (a seeded entry, a touched file), libgit2 refreshes the entry's
# stat data in the private index, so the next scan does not hash it again.
_SCAN_FLAGS = (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS
               | DiffOption.INCLUDE_TYPECHANGE | DiffOption.UPDATE_INDEX)
# A change to any of these can change what every other path stages to.
_RULE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})


class WorktreeIndex:
    """One worktree's repository and private index, kept open between captures.

    Not thread-safe by itself: callers hold ``lock`` (the service runs one
    capture per worktree at a time; the lock makes that a guarantee).
    """

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self.lock = threading.Lock()
        try:
            self.repo, self.index = open_worktree(worktree)
        except GitFailed:
            # A first write of the private index killed midway leaves its
            # lock and no index: cleared as in ``clear_stale_lock``.
            if not _clear_lock(index_lock_path(pygit2.Repository(str(worktree)), worktree)):
                raise
            self.repo, self.index = open_worktree(worktree)
        #: Set once this process has fully scanned the worktree: before that,
        #: a watcher's changed paths say nothing about the rest of the tree.
        self.scanned = False
        #: ``"full"`` or ``"paths"``: how the last ``stage`` scanned (tests and
        #: the benchmark check that informed captures really are informed).
        self.last_scan = ""
        self._rules = self._rule_stamp()
        self._submodules: list[str] = []
        #: Paths the last ``stage`` left out because they cannot be read: an
        #: entry the index held for one keeps its previous content.
        self.skipped: list[str] = []
        #: Paths still changing after ``MAX_TRIES`` reads in the last
        #: ``stage``: their entries keep what was last read consistently,
        #: and the next stage reads them again (no gap: see ``moving``).
        self.moving: set[str] = set()
        self._retries_left = MAX_RETRIES_PER_CAPTURE
        self._index_lock = index_lock_path(self.repo, worktree)

    def clear_stale_lock(self) -> bool:
        """Remove the private index's lock file, if one is there: True if so.

        libgit2 writes the index through ``<index>.lock`` and renames it; a
        process killed between the two leaves the lock behind, and every
        later write fails "the index is locked".  Only the toolkit writes
        the private index, and only under the worktree lock every capture and
        restore holds (``Capturer.lock``): a lock file found while holding it
        is a dead writer's, never a live one's.
        """
        return _clear_lock(self._index_lock)

    # -- scanning ------------------------------------------------------------

    def stage(self, changed_paths: Collection[str] | None = None) -> pygit2.Oid:
        """Bring the private index up to date with the worktree; its tree id.
        The caller holds the worktree lock (see ``clear_stale_lock``)."""
        self.clear_stale_lock()
        rules = self._rule_stamp()
        self._retries_left = MAX_RETRIES_PER_CAPTURE
        informed = (changed_paths is not None and self.scanned and rules == self._rules
                    and not any(PurePosixPath(p).name in _RULE_FILES for p in changed_paths))
        if informed:
            assert changed_paths is not None
            # A diff that never settled leaves the rest for a full scan.
            self.scanned = self._stage_paths(changed_paths)
            self.last_scan = "paths"
        else:
            settled = self._stage_all()
            self.index.write()
            self._submodules = self.repo.listall_submodules()
            self.scanned = settled
            self.last_scan = "full"
        self._rules = rules
        return self.index.write_tree()

    def _stage_all(self) -> bool:
        self.skipped = [p for p in self.skipped if is_unreadable(self.worktree, p)]
        # A moving path's entry has no stat data, so the full diff rereads it.
        self.moving.clear()
        return self._scan([""], None)

    def _stage_paths(self, paths: Collection[str]) -> bool:
        """Restage only ``paths`` (a folder: everything under it).

        The same libgit2 diff as a full scan, limited to those paths: libgit2
        descends only into the folders named, so the cost follows the paths,
        not the size of the tree.
        """
        cleaned = {c for c in map(_clean, paths) if c is not None}
        # A path left out before and readable now is restaged: a mode change
        # alone may not reach a watcher.
        cleaned |= {p for p in self.skipped if not is_unreadable(self.worktree, p)}
        # A path still moving at the last capture may have stopped since
        # without the watcher reporting it again.
        cleaned |= self.moving
        self.moving.clear()
        # A submodule's HEAD moves inside the superproject's .git (modules/),
        # where a watcher does not look: its gitlink is always rechecked (one
        # HEAD read each), and a path inside it stands for the submodule.
        for sub in self._submodules:
            cleaned = {sub if c.startswith(sub + "/") else c for c in cleaned} | {sub}
        self.skipped = [p for p in self.skipped if is_unreadable(self.worktree, p)]
        return self._scan(sorted(cleaned), sorted(cleaned)) if cleaned else True

    def _scan(self, under: list[str], literal: list[str] | None) -> bool:
        """Stage what changed under ``under`` (``literal``: those paths only;
        None: everything), leaving out what cannot be read.  False when the
        tree kept changing under every diff: the index then stays as the last
        capture left it, a state the tree really had.

        libgit2 silently skips a folder it cannot list and fails the whole
        diff on a changed tracked file it cannot open.  So unreadable folders
        are looked for first (one listing per folder, no per-file check), and
        files only when the diff fails; every path found stays out of the
        diff (an entry the index holds for it keeps its last captured
        content) and is remembered in ``skipped``, so the next scan leaves it
        out at once while it stays unreadable.  A diff that fails because a
        path changed while libgit2 read it is run again (``MAX_TRIES``).
        """
        folders = find_unreadable(self.worktree, under, ignored=self._ignored, files=False)
        self.skipped = sorted({*self.skipped, *folders})
        for attempt in range(1, MAX_TRIES + 1):
            try:
                diff = self._diff(literal)
            except (pygit2.GitError, KeyError, OSError) as exc:
                found = set(find_unreadable(self.worktree, under, ignored=self._ignored))
                if not found - set(self.skipped) and not is_git_read_race(exc):
                    raise
                self.skipped = sorted({*self.skipped, *found})
                if attempt < MAX_TRIES:
                    pause(attempt)
                continue
            self._apply(diff)
            return True
        return False

    def _diff(self, literal: list[str] | None) -> pygit2.Diff:
        if not self.skipped:
            if literal is None:
                return self.index.diff_to_workdir(flags=_SCAN_FLAGS)
            return _diff_paths(self.repo, self.index, literal)
        # The first pattern that matches a path decides: exclusions first.
        spec = [f"!{_escape(p)}" for p in self.skipped]
        spec += ["*"] if literal is None else [_escape(c) for c in literal]
        return _diff_paths(self.repo, self.index, spec, literal=False)

    def _ignored(self, path: str) -> bool:
        """Whether git ignores ``path`` (a folder's ends with ``/``): what
        git ignores is never captured, readable or not."""
        try:
            return bool(self.repo.path_is_ignored(path))
        except pygit2.GitError:
            return False

    def _apply(self, diff: pygit2.Diff) -> None:
        # Deletions first, each only if still there: adding ``a`` (a file or
        # link where a folder was) drops every ``a/...`` entry, and adding
        # ``a/e/f`` drops a file entry ``a``; whichever order libgit2 lists
        # the deltas in (it depends on how the siblings' names sort), a later
        # removal of such an entry must not fail the capture.
        deltas = list(diff.deltas)
        for delta in deltas:
            if delta.status == DeltaStatus.DELETED and delta.old_file.path in self.index:
                self.index.remove(delta.old_file.path)
        for delta in deltas:
            if delta.status != DeltaStatus.DELETED:
                self._add(delta.new_file.path)

    def _add(self, path: str) -> None:
        """Stage ``path`` as it is on disk, reading it again while it changes
        under the read (at most ``MAX_TRIES`` times, within the capture's
        ``MAX_RETRIES_PER_CAPTURE``)."""
        if path.endswith("/"):
            # An untracked folder libgit2 did not descend into is another
            # repository: git add -A records it as a gitlink to its HEAD.
            return self._add_embedded_repo(path.rstrip("/"))
        previous = self._entry(path)
        for attempt in range(1, MAX_TRIES + 1):
            if attempt > 1:
                if self._retries_left <= 0:
                    break
                self._retries_left -= 1
                pause(attempt - 1)
            if self._add_once(path):
                return
        # Still moving: keep what the last capture read consistently (or
        # nothing, for a new path); the next capture reads it again.
        self._put_back(path, previous)
        self.moving.add(path)

    def _add_once(self, path: str) -> bool:
        """One read of ``path``: True when it is staged (or dropped, or left
        out as unreadable) and did not change while it was read."""
        before = stat_key(self.worktree / path)
        if before is None or (stat.S_ISDIR(before[0]) and not _is_gitlink(self.index, path)):
            # Gone, or a file that became a folder (its files come as their
            # own deltas): forget the old entry.
            if path in self.index:
                self.index.remove(path)
            return True
        try:
            self.index.add(path)
        except (pygit2.GitError, KeyError, OSError):
            # Made unreadable after the walk that looked for such files; any
            # other failure here is the path changing while libgit2 read it
            # ("failed to read file into stream", "could not find ... to
            # stat", "it is a directory").
            if not is_unreadable(self.worktree, path):
                return False
            self.skipped = sorted({*self.skipped, path})
            return True
        # Unchanged stat data across the read (ctime moves on every write,
        # truncate, chmod and rename) means libgit2 read one version.
        return stat_key(self.worktree / path) == before

    def record(self, written: Iterable[tuple[str, pygit2.Oid, int, os.stat_result]]) -> None:
        """Stage each ``(path, oid, mode, st)``: ``path`` as ``oid`` with the
        stat data ``st`` of the file holding it, without reading the file: for
        files this process has just written from those very blobs (a restore).
        pygit2's ``IndexEntry`` carries no stat data, so each entry is built
        through pygit2's own cffi binding, as libgit2 fills one from a stat
        (one entry struct, refilled: libgit2 copies what it is given).

        libgit2 checks that each id names an object in the store before it
        takes the entry: a read of the object's header, most of the cost of
        an add (9 of 12 microseconds for a loose object) unless the object
        is in the repository's object cache (see ``git_restore``'s
        ``_blobs_cached``, which keeps the blobs a restore wrote there)."""
        centry = ffi.new("git_index_entry *")
        ident = ffi.buffer(ffi.addressof(centry, "id"))
        ctime, mtime = centry.ctime, centry.mtime
        for path, oid, mode, st in written:
            ident[:] = oid.raw
            ctime.seconds, ctime.nanoseconds = divmod(st.st_ctime_ns, 1_000_000_000)
            mtime.seconds, mtime.nanoseconds = divmod(st.st_mtime_ns, 1_000_000_000)
            # libgit2 keeps 32 bits of each, as git does.
            centry.dev, centry.ino = st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF
            centry.uid, centry.gid = st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF
            centry.file_size = st.st_size & 0xFFFFFFFF
            centry.mode = mode
            name_buf = ffi.new("char[]", os.fsencode(path))
            centry.path = name_buf
            _check(C.git_index_add(self.index._index, centry))

    def _entry(self, path: str) -> pygit2.IndexEntry | None:
        try:
            return self.index[path]
        except KeyError:
            return None

    def _put_back(self, path: str, previous: pygit2.IndexEntry | None) -> None:
        """Restore ``path``'s entry as it was before this stage.  pygit2's
        entry carries no stat data, so the next full diff rereads the file."""
        if previous is not None:
            self.index.add(previous)
        elif path in self.index:
            self.index.remove(path)

    def _add_embedded_repo(self, path: str) -> None:
        try:
            nested = pygit2.Repository(str(self.worktree / path))
            head = nested.head.peel(pygit2.Commit).id
        except (pygit2.GitError, KeyError):
            return  # git add -A skips a repository with no commit checked out
        self.index.add(pygit2.IndexEntry(path, head, FileMode.COMMIT))

    def _rule_stamp(self) -> tuple[object, ...]:
        """Stat data of the ignore files a watcher inside the worktree cannot see."""
        config = self.repo.config
        try:
            excludes = config["core.excludesFile"]
        except KeyError:
            excludes = None
        # A linked worktree's git reads the shared info/exclude, not its own git dir's.
        paths = [common_dir(Path(self.repo.path)) / "info" / "exclude"]
        if isinstance(excludes, str):
            paths.append(Path(os.path.expanduser(excludes)))
        return tuple(_stat_key(p) for p in paths)


def index_lock_path(repo: pygit2.Repository, worktree: Path) -> Path:
    """The lock file libgit2 takes while it writes ``worktree``'s private index."""
    index = private_index_path(repo, worktree)
    return index.with_name(index.name + ".lock")


def _clear_lock(lock: Path) -> bool:
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return False
    log.warning("removed the stale private index lock %s (left by a capture that was "
                "killed while writing it)", lock)
    return True


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _clean(path: str) -> str | None:
    """A worktree-relative path in git's form, or None for one to ignore
    (outside the worktree, or inside ``.git``)."""
    parts = [p for p in PurePosixPath(path.replace(os.sep, "/")).parts if p not in ("", ".")]
    if not parts or ".." in parts or parts[0] == ".git" or path.startswith("/"):
        return None
    return "/".join(parts)


def _is_gitlink(index: pygit2.Index, path: str) -> bool:
    """Whether the index records ``path`` as a submodule (a gitlink)."""
    try:
        return bool(index[path].mode == FileMode.COMMIT)
    except KeyError:
        return False


def _escape(path: str) -> str:
    """``path`` as a libgit2 pathspec pattern that matches only itself."""
    return "".join("\\" + c if c in "*?[]\\!" else c for c in path)


def _diff_paths(repo: pygit2.Repository, index: pygit2.Index, paths: list[str], *,
                literal: bool = True) -> pygit2.Diff:
    """Index-to-workdir diff limited to literal ``paths`` (or, with
    ``literal=False``, to libgit2 pathspec patterns: the first that matches
    a path decides, and ``!`` excludes).

    pygit2's ``diff_to_workdir`` takes no pathspec, so the same libgit2 call
    is made here through pygit2's own cffi binding.
    """
    opts = ffi.new("git_diff_options *")
    _check(C.git_diff_options_init(opts, 1))
    opts.flags = int(_SCAN_FLAGS | DiffOption.DISABLE_PATHSPEC_MATCH if literal else _SCAN_FLAGS)
    out = ffi.new("git_diff **")
    with StrArray(paths) as array:
        array.assign_to(opts.pathspec)
        _check(C.git_diff_index_to_workdir(out, repo._repo, index._index, opts))
    return pygit2.Diff.from_c(bytes(ffi.buffer(out)[:]), repo)


def _check(rc: int) -> None:
    if rc < 0:
        from pygit2.errors import check_error

        check_error(rc)
