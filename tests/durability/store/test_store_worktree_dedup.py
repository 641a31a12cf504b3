"""Dedup (docs/DESIGN.md, contract 3) is per worktree: one attempt that
captures the same commit in two worktrees (an isolated task's tree, then the
shared worktree it was merged into unchanged) gets a row for each, so a
restore of the shared worktree finds its state.  On each backend (``db_location``)."""

from __future__ import annotations

from durability.store import AttemptKey, NewCheckpoint, Store
from durability.store.database import Location

KEY = AttemptKey("run-1", "node-a", 0, 1)


def _new(worktree: str, request_id: str) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id="a" * 40, worktree=worktree, source="merged",
                         request_id=request_id)


def test_the_same_commit_in_another_worktree_is_a_new_checkpoint(
        db_location: Location) -> None:
    store = Store(db_location)
    first = store.record_checkpoint(_new("/isolated", "r1"))
    other = store.record_checkpoint(_new("/shared", "r2"))
    again = store.record_checkpoint(_new("/shared", "r3"))
    assert (first.seq, first.deduped) == (1, False)
    assert (other.seq, other.deduped) == (2, False)
    assert (again.seq, again.deduped) == (2, True)
    assert [(c.seq, c.worktree) for c in store.checkpoints("run-1")] == [
        (1, "/isolated"), (2, "/shared")]
    [attempt] = store.attempts("run-1")
    assert attempt.worktree == "/shared"
