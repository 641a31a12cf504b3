"""The changes between two checkpoint trees, or a tree and the worktree.

``Changes`` wraps one pygit2 diff: renames found (an untracked file in the
worktree can be the new name of a tracked one), limited to the paths asked
for, and read two ways: ``files()`` (one ``FileChange`` per path, with line
counts; a binary file is named, never counted) and ``patches()`` (git's
unified diff, as bytes: file contents need not be UTF-8; a binary file is
one ``Binary files ... differ`` line, never its bytes).

A file larger than ``LARGE_FILE_BYTES`` on either side is never read to be
compared (decision 0051): it is listed as changed with its two sizes, read
from the object's header (or the worktree's stat), no line counts, and its
patch is one ``Large files ... differ`` line.  ``sizes_between`` is what a
timeline needs of two trees: how many paths changed and what they weigh,
from tree entries and object headers only, never a blob's content.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pygit2
from pygit2.enums import DeltaStatus, DiffFind

from durability.backends import Progress
from durability.ground.errors import GitFailed

__all__ = ["LARGE_FILE_BYTES", "Changes", "FileChange", "Sizes", "Totals", "between_trees",
           "size_text", "sizes_between"]

#: Over this many bytes (either side), a file is not compared line by line:
#: making its patch reads both versions whole into memory (a 70 MiB file took
#: seconds and hundreds of MiB per checkpoint), and a diff that size is read
#: by no one.  git's own limit (core.bigFileThreshold) is 512 MiB.
LARGE_FILE_BYTES = 8 * 1024 * 1024

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
    A binary file has ``binary`` true and no line counts (0, 0); so has a
    ``large`` one (over ``LARGE_FILE_BYTES`` on a side: not compared).  The
    sizes are in bytes, None on the side where the path does not exist."""

    status: str
    path: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    binary: bool
    additions: int
    deletions: int
    large: bool = False
    old_size: int | None = None
    new_size: int | None = None


@dataclass(frozen=True)
class Totals:
    files: int
    additions: int
    deletions: int


@dataclass(frozen=True)
class Sizes:
    """What a timeline says a checkpoint changed: how many paths, and the
    bytes of those paths before and after (a side where a path does not
    exist counts 0; a link counts its target's length, a submodule 0)."""

    files: int
    old_bytes: int
    new_bytes: int

    def text(self) -> str:
        """``2 files +9 B``: how many paths, and by how much their size moved
        (as short as the ``+adds -dels`` it stands in for: tables stay narrow)."""
        grown = self.new_bytes - self.old_bytes
        return (f"{self.files} file{'' if self.files == 1 else 's'} "
                f"{'-' if grown < 0 else '+'}{size_text(abs(grown))}")


