"""Opening a git working tree with a private index that the toolkit owns.

pygit2 only stages into a repository's own index, and a repository's own
index is the user's ``.git/index``.  libgit2 can swap a repository's index
for another file (``git_repository_set_index``, the call libgit2 itself makes
for ``$GIT_INDEX_FILE``), but pygit2 does not wrap it, so it is called here
through ctypes on the very libgit2 that pygit2 loaded.  From then on every
index operation of that repository object (staging, ignore-aware diffs,
submodules) reads and writes the private file, and ``.git/index`` is never
opened for writing.

The private index lives in the worktree's own git folder (per linked worktree
and per submodule), ``<git dir>/durability/index-<hash of the worktree>``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from pathlib import Path
from typing import Any

import pygit2
from pygit2 import _pygit2
from pygit2.ffi import C, ffi

from durability.backends.index_lock import Identity, identity, writing
from durability.ground import git_prescan
from durability.ground.errors import GitFailed, NotARepo

__all__ = ["open_worktree", "private_index_path", "read_ahead"]

_bridge_lock = threading.Lock()
_set_index: Any = None


def _libgit2_set_index() -> Any:
    """``git_repository_set_index`` from the libgit2 that pygit2 is linked to.

    Opening pygit2's own extension module again returns the handle already
    loaded, and a symbol lookup through it searches its dependencies, so this
    is the same libgit2 instance, never a second copy.
    """
    global _set_index
    with _bridge_lock:
        if _set_index is None:
            lib = ctypes.CDLL(_pygit2.__file__)
            func = lib.git_repository_set_index
            func.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            func.restype = ctypes.c_int
            _set_index = func
        return _set_index


def _address(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


def common_dir(git_dir: Path) -> Path:
    """The git dir a linked worktree's own one shares with the main worktree
    (named by its ``commondir`` file): where git keeps the refs, the objects
    and ``info/exclude``.  ``git_dir`` itself for a main worktree."""
    try:
        named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / named).resolve() if named else git_dir


def private_index_path(repo: pygit2.Repository, worktree: Path) -> Path:
    """Where the toolkit keeps the index of ``worktree``."""
    return Path(repo.path) / "durability" / git_prescan.index_name(worktree)


def open_worktree(worktree: Path) -> tuple[pygit2.Repository, pygit2.Index,
                                           bool | git_prescan.Prescan, Identity | None]:
    """The repository of ``worktree`` with its private index attached.

    Returns the repository, its index (the repository's, so
    ``index.diff_to_workdir`` and ``index.add`` honour the ignore rules),
    whether the first scan may take its paths from libgit2's diff: True
    (the index was there, written by an earlier process's full scan, or was
    just made as a copy of the user's, ``_seed_copy``), the
    ``git_prescan.Prescan`` that made the copy and names those paths, or
    False (just made entry by entry, with no stat data to trust); and the
    identity of the index file read or written (``index_lock.identity``),
    taken before it was read: a write by another process meanwhile makes
    it differ from the file's, never the other way round (decision 0064).
    """
    try:
        repo = pygit2.Repository(str(worktree), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError as exc:
        raise NotARepo(f"{worktree} is not a git working tree: {exc}") from exc
    if repo.is_bare or repo.workdir is None:
        raise NotARepo(f"{worktree} is a bare git repository, not a working tree")
    if Path(repo.workdir).resolve() != worktree.resolve():
        raise NotARepo(f"{worktree} is not the top of its git working tree ({repo.workdir})")
    path = private_index_path(repo, worktree)
    # A copy whose check a crash cut short (``_seed_copy``) is made again.
    fresh = not path.exists() or _unchecked_mark(path).exists()
    prescan = git_prescan.take(str(path))
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        seeded = _seed_copy(repo, path, prescan) if fresh else None
        copied = isinstance(seeded, tuple)  # (a test's stand-in returns False)
        if isinstance(seeded, tuple):
            private, read = seeded
        else:
            read = identity(path)  # before the read: see above
            private = pygit2.Index(str(path))
        _attach(repo, private)
        index = repo.index
        if fresh and not copied:
            _seed(repo, index)
            # Written before any staging: libgit2 judges an entry "racily
            # clean" against the time the index file was last read or
            # written, and an index never read or written has no such time.
            with writing(path):  # clears a killed first write's lock
                index.write()
                read = identity(path)
    except (pygit2.GitError, OSError) as exc:
        if prescan is not None:
            prescan.discard()
        raise GitFailed(f"cannot open the private index {path}: {exc}") from exc
    if prescan is not None and not (copied and prescan.placed_here()):
        prescan.discard()  # its copy is not the one read here
        prescan = None
    if not fresh:
        return repo, index, True, read  # decision 0062
    return repo, index, prescan if copied and prescan is not None else copied, read


def _attach(repo: pygit2.Repository, index: pygit2.Index) -> None:
    rc = _libgit2_set_index()(_address(repo._repo), _address(index._index))
    if rc != 0 or repo.index._index != index._index:
        raise GitFailed(f"libgit2 refused the private index (error {rc})")


#: Entry flags that make a copied entry untrustworthy for a private index:
#: a conflict stage (``flags``), intent-to-add and skip-worktree
#: (``flags_extended``).  An index holding any is seeded the slow way.
_STAGE_MASK = 0x3000
_ITA_OR_SKIP = (1 << 13) | (1 << 14)


def _unchecked_mark(path: Path) -> Path:
    """``git_prescan.unchecked_mark``: while it exists, the index at
    ``path`` is an unchecked copy, not to be used."""
    return Path(git_prescan.unchecked_mark(str(path)))


def _seed_copy(repo: pygit2.Repository, path: Path, prescan: git_prescan.Prescan | None = None
               ) -> tuple[pygit2.Index, Identity | None] | None:
    """Seed a new private index with a copy of the user's ``.git/index``,
    stat data included, its modification time kept (decision 0050); the
    index, read once (decision 0055), and the identity of the file read
    (taken under its writer lock, which every writer holds), or None when
    nothing was copied.

    The scan trusts an entry whose stat data matches the file and whose
    mtime is older than the index file's ("racily clean" otherwise, as git
    and libgit2 judge it).  The copy is given the user's index file's mtime
    (to the second), so it keeps git's own judgement: an entry as new as
    the user's index write (a file edited within that second may have
    changed without its stat data showing it) is rehashed; an older one is
    trusted, as ``git status`` trusts it.  So the first
    capture of a large repository costs an ``lstat`` per file, not a hash.

    The copy is put in place first (``git_prescan.place_copy``; by the
    hook's ``prescan`` already, before its imports, when it is still the
    file there) and read there, once (reading 100,000 entries costs about
    50 ms), then checked; its mark (``_unchecked_mark``) is made before
    it is put in place and removed once it passed, so a crash in between
    leaves an index the next open makes again, never one nobody checked.

    None when there is no user index, libgit2 cannot read it (split or
    sparse index), or it holds entries a private index must not trust
    (conflicts, intent-to-add, skip-worktree): the caller then seeds entry
    by entry without stat data, as before.
    """
    user_index = Path(repo.path) / "index"
    mark = _unchecked_mark(path)
    with writing(path):
        try:
            index = _read_ahead_index(prescan)
            if index is None and (prescan is None or not prescan.placed_here()):
                if not user_index.is_file():
                    if mark.exists():  # an unchecked copy a crash left: not to be used
                        path.unlink(missing_ok=True)
                        mark.unlink()
                    return None
                git_prescan.place_copy(str(user_index), str(path))
            # The copy is replaced only under this lock: what is read (or
            # was read ahead, ``placed_here``) is the file identified here.
            read = identity(path)
            if index is None:
                index = pygit2.Index(str(path))
            if not _plain_entries(index, path):
                os.unlink(path)
                mark.unlink()
                return None
            mark.unlink()
        except (pygit2.GitError, OSError):
            for leftover in (path.with_name(path.name + ".seed"), path, mark):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
            return None
    return index, read


def read_ahead(path: str) -> None:
    """Read the prescan's copy at ``path`` (``git_prescan``) on a thread of
    its own, now: libgit2 reads an index without Python's lock (about 50 ms
    at 100,000 entries), while this thread goes on importing the capture
    path; ``_seed_copy`` takes it.  Nothing when no prescan was started."""
    prescan = git_prescan.peek(path)
    if prescan is None:
        return

    def read() -> None:
        try:
            # Same file before and after the read (the prescan holds it
            # open, so its inode is not reused): the index read is its copy.
            if prescan.placed_here():
                index = pygit2.Index(path)
                if prescan.placed_here():
                    prescan.read = index
        except (pygit2.GitError, OSError):
            pass  # read again by _seed_copy

    reader = threading.Thread(target=read, name="durability-index-read", daemon=True)
    reader.start()
    prescan.reader = reader


def _read_ahead_index(prescan: git_prescan.Prescan | None) -> pygit2.Index | None:
    """The copy ``read_ahead`` read, if it still is the file at its place."""
    if prescan is None or prescan.reader is None:
        return None
    prescan.reader.join()
    index, prescan.read = prescan.read, None
    return index if isinstance(index, pygit2.Index) and prescan.placed_here() else None


def _plain_entries(index: pygit2.Index, path: Path) -> bool:
    """Whether every entry of ``index`` is a stage-0 entry with no
    intent-to-add or skip-worktree flag.  A version 2 index can hold no
    extended flag (git writes version 3 for them): only conflicts, which
    libgit2 counts itself, need looking for there."""
    raw = index._index
    if _version(path) == 2:
        return not C.git_index_has_conflicts(raw)
    for i in range(C.git_index_entrycount(raw)):
        e = C.git_index_get_byindex(raw, i)
        if e == ffi.NULL or e.flags & _STAGE_MASK or e.flags_extended & _ITA_OR_SKIP:
            return False
    return True


def _version(path: Path) -> int:
    """The format version in an index file's header (``DIRC``, then 4 bytes)."""
    with open(path, "rb") as f:
        head = f.read(8)
    return int.from_bytes(head[4:8], "big") if head[:4] == b"DIRC" else 0


def _seed(repo: pygit2.Repository, index: pygit2.Index) -> None:
    """Start from what the user tracks, as ``git add -A`` would: the entries of
    ``.git/index`` (read, never written), else HEAD's tree.

    The fallback of ``_seed_copy``: entries are copied without their stat
    data, so the first capture hashes every tracked file once.
    """
    user_index = Path(repo.path) / "index"
    try:
        if user_index.is_file():
            for entry in pygit2.Index(str(user_index)):
                index.add(pygit2.IndexEntry(entry.path, entry.id, entry.mode))
            return
    except pygit2.GitError:
        index.clear()  # an index libgit2 cannot read (split, sparse): use HEAD
    if not repo.head_is_unborn:
        try:
            index.read_tree(repo.head.peel(pygit2.Commit).tree)
        except (pygit2.GitError, KeyError):
            index.clear()
