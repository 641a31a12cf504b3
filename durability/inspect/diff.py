"""The changes between two checkpoint trees, or a tree and the worktree.

``Changes`` wraps one pygit2 diff: renames found (an untracked file in the
worktree can be the new name of a tracked one), limited to the paths asked
for, and read two ways: ``files()`` (one ``FileChange`` per path, with line
counts; a binary file is named, never counted) and ``patches()`` (git's
unified diff, as bytes: file contents need not be UTF-8; a binary file is
one ``Binary files ... differ`` line, never its bytes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pygit2
from pygit2.enums import DeltaStatus, DiffFind

from durability.backends import Progress
from durability.ground.errors import GitFailed

__all__ = ["Changes", "FileChange", "Totals", "between_trees"]

_STATUS = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.UNTRACKED: "added",  # in the worktree, not yet in any checkpoint
    DeltaStatus.COPIED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.TYPECHANGE: "modified",  # a file became a link, or back: the modes say which
    DeltaStatus.RENAMED: "renamed",
    DeltaStatus.UNREADABLE: "unreadable",
}
# Renames among tracked files and onto untracked ones (a file moved in the
# worktree and not captured yet is an untracked file under its new name).
_FIND = DiffFind.FIND_RENAMES | DiffFind.FIND_FOR_UNTRACKED


@dataclass(frozen=True)
class FileChange:
    """One changed path.  ``path`` is the new name (the old one for a
    deletion); ``old_path`` is set for a rename.  Modes are git's octal
    strings (``100644`` file, ``100755`` executable, ``120000`` symlink,
    ``160000`` submodule), None on the side where the path does not exist.
    A binary file has ``binary`` true and no line counts (0, 0)."""

    status: str
    path: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    binary: bool
    additions: int
    deletions: int


@dataclass(frozen=True)
class Totals:
    files: int
    additions: int
    deletions: int


class Changes:
    """One diff, renames found, limited to ``paths`` (worktree-relative;
    a folder stands for everything under it; none: every path)."""

    def __init__(self, diff: pygit2.Diff, paths: Sequence[str] = ()) -> None:
        try:
            diff.find_similar(_FIND)
            deltas = list(diff.deltas)
        except pygit2.GitError as exc:
            raise GitFailed(f"cannot compare the trees: {exc}") from exc
        self._diff = diff
        self._kept = [i for i, d in enumerate(deltas)
                      if d.status in _STATUS and _wanted(d, paths)]
        self._files: list[FileChange] | None = None

    def __len__(self) -> int:
        """How many paths changed (known before any patch is made)."""
        return len(self._kept)

    def files(self, progress: Progress | None = None) -> list[FileChange]:
        """Every changed path, in git's order (by path); ``progress`` hears
        of each file counted."""
        if self._files is None:
            files = []
            for done, i in enumerate(self._kept, 1):
                files.append(_file_change(self._patch(i)))
                if progress is not None:
                    progress(done, len(self._kept))
            self._files = files
        return self._files

    def totals(self) -> Totals:
        files = self.files()
        return Totals(len(files), sum(f.additions for f in files),
                      sum(f.deletions for f in files))

    def patches(self, progress: Progress | None = None) -> Iterator[bytes]:
        """git's unified diff of each changed path; ``progress`` hears of each."""
        for done, i in enumerate(self._kept, 1):
            yield self._patch(i).data
            if progress is not None:
                progress(done, len(self._kept))

    def _patch(self, index: int) -> pygit2.Patch:
        try:
            patch = self._diff[index]
        except pygit2.GitError as exc:
            raise GitFailed(f"cannot compare the trees: {exc}") from exc
        assert patch is not None  # a delta that is a change always has a patch
        return patch


def between_trees(old: pygit2.Tree | None, new: pygit2.Tree,
                  paths: Sequence[str] = ()) -> Changes:
    """What changed from ``old`` to ``new`` (None: from nothing)."""
    try:
        diff = new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot compare the trees: {exc}") from exc
    return Changes(diff, paths)


def _path(file: pygit2.DiffFile) -> str:
    # A name that is not UTF-8 stays the same bytes (surrogateescape), as
    # everywhere else in the toolkit.  The one folder a worktree diff names
    # (an embedded repository, below) loses libgit2's trailing slash.
    path = os.fsdecode(file.raw_path)
    return path[:-1] if file.mode == _FOLDER and path.endswith("/") else path


#: libgit2 enters every untracked folder (RECURSE_UNTRACKED_DIRS) but a git
#: repository nested in the worktree, which it reports as one untracked entry
#: of a folder's mode.  It is recorded as `git add -A` records it (and the git
#: backend does): a gitlink, the documented ``160000``.
_FOLDER = 0o040000
_GITLINK = 0o160000


def _mode(mode: int) -> str | None:
    mode = _GITLINK if mode == _FOLDER else mode
    return f"{mode:06o}" if mode else None


def _wanted(delta: pygit2.DiffDelta, paths: Sequence[str]) -> bool:
    if not paths:
        return True
    names = {_path(delta.old_file), _path(delta.new_file)}
    return any(n == p or n.startswith(p + "/") for n in names for p in paths)


def _file_change(patch: pygit2.Patch) -> FileChange:
    delta = patch.delta
    status = _STATUS[delta.status]
    old, new = _path(delta.old_file), _path(delta.new_file)
    _, additions, deletions = patch.line_stats
    binary = bool(delta.is_binary)
    return FileChange(
        status=status,
        path=old if status == "deleted" else new,
        old_path=old if status == "renamed" else None,
        old_mode=None if status == "added" else _mode(delta.old_file.mode),
        new_mode=None if status == "deleted" else _mode(delta.new_file.mode),
        binary=binary,
        additions=0 if binary else additions,
        deletions=0 if binary else deletions,
    )
