"""Which checkpoint each checkpoint is compared with (its base), read from a
real store: the previous seq of its attempt, else the newest earlier
checkpoint of the same worktree, else none; and a worktree's own rows only."""

from __future__ import annotations

import itertools
from pathlib import Path

from durability.inspect.timeline import base_of, bases
from durability.store import AttemptKey, Checkpoint, NewCheckpoint, Store


def _store(tmp_path: Path) -> Store:
    ticks = itertools.count(1_000)
    return Store(tmp_path / "state.db", clock=lambda: next(ticks))


def _record(store: Store, key: AttemptKey, worktree: str = "/w") -> None:
    n = len(store.checkpoints(key.run_id))
    store.record_checkpoint(NewCheckpoint(key=key, commit_id=f"{n:040x}{key.run_id}"[-40:],
                                          worktree=worktree, source="hook",
                                          request_id=f"{key.run_id}-{n}"))


def _named(c: Checkpoint | None) -> tuple[str, int, int] | None:
    return None if c is None else (c.run_id, c.attempt, c.seq)


def test_each_checkpoint_is_compared_with_its_attempts_previous_else_the_worktrees(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    one, two, retry = AttemptKey("s1", "a"), AttemptKey("s2", "a"), AttemptKey("s1", "a", 0, 2)
    for key in (one, one, two, one, retry, two):  # two sessions interleaved, then a retry
        _record(store, key)
    _record(store, AttemptKey("elsewhere", "a"), worktree="/other")
    rows = store.worktree_checkpoints("/w")
    assert [(c.run_id, c.seq) for c in rows] == [
        ("s1", 1), ("s1", 2), ("s2", 1), ("s1", 3), ("s1", 1), ("s2", 2)]
    found = {(c.run_id, c.attempt, c.seq): _named(base_of(c, rows)) for c in rows}
    assert found == {
        ("s1", 1, 1): None,  # the worktree's first: nothing to compare with
        ("s1", 1, 2): ("s1", 1, 1),
        ("s2", 1, 1): ("s1", 1, 2),  # a session's first: the newest before it
        ("s1", 1, 3): ("s1", 1, 2),  # its own attempt's previous, not s2's in between
        ("s1", 2, 1): ("s1", 1, 3),  # a retry's first: the newest before it
        ("s2", 1, 2): ("s2", 1, 1),
    }
    assert len(bases(rows)) == len(rows)
    assert store.worktree_checkpoints("/nowhere") == [] and store.worktree_gaps("/w") == []
