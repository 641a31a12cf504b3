"""libgit2's check that an id names an object in the store stays on while a
git restore stages the files it wrote.  A first version of the faster restore
switched it off, process-wide, for those adds: another thread of the same
process (the engine or the MCP server capturing a jj worktree while it
restores a git one) then lost the check too, including the one on a ref's
target: a jj pin of a commit that is not in the git store was taken, leaving
a dangling ref (which ``git gc`` refuses), instead of failing with
``jj-failed``.  Found by a review of issue 11's restore work; the restore now
keeps the blobs it read in libgit2's cache instead (``_blobs_cached``)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends.git import GitBackend, forget
from durability.backends.git_index import WorktreeIndex
from durability.backends.jj import pin
from durability.ground.errors import JjFailed
from tests.helpers import make_git_repo

MISSING = "12" * 20


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def test_a_pin_of_a_missing_commit_fails_while_a_restore_stages(
        grepo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other.git"
    pygit2.init_repository(str(other), bare=True)
    (grepo / "a.txt").write_text("one\n")
    backend = GitBackend()
    first = backend.snapshot(grepo).commit_id
    (grepo / "a.txt").write_text("two\n")
    second = backend.snapshot(grepo).commit_id
    outcome: list[str] = []

    def pin_elsewhere() -> None:
        try:
            pin(other, MISSING)
            outcome.append("pinned a commit the store does not hold")
        except JjFailed:
            outcome.append("refused")

    real = WorktreeIndex.record

    def record(self: WorktreeIndex,
               written: Iterable[tuple[str, pygit2.Oid, int, object]]) -> None:
        def meanwhile() -> Iterator[tuple[str, pygit2.Oid, int, object]]:
            for item in written:  # pulled inside the restore's window
                if not outcome:
                    thread = threading.Thread(target=pin_elsewhere)
                    thread.start()
                    thread.join()
                yield item

        real(self, meanwhile())  # type: ignore[arg-type]

    monkeypatch.setattr(WorktreeIndex, "record", record)
    backend.restore(grepo, first, pre_restore=second)
    assert outcome == ["refused"]
