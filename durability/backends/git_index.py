"""Staging a worktree into its private index, as ``git add -A`` would.

A full scan walks the working directory against the private index
(``git_scan``: confined from the worktree root, at any depth; untracked files
included, ignored ones not: the ignore rules are git's own, ``.gitignore``,
``.git/info/exclude`` and ``core.excludesFile``), then stages exactly the
paths that changed.  Unchanged files cost one ``lstat``: an entry whose stat
data matches is trusted, except when the file is as new as the index file
itself (git's "racily clean" rule), which is why the index is written after
every full scan.

A watcher-informed scan stages only the paths a watcher saw change.  It is
only used once this process has fully scanned the worktree, and falls back
to a full scan whenever the ignore rules or attributes may have changed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.ffi import C, ffi

from durability.backends.git_repo import common_dir, open_worktree, private_index_path
from durability.backends.git_scan import Scan
from durability.backends.git_store import Store
from durability.backends.index_lock import Identity, identity, writing
from durability.backends.moving import MAX_RETRIES_PER_CAPTURE
from durability.backends.unreadable import is_unreadable
from durability.ground.git_prescan import Prescan

__all__ = ["WorktreeIndex", "index_lock_path"]

log = logging.getLogger("durability.backends")

#: A first capture that took git's paths (the hook's, which exits next)
#: leaves the copy of the user's index as it is when git named at most this
#: many paths: writing 100,000 entries costs more than the next process's
#: full scan rereading these few (it rereads nothing else: every other
#: entry's stat data is the copy's), and the copy is a correct index.
UNWRITTEN_AT_MOST = 1000

# A change to any of these can change what every other path stages to.
_RULE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules"})

#: The tests turn it on: every tree an informed stage writes from its
#: restaged paths is then checked against libgit2's ``write_tree``.
CHECK_TREES = False
#: ``_old_entry``: the path is a folder, or below a file, in the old tree.
_FOLDER = object()
_COMMIT = int(pygit2.enums.FileMode.COMMIT)
#: ``_tree_of_paths`` writes a folder per call, recursively: a restaged path
#: with this many folders above it is left to ``write_tree``.
_DEEPEST = 200


class WorktreeIndex:
    """One worktree's repository and private index, kept open between captures.

    Not thread-safe by itself: callers hold ``lock`` (the service runs one
    capture per worktree at a time; the lock makes that a guarantee).
    """

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self.lock = threading.Lock()
        # A first write of the private index killed midway leaves its lock
        # and no index: ``open_worktree`` clears it as ``write`` does.
        self.repo, self.index, copied, on_disk = open_worktree(worktree)
        #: The identity of the index file as this object last read or wrote
        #: it (``index_lock.identity``): another process's write differs.
        self._on_disk = on_disk
        #: Whether the next full scan may take its paths from libgit2's diff
        #: (``_hinted``): once, the first in this process, of a just-copied
        #: index or of one an earlier process wrote (decision 0062), not of
        #: one just seeded entry by entry; or the ``git status`` the hook
        #: started on a copy (``git_prescan``).
        self._hint: bool | Prescan = copied
        #: Set once this process has fully scanned the worktree: before that,
        #: a watcher's changed paths say nothing about the rest of the tree.
        self.scanned = False
        #: ``"full"`` or ``"paths"``: how the last ``stage`` scanned (tests and
        #: the benchmark check that informed captures really are informed).
        self.last_scan = ""
        self._rules = self._rule_stamp()
        #: The submodules (every gitlink), listed on first use (``_gitlinks``).
        self._submodules: list[str] | None = None
        #: Paths the last ``stage`` left out because they cannot be read: an
        #: entry the index held for one keeps its previous content.
        self.skipped: list[str] = []
        #: Paths still changing after ``MAX_TRIES`` reads in the last
        #: ``stage``: their entries keep what was last read consistently,
        #: and the next stage reads them again (no gap: see ``moving``).
        self.moving: set[str] = set()
        self._retries_left = MAX_RETRIES_PER_CAPTURE
        self._index_path = private_index_path(self.repo, worktree)
        #: The private checkpoint store: commits and refs; the staging
        #: repository reads it first and writes its new objects into it.
        self.store = Store(common_dir(Path(self.repo.path)))
        self.store.lend(self.repo)
        #: A tree the store is known to hold whole (the last one owned).
        self._owned: pygit2.Oid | None = None
        #: The tree of the index as it stands, when this process wrote it
        #: last (``stage``); None once anything else may have changed it.
        self.tree: pygit2.Oid | None = None
        #: The paths the last scan restaged (added, changed or removed).
        self._restaged: list[str] = []
        #: Each tree written from the restaged paths checked against
        #: ``write_tree`` (``CHECK_TREES``; a test turns it off for one run).
        self.check_trees = CHECK_TREES
        #: Trees written from the restaged paths (the differential test checks it is used).
        self.trees_of_paths = 0

    def own(self, tree: pygit2.Oid) -> None:
        """Make the store hold every object of ``tree`` (``git_store``)."""
        try:
            self.store.own(self.repo, tree, self._owned)
        except KeyError:
            # The last owned tree is gone (durability gc pruned it): look at all.
            self.store.own(self.repo, tree, None)
        self._owned = tree

    def own_parents(self, commits: Iterable[str]) -> None:
        """Link the user's store in when a commit's parent is a user commit
        the store does not hold (a first checkpoint on a new HEAD)."""
        for commit in commits:
            parents = self.store.repo[commit].peel(pygit2.Commit).parent_ids
            if any(p not in self.store.local for p in parents):
                self.store.link_all()
                return

    def write(self) -> None:
        """Write the private index to its file, holding its writer flock
        (``index_lock``), with a killed writer's lock file cleared first.

        libgit2 writes an index through ``<index>.lock`` and renames it; a
        process killed between the two leaves the lock behind, and every
        later write would fail "the index is locked".  The writer flock is
        the repository's, not the state folder's (toolkits of two state
        folders may write one index), and the kernel releases it when its
        holder dies: a lock file found under it is a dead writer's.

        An index another writer replaced since this object read or wrote it
        is not written over (decision 0064): a toolkit of another state
        folder, whose captures do not take this one's worktree lock, may
        have written it between this capture's check (``written_elsewhere``)
        and now, and what it tracks would be lost.  The next capture here
        opens that index.
        """
        with writing(self._index_path):
            if identity(self._index_path) != self._on_disk:
                log.info("the private index of %s was written by another process; "
                         "not written over", self.worktree)
                return
            self.index.write()
            # Under the writer lock, which every writer holds: this write's file.
            self._on_disk = identity(self._index_path)

    def written_elsewhere(self) -> bool:
        """Whether the index file was replaced since this object last read
        or wrote it: another process wrote it (a restore, a capture without
        the service, ``durability forget``, another toolkit's service), and
        what it tracks now (a restored file the rules ignore, one it saw
        deleted) is not in this object's entries.  One ``stat``; the caller
        then opens the worktree again (``git.worktree_index``, decision 0064)."""
        return identity(self._index_path) != self._on_disk

    def seen(self) -> tuple[Path, Identity | None]:
        """The index file and its identity as this object last read or wrote it."""
        return self._index_path, self._on_disk

    # -- scanning ------------------------------------------------------------

    def stage(self, changed_paths: Collection[str] | None = None) -> pygit2.Oid:
        """Bring the private index up to date with the worktree; its tree id.
        The caller holds the worktree lock."""
        rules = self._rule_stamp()
        self._retries_left = MAX_RETRIES_PER_CAPTURE
        previous, self.tree = self.tree, None
        self._restaged = []
        before = C.git_index_entrycount(self.index._index)
        informed = (changed_paths is not None and self.scanned and rules == self._rules
                    and not any(PurePosixPath(p).name in _RULE_FILES for p in changed_paths))
        if informed:
            assert changed_paths is not None
            # A diff that never settled leaves the rest for a full scan.
            self.scanned = self._stage_paths(changed_paths)
            self.last_scan = "paths"
        else:
            by_git = self._named_by_git() if isinstance(self._hint, Prescan) else None
            hinted = by_git if by_git is not None else self._hinted() if self._hint else None
            self._hint = False
            if hinted is not None:
                # git named every gitlink whose HEAD moved (``git_prescan``);
                # libgit2's diff names none, so all are read.
                self._submodules = None
                settled = self._stage_paths(hinted, gitlinks=by_git is None)
                self.last_scan = "seeded"
            else:
                settled = self._stage_all()
                self._submodules = self.repo.listall_submodules()
                self.last_scan = "full"
            if by_git is None or len(hinted or ()) > UNWRITTEN_AT_MOST:
                self.write()
            self.scanned = settled
        self._rules = rules
        tree = None
        if informed and previous is not None:
            tree = self._tree_of_paths(previous, before)
            if tree is not None:
                self.trees_of_paths += 1
                if self.check_trees and tree != self.index.write_tree():
                    raise AssertionError(f"tree of {self._restaged} differs from write_tree")
        if tree is None:
            tree = self.index.write_tree()
        self.tree = tree
        return tree

    def _tree_of_paths(self, previous: pygit2.Oid, before: int) -> pygit2.Oid | None:
        """The index's tree, written from ``previous`` (the index's tree
        before this stage, holding ``before`` entries) and the paths the
        scan restaged: only the folders above them are written.

        libgit2's ``write_tree`` reads the header of every entry of each
        folder it writes (3 of its 4 ms after a one-file change at 1,000 or
        10,000 files) and then every tree of the index (more at 100,000);
        this looks at the restaged paths alone.  None when it cannot be
        sure (a file became a folder or the reverse, an entry count that
        does not add up, a name that is not UTF-8, a path deeper than
        ``_DEEPEST``): ``write_tree`` then."""
        repo, raw = self.repo, self.index._index
        try:
            root = repo[previous].peel(pygit2.Tree)
        except (KeyError, ValueError):
            return None
        #: folder -> name -> its new entry, or None (removed).
        files: dict[str, dict[str, tuple[pygit2.Oid, int] | None]] = {}
        delta = 0
        for path in self._restaged:
            try:
                path.encode()
            except UnicodeError:
                return None
            if path.count("/") >= _DEEPEST:
                return None  # deeper than the recursion below may go
            old = _old_entry(root, path)
            if old is _FOLDER:
                return None
            e = C.git_index_get_bypath(raw, os.fsencode(path), 0)
            new = None if e == ffi.NULL else (
                pygit2.Oid(raw=bytes(ffi.buffer(ffi.addressof(e, "id"))[:])), int(e.mode))
            delta += (new is not None) - (old is not None)
            folder, _, name = path.rpartition("/")
            files.setdefault(folder, {})[name] = new
        if C.git_index_entrycount(raw) != before + delta:
            return None  # libgit2 replaced entries of its own (a folder/file swap)
        below: dict[str, set[str]] = {}
        for folder in list(files):
            while folder:
                up = folder.rpartition("/")[0]
                below.setdefault(up, set()).add(folder)
                folder = up

        def write(folder: str, old: pygit2.Tree | None) -> pygit2.Oid | None:
            builder = repo.TreeBuilder(old) if old is not None else repo.TreeBuilder()
            for name, new in files.get(folder, {}).items():
                if new is None:
                    if builder.get(name) is not None:
                        builder.remove(name)
                else:
                    builder.insert(name, *new)
            for child in below.get(folder, ()):
                name = child.rpartition("/")[2]
                was = builder.get(name)
                if was is not None and was.type_str != "tree":
                    raise _Unsure  # a file where a folder goes: not expected, never guessed
                sub = write(child, was.peel(pygit2.Tree) if was is not None else None)
                if sub is not None:
                    builder.insert(name, sub, pygit2.enums.FileMode.TREE)
                elif was is not None:
                    builder.remove(name)
            if folder and len(builder) == 0:
                return None  # git writes no empty folder
            return builder.write()

        try:
            return write("", root)
        except _Unsure:
            return None

    def _named_by_git(self) -> set[str] | None:
        """The paths the hook's ``git status`` named (``git_prescan``), or
        None when it has none to give (then ``_hinted`` asks libgit2)."""
        assert isinstance(self._hint, Prescan)
        named = self._hint.paths()
        self._hint.discard()
        if named is None:
            log.info("git status named no paths for %s: libgit2's diff does", self.worktree)
        return named

    def _hinted(self) -> set[str] | None:
        """The paths a first scan of a just-seeded index must read: those
        libgit2's index-to-workdir diff (``git status``'s comparison, in C)
        finds changed, untracked or gone.  Every gitlink is read too (a
        repository's HEAD moves where no stat shows it), by ``_stage_paths``:
        ``_gitlinks`` (libgit2's list, which holds every gitlink of the
        index, ``.gitmodules`` or not), so no Python loop over 100,000
        entries looks for them (decision 0055).  When the hook started
        ``git status`` on this copy (``git_prescan``), its paths are taken
        instead of running the diff: git names the gitlinks whose HEAD moved
        as well.  None when neither can tell (a tree too deep for libgit2,
        an I/O error): then the full scan runs.

        libgit2 only names paths here; each is then read by the confined
        scan as a watcher-named path is (``_stage_paths``), so a folder
        swapped for a link is caught there, and nothing libgit2 read is
        kept.  An entry whose stat data matches and is older than the
        user's index write is trusted, as ``git status`` trusts it
        (decision 0050)."""
        from pygit2.enums import DiffOption

        flags = (DiffOption.INCLUDE_UNTRACKED | DiffOption.INCLUDE_TYPECHANGE
                 | DiffOption.IGNORE_SUBMODULES)
        try:
            diff = self.index.diff_to_workdir(flags)
            paths = {os.fsdecode(f.raw_path) for d in diff.deltas
                     for f in (d.new_file, d.old_file)}
        except (pygit2.GitError, OSError, UnicodeError) as exc:
            log.info("first scan of %s reads the whole tree: %s", self.worktree, exc)
            return None
        return {p.rstrip("/") for p in paths if p}

    def _stage_all(self) -> bool:
        self.skipped = [p for p in self.skipped if is_unreadable(self.worktree, p)]
        # A moving path's entry has no stat data, so the full diff rereads it.
        self.moving.clear()
        return self._scan([""], None)

    def _gitlinks(self) -> list[str]:
        """The submodules, every gitlink of the index among them (libgit2's
        list; read once per open, ``stage`` lists them again after a full scan)."""
        if self._submodules is None:
            self._submodules = self.repo.listall_submodules()
        return self._submodules

    def _stage_paths(self, paths: Collection[str], *, gitlinks: bool = True) -> bool:
        """Restage only ``paths`` (a folder: everything under it), and every
        gitlink unless ``gitlinks`` is False (``paths`` name those that moved).

        The same scan as a full one, limited to those paths: it descends
        only into the folders named, so the cost follows the paths, not the
        size of the tree.
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
        for sub in self._gitlinks() if gitlinks else ():
            cleaned = {sub if c.startswith(sub + "/") else c for c in cleaned} | {sub}
        self.skipped = [p for p in self.skipped if is_unreadable(self.worktree, p)]
        return self._scan(sorted(cleaned), sorted(cleaned)) if cleaned else True

    def _scan(self, under: list[str], literal: list[str] | None) -> bool:
        """Stage what changed under ``under`` (``literal``: those paths only;
        None: everything), read confined from the worktree root (``git_scan``),
        leaving out what cannot be read.  False when a folder moved while it
        was read: its entries keep what the last capture read, and the next
        capture scans the whole tree again.

        A folder that cannot be listed and a file that cannot be opened are
        left out (an entry the index holds for one keeps its last captured
        content) and remembered in ``skipped``.  A path that changed while
        it was read is read again (``MAX_TRIES``), then left ``moving``.
        """
        scan = Scan(self, str(private_index_path(self.repo, self.worktree)))
        scopes = [""] if literal is None else literal
        settled = scan.run(scopes)
        self._restaged = list(scan.staged)
        if literal is not None and self._submodules is not None:
            # A repository staged as a gitlink now (cloned after the last full
            # scan) is rechecked from now on, as every other gitlink is.
            known = set(self._submodules)
            self._submodules += sorted(p for p, new in scan.staged.items()
                                       if new is not None and new[1] == _COMMIT
                                       and p not in known)
        # Paths left out before, outside what was scanned now, stay left out.
        self.skipped = sorted(
            {p for p in self.skipped if literal is not None and not _in_any(p, scopes)}
            | scan.skipped)
        self.moving |= scan.moving | scan.moved
        return settled

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
        self.tree = None  # a restore's entries: the next stage writes the tree whole
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


class _Unsure(Exception):
    """``_tree_of_paths`` met what it does not expect: ``write_tree`` decides."""


def _old_entry(root: pygit2.Tree, path: str) -> object:
    """``path``'s entry in ``root``: its id, None when absent, ``_FOLDER``
    when it is a folder there or lies below something that is not one."""
    tree = root
    *folders, name = path.split("/")
    for part in folders:
        try:
            obj = tree[part]
        except KeyError:
            return None
        if obj.type_str != "tree":
            return _FOLDER
        tree = obj.peel(pygit2.Tree)
    try:
        obj = tree[name]
    except KeyError:
        return None
    return _FOLDER if obj.type_str == "tree" else obj.id


def index_lock_path(repo: pygit2.Repository, worktree: Path) -> Path:
    """The lock file libgit2 takes while it writes ``worktree``'s private index."""
    index = private_index_path(repo, worktree)
    return index.with_name(index.name + ".lock")


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


def _in_any(path: str, scopes: list[str]) -> bool:
    """Whether ``path`` is one of ``scopes`` or below one."""
    return any(not s or path == s or path.startswith(s + "/") for s in scopes)


def _check(rc: int) -> None:
    if rc < 0:
        from pygit2.errors import check_error

        check_error(rc)