def size_text(n: int) -> str:
    """Bytes as a person reads them: ``512 B``, ``12.1 KiB``, ``70.0 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


class Changes:
    """One diff, renames found, limited to ``paths`` (worktree-relative;
    a folder stands for everything under it; none: every path)."""

    def __init__(self, diff: pygit2.Diff, paths: Sequence[str] = (),
                 odb: pygit2.Odb | None = None) -> None:
        try:
            diff.find_similar(_FIND)
            deltas = list(diff.deltas)
        except pygit2.GitError as exc:
            raise GitFailed(f"cannot compare the trees: {exc}") from exc
        self._diff = diff
        self._odb = odb
        self._deltas = deltas
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
                large = self._large(i)
                files.append(_large_change(self._deltas[i], *large) if large
                             else _file_change(self._patch(i), self._odb))
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
            large = self._large(i)
            yield _large_patch(self._deltas[i], *large) if large else self._patch(i).data
            if progress is not None:
                progress(done, len(self._kept))

    def _large(self, index: int) -> tuple[int | None, int | None] | None:
        """The two sizes of a delta's file when one is over the limit (never
        compared then), else None: read from the object headers (a worktree
        file's from its stat, which libgit2 already took)."""
        if self._odb is None:
            return None
        delta = self._deltas[index]
        sizes = (_size(self._odb, delta.old_file), _size(self._odb, delta.new_file))
        if max(s or 0 for s in sizes) > LARGE_FILE_BYTES:
            return sizes
        return None

    def _patch(self, index: int) -> pygit2.Patch:
        try:
            patch = self._diff[index]
        except pygit2.GitError as exc:
            raise GitFailed(f"cannot compare the trees: {exc}") from exc
        assert patch is not None  # a delta that is a change always has a patch
        return patch


def between_trees(old: pygit2.Tree | None, new: pygit2.Tree,
                  paths: Sequence[str] = (), odb: pygit2.Odb | None = None) -> Changes:
    """What changed from ``old`` to ``new`` (None: from nothing); with
    ``odb`` (their repository's), a large file is not compared."""
    return Changes(_tree_diff(old, new), paths, odb)


def sizes_between(odb: pygit2.Odb, old: pygit2.Tree | None, new: pygit2.Tree) -> Sizes:
    """How many paths changed from ``old`` to ``new`` and their sizes, from
    the trees' entries and the object headers: no blob is read.  A rename is
    found only when the content is the same object (an exact match needs no
    read), so a file renamed and edited counts as two paths here where
    ``Changes`` (which compares contents) finds one."""
    diff = _tree_diff(old, new)
    try:
        diff.find_similar(DiffFind.FIND_RENAMES | DiffFind.FIND_EXACT_MATCH_ONLY)
        deltas = [d for d in diff.deltas if d.status in _STATUS]
        return Sizes(len(deltas), sum(_size(odb, d.old_file) or 0 for d in deltas),
                     sum(_size(odb, d.new_file) or 0 for d in deltas))
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot compare the trees: {exc}") from exc


def _tree_diff(old: pygit2.Tree | None, new: pygit2.Tree) -> pygit2.Diff:
    try:
        return new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot compare the trees: {exc}") from exc


_ZERO = pygit2.Oid(hex="0" * 40)


def _size(odb: pygit2.Odb, file: pygit2.DiffFile) -> int | None:
    """A side's size in bytes, None where the path does not exist there:
    libgit2's when it knows it (a worktree file's stat), else the object's
    header (never its content).  A submodule's commit is not in this store: 0."""
    if file.id == _ZERO and not file.size:
        return None
    if file.size or file.mode == _GITLINK or file.id == _ZERO:
        return int(file.size)
    try:
        return int(odb.read_header(file.id)[1])
    except (KeyError, ValueError, pygit2.GitError):
        return 0  # not in the store (a shallow or damaged one): weighs nothing known


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


def _file_change(patch: pygit2.Patch, odb: pygit2.Odb | None) -> FileChange:
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
        # Known once the patch is made (libgit2 read both sides), unless the
        # content is the same object (a rename, a mode change): its header then.
        old_size=None if status == "added" else _known_size(odb, delta.old_file),
        new_size=None if status == "deleted" else _known_size(odb, delta.new_file),
    )


def _known_size(odb: pygit2.Odb | None, file: pygit2.DiffFile) -> int:
    return int(file.size) if odb is None else _size(odb, file) or 0


def _large_change(delta: pygit2.DiffDelta, old_size: int | None,
                  new_size: int | None) -> FileChange:
    status = _STATUS[delta.status]
    old, new = _path(delta.old_file), _path(delta.new_file)
    return FileChange(
        status=status,
        path=old if status == "deleted" else new,
        old_path=old if status == "renamed" else None,
        old_mode=None if status == "added" else _mode(delta.old_file.mode),
        new_mode=None if status == "deleted" else _mode(delta.new_file.mode),
        binary=False, additions=0, deletions=0, large=True,
        old_size=None if status == "added" else old_size,
        new_size=None if status == "deleted" else new_size,
    )


def _large_patch(delta: pygit2.DiffDelta, old_size: int | None, new_size: int | None) -> bytes:
    """git's header of the change, then one line in place of the hunks."""
    change = _large_change(delta, old_size, new_size)
    old = b"a/" + delta.old_file.raw_path
    new = b"b/" + delta.new_file.raw_path
    lines = [b"diff --git " + old + b" " + new]
    if change.status == "added":
        lines.append(f"new file mode {change.new_mode}".encode())
    elif change.status == "deleted":
        lines.append(f"deleted file mode {change.old_mode}".encode())
    elif change.old_mode != change.new_mode:
        lines += [f"old mode {change.old_mode}".encode(), f"new mode {change.new_mode}".encode()]
    if change.status == "renamed":
        lines += [b"rename from " + delta.old_file.raw_path,
                  b"rename to " + delta.new_file.raw_path]
    ids = f"index {str(delta.old_file.id)[:7]}..{str(delta.new_file.id)[:7]}"
    lines.append(ids.encode() if change.status != "modified" or change.old_mode != change.new_mode
                 else f"{ids} {change.new_mode}".encode())
    sides = (("/dev/null" if change.old_size is None else f"{change.old_size} bytes"),
             ("/dev/null" if change.new_size is None else f"{change.new_size} bytes"))
    lines.append(b"Large files " + (b"/dev/null" if change.status == "added" else old) + b" and "
                 + (b"/dev/null" if change.status == "deleted" else new)
                 + f" differ ({sides[0]} -> {sides[1]}; over {LARGE_FILE_BYTES} bytes: "
                   "not compared)".encode())
    return b"\n".join(lines) + b"\n"
