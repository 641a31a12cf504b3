"""Make a worktree's files equal to a commit's tree, straight from the git store.

The jj backend's way back to a pinned commit that jj itself can no longer name:
once the operations that knew a commit are abandoned (``jj op abandon``) and
collected, ``jj restore --from <id>`` says the revision does not exist, while
the pin (contract 4, docs/DESIGN.md) has kept the commit in the git store.  Its files are then
written from there, and the next jj snapshot records them.

Only paths that differ between the current tree (a snapshot just taken, under
the worktree lock) and the target are touched; files in neither tree (ignored,
untracked) are left alone, as ``jj restore`` leaves them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pygit2

from durability.errors import JjFailed
from durability.fsutil import replace_file

__all__ = ["write_commit"]

_TREE = pygit2.GIT_FILEMODE_TREE
_LINK = pygit2.GIT_FILEMODE_LINK
_EXEC = pygit2.GIT_FILEMODE_BLOB_EXECUTABLE
_FILES = (pygit2.GIT_FILEMODE_BLOB, _EXEC, _LINK)
# Names a tree entry may not have: they would leave the worktree or write
# into a repository's own folders.
_FORBIDDEN = {"", ".", "..", ".git", ".jj"}

Entries = dict[str, tuple[int, pygit2.Oid]]


def write_commit(git: Path, worktree: Path, target: str, current: str) -> None:
    """Turn ``worktree`` from ``current``'s tree into ``target``'s."""
    try:
        repo = pygit2.Repository(str(git))
        want = _entries(repo, repo[target].peel(pygit2.Commit).tree)
        have = _entries(repo, repo[current].peel(pygit2.Commit).tree)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise JjFailed(f"cannot read commit {target} from {git}: {exc}") from exc
    try:
        for rel in sorted(have.keys() - want.keys(), reverse=True):
            _remove(worktree, rel)
        for rel, (mode, oid) in sorted(want.items()):
            if have.get(rel) != (mode, oid):
                _write(worktree, rel, mode, _blob(repo, oid))
    except OSError as exc:
        raise JjFailed(f"cannot write {target}'s files into {worktree}: {exc}") from exc


def _entries(repo: pygit2.Repository, tree: Any, prefix: str = "") -> Entries:
    """Every file and symlink of ``tree``: path -> (mode, blob id).  Submodule
    entries are not files of this worktree and are skipped."""
    found: Entries = {}
    for entry in tree:
        if entry.name in _FORBIDDEN or "/" in entry.name or "\0" in entry.name:
            raise JjFailed(f"refusing tree entry {prefix + entry.name!r}")
        rel = prefix + entry.name
        if entry.filemode == _TREE:
            found.update(_entries(repo, repo[entry.id], rel + "/"))
        elif entry.filemode in _FILES:
            found[rel] = (entry.filemode, entry.id)
    return found


def _blob(repo: pygit2.Repository, oid: pygit2.Oid) -> bytes:
    obj = repo[oid]
    if not isinstance(obj, pygit2.Blob):
        raise JjFailed(f"tree entry {oid} is not a blob")
    return bytes(obj.data)


def _remove(root: Path, rel: str) -> None:
    path = root / rel
    if os.path.lexists(path) and not _is_real_dir(path):
        os.unlink(path)
    parent = path.parent
    while parent != root:  # drop folders the deletion left empty
        try:
            os.rmdir(parent)
        except OSError:
            return
        parent = parent.parent


def _write(root: Path, rel: str, mode: int, data: bytes) -> None:
    path = root / rel
    _make_parents(root, path.parent)
    if _is_real_dir(path):
        os.rmdir(path)  # a folder that became a file: empty once its files went
    if mode == _LINK:
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(os.fsdecode(data), path)
        return
    # Renamed over the old file (or link), so a reader never sees it missing
    # or half written; the umask applies to the mode.
    replace_file(path, data, mode=0o777 if mode == _EXEC else 0o666)


def _make_parents(root: Path, folder: Path) -> None:
    """Create ``folder`` below ``root``, replacing a file or symlink in the way
    (never following a symlink out of the worktree)."""
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        if os.path.lexists(current) and not _is_real_dir(current):
            os.unlink(current)
        if not os.path.lexists(current):
            os.mkdir(current)


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False
