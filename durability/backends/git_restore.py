"""Restore on git: make the working directory equal to a checkpoint's tree.

The current tree is staged first (a full scan of the private index), then
only the paths whose blob or mode differ from the checkpoint are written,
deleted or chmod-ed.  Files that already match are not opened, so they keep
their mtime; untracked ignored files are never in the staged tree, so they are
never deleted; HEAD, branches and the user's index are not read for writing.

Before anything is written, every path is checked for an ignored file in the
way (a folder to be written where an ignored file sits, a file to be written
where a folder still holds ignored files): the restore then refuses with
``restore-conflict`` and changes nothing, rather than delete what git ignores.

Blobs are written as stored: smudge filters (``.gitattributes`` eol or
``filter=`` drivers) are not applied.  Submodules are left as they are; if a
gitlink differs, the verification that follows the restore says so.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import DeltaStatus, FileMode

from durability.backends.git_index import WorktreeIndex
from durability.errors import RestoreError
from durability.fsutil import replace_file

__all__ = ["Plan", "plan_restore", "restore_tree"]


@dataclass(frozen=True)
class _Entry:
    path: str
    oid: pygit2.Oid
    mode: int


@dataclass
class Plan:
    """What a restore changes: paths to delete, and entries to write (with
    the entry they replace, when only the mode may need changing)."""

    deletes: list[_Entry]
    writes: list[tuple[_Entry | None, _Entry]]


def plan_restore(state: WorktreeIndex, target: pygit2.Tree) -> Plan:
    """Compare the worktree (staged now) with ``target``."""
    current = state.repo[state.stage()].peel(pygit2.Tree)
    plan = Plan([], [])
    for delta in current.diff_to_tree(target).deltas:
        old, new = _entry(delta.old_file), _entry(delta.new_file)
        _check_safe(new.path)
        if delta.status == DeltaStatus.ADDED:
            plan.writes.append((None, new))
        elif delta.status == DeltaStatus.DELETED:
            plan.deletes.append(old)
        elif old.mode != new.mode and FileMode.LINK in (old.mode, new.mode):
            plan.deletes.append(old)  # a type change: the old one goes first
            plan.writes.append((None, new))
        else:
            plan.writes.append((old, new))
    return plan


def restore_tree(state: WorktreeIndex, target: pygit2.Tree) -> Plan:
    """Make the worktree of ``state`` equal to ``target``; the plan it carried out."""
    plan = plan_restore(state, target)
    root = state.worktree
    _check_conflicts(root, plan)
    for entry in sorted(plan.deletes, key=lambda e: e.path.count("/"), reverse=True):
        _delete(root, entry)
    for old, new in sorted(plan.writes, key=lambda w: w[1].path):
        _write(state.repo, root, old, new)
    return plan


def _check_safe(path: str) -> None:
    """A tree read from the repository could name ``..`` or ``.git``: such a
    path is never written (captures never produce one)."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise RestoreError(f"nothing restored: the checkpoint names an unsafe path {path!r}",
                           code="restore-conflict")


def _entry(file: pygit2.DiffFile) -> _Entry:
    return _Entry(file.path, file.id, int(file.mode))


def _check_conflicts(root: Path, plan: Plan) -> None:
    going = {e.path for e in plan.deletes}
    for _, new in plan.writes:
        for parent in reversed(PurePosixPath(new.path).parents[:-1]):
            where = root / parent
            if os.path.lexists(where) and not _is_dir(where) and str(parent) not in going:
                raise _conflict(f"{parent} is an untracked file where {new.path} goes")
        where = root / new.path
        if new.mode != FileMode.COMMIT and _is_dir(where):
            left = _files_under(root, new.path) - going
            if left:
                raise _conflict(f"{new.path} is a folder still holding {sorted(left)[0]}")


def _conflict(detail: str) -> RestoreError:
    return RestoreError(f"nothing restored: {detail} (ignored by git, never deleted by a "
                        "restore; move it away and retry)", code="restore-conflict")


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _files_under(root: Path, folder: str) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root / folder):
        rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
        found.update(f"{rel}/{name}" for name in filenames)
        found.update(f"{rel}/{d}" for d in dirnames if os.path.islink(os.path.join(dirpath, d)))
    return found


def _delete(root: Path, entry: _Entry) -> None:
    if entry.mode == FileMode.COMMIT:
        return  # a submodule's folder is its own repository: left alone
    path = root / entry.path
    if os.path.lexists(path) and not _is_dir(path):
        os.unlink(path)
    _prune_empty(root, path.parent)


def _prune_empty(root: Path, folder: Path) -> None:
    """Remove folders a delete left empty (one holding ignored files stays)."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _write(repo: pygit2.Repository, root: Path, old: _Entry | None, new: _Entry) -> None:
    if new.mode == FileMode.COMMIT:
        return  # checking out a submodule commit is the submodule's business
    path = root / new.path
    _make_parents(root, path.parent)
    if _is_dir(path):
        path.rmdir()  # emptied by the deletes; _check_conflicts made sure
    if old is not None and old.oid == new.oid and os.path.isfile(path) \
            and not os.path.islink(path):
        return _chmod(path, new.mode)
    data = repo[new.oid].peel(pygit2.Blob).data
    if new.mode == FileMode.LINK:
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(os.fsdecode(data), path)
        return
    # A reader never sees half a file; the mode comes from the umask, as for a
    # file git checks out.
    replace_file(path, data, mode=0o777 if new.mode == FileMode.BLOB_EXECUTABLE else 0o666)


def _make_parents(root: Path, folder: Path) -> None:
    missing = []
    while folder != root and not _is_dir(folder):
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        if os.path.lexists(each):
            os.unlink(each)  # a tracked file or link the plan deletes anyway
        each.mkdir()


def _chmod(path: Path, mode: int) -> None:
    current = os.lstat(path).st_mode & 0o7777
    # Executable: x wherever r is, as git does; else no x at all.
    executable = mode == FileMode.BLOB_EXECUTABLE
    wanted = current | ((current & 0o444) >> 2) if executable else current & ~0o111
    if wanted != current:
        os.chmod(path, wanted)
