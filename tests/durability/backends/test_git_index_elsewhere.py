"""A private index written by another process while this one keeps it open
(decision 0064): the next capture here opens it again and takes what that
writer left, and this process's own writes never count as another's.

The other process is stood in for by a second ``WorktreeIndex`` of the same
worktree (its own libgit2 index, read from and written to the same file,
under the same writer lock), as a CLI restore or a capture without the
service opens it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, index_seen, worktree_index
from durability.backends.git_index import WorktreeIndex
from durability.backends.index_lock import identity
from durability.store import AttemptKey
from tests.helpers import checkpoints, git, make_git_repo

KEY = AttemptKey("run-e", "node", 0, 1)


def stamp(seq: int) -> Stamp:
    return Stamp(key=KEY, source="hook", request_ids=(f"req-{seq}",), seq=seq)


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    """``keep.log`` tracked (``git add -f``) although ``*.log`` is ignored."""
    path = make_git_repo(tmp_path / "grepo").resolve()
    (path / ".gitignore").write_text("*.log\n")
    (path / "keep.log").write_text("kept\n")
    git(path, "add", ".gitignore")
    git(path, "add", "-f", "keep.log")
    git(path, "commit", "-q", "-m", "forced")
    yield path
    forget(path)


def names(worktree: Path, commit_id: str) -> set[str]:
    return {e.name for e in checkpoints(worktree)[commit_id].peel(pygit2.Commit).tree}


def test_another_writers_tracked_file_is_taken_by_the_next_informed_capture(
        grepo: Path) -> None:
    backend = GitBackend()
    (grepo / "keep.log").unlink()
    backend.snapshot(grepo, [stamp(1)])  # full: keep.log dropped here
    mine = worktree_index(grepo)
    # Another process tracks it again (as a restore does) and writes the index.
    (grepo / "keep.log").write_text("restored\n")
    other = WorktreeIndex(grepo)
    other.stage()
    blob = other.repo.create_blob(b"restored\n")
    other.index.add(pygit2.IndexEntry("keep.log", blob, pygit2.enums.FileMode.BLOB))
    other.write()
    assert mine.written_elsewhere()
    snap = backend.snapshot(grepo, [stamp(2)], changed_paths={"keep.log"})
    assert "keep.log" in names(grepo, snap.commit_id)
    again = worktree_index(grepo)
    assert again is not mine  # opened again, as a new process would
    # The watcher's paths are not trusted for the index just read: the
    # first scan is a new process's (libgit2's paths, decision 0062).
    assert again.last_scan == "seeded"
    (grepo / "README.md").write_text("then informed again\n")
    snap = backend.snapshot(grepo, [stamp(3)], changed_paths={"README.md"})
    assert worktree_index(grepo) is again and again.last_scan == "paths"
    assert {"keep.log", "README.md"} <= names(grepo, snap.commit_id)


def test_this_processs_own_writes_never_open_it_again(grepo: Path) -> None:
    """A full scan and a restore write the index here: the same open state
    stays in use (no extra scan), and it says so after each."""
    backend = GitBackend()
    first = backend.snapshot(grepo, [stamp(1)])
    state = worktree_index(grepo)
    assert state.last_scan == "seeded" and not state.written_elsewhere()
    (grepo / "keep.log").unlink()
    backend.snapshot(grepo, [stamp(2)])  # full (no paths): written
    backend.restore(grepo, first.commit_id)  # written too
    (grepo / "README.md").write_text("edited\n")
    snap = backend.snapshot(grepo, [stamp(3)], changed_paths={"README.md"})
    assert worktree_index(grepo) is state and state.last_scan == "paths"
    assert "keep.log" in names(grepo, snap.commit_id)
    path, seen = index_seen(grepo) or (None, None)
    assert path is not None and seen == identity(path)


def test_an_index_removed_under_it_is_seeded_again(grepo: Path) -> None:
    """No file where the index was (removed by hand): opened again, from the
    user's index, as a new process would seed it."""
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    state = worktree_index(grepo)
    path, _ = state.seen()
    path.unlink()
    assert state.written_elsewhere()
    snap = backend.snapshot(grepo, [stamp(2)])
    assert worktree_index(grepo) is not state
    assert "keep.log" in names(grepo, snap.commit_id)  # the user's index tracks it
    assert identity(path) is not None


def test_an_index_another_writer_replaced_is_not_written_over(grepo: Path) -> None:
    """Written by another toolkit between this capture's check and its
    write (its captures take another state folder's worktree lock): this
    scan's write leaves it, and the next capture here opens it."""
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    mine = worktree_index(grepo)
    other = WorktreeIndex(grepo)
    blob = other.repo.create_blob(b"another's\n")
    other.index.add(pygit2.IndexEntry("theirs.log", blob, pygit2.enums.FileMode.BLOB))
    other.write()
    path, _ = mine.seen()
    theirs = identity(path)
    mine.stage()  # as if its check had come just before the other's write
    assert identity(path) == theirs
    assert "theirs.log" in pygit2.Index(str(path))
    (grepo / "theirs.log").write_text("another's\n")
    snap = backend.snapshot(grepo, [stamp(2)])
    assert worktree_index(grepo) is not mine
    assert "theirs.log" in names(grepo, snap.commit_id)
