"""Each request is on record once, checkpoint or gap, never both (issue 8
item 8): the store arbitrates the races between a late service answer and the
hook that gave up on it, under SQLite's write lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import AttemptKey, Gap, NewCheckpoint, RecordRefused, Store

KEY = AttemptKey("run-once", "n", 0, 1)


def _new(request_id: str, not_after_ms: int | None = None) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id="a" * 40, worktree="/w", source="hook",
                         request_id=request_id, not_after_ms=not_after_ms)


def _gap(request_id: str, reason: str = "timeout") -> Gap:
    return Gap(ts_ms=1, run_id=KEY.run_id, request_id=request_id, reason=reason,
               node_id=KEY.node_id, iteration=0, attempt=1, worktree="/w", source="hook",
               tool_use_id="t", detail="gave up")


def test_a_checkpoint_for_a_request_already_a_gap_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        assert store.add_gaps([_gap("r1")]) == 1
        with pytest.raises(RecordRefused) as refused:
            store.record_checkpoint(_new("r1"))
        assert refused.value.gap_reason == "timeout"
        assert store.checkpoints(KEY.run_id) == []


def test_a_gap_for_a_request_already_a_checkpoint_is_skipped(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        store.record_checkpoint(_new("r1"))
        assert store.add_gaps([_gap("r1"), _gap("r2")]) == 1
        assert [g.request_id for g in store.gaps(KEY.run_id)] == ["r2"]


def test_a_checkpoint_past_its_deadline_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db", clock=lambda: 2_000) as store:
        with pytest.raises(RecordRefused) as refused:
            store.record_checkpoint(_new("late", not_after_ms=1_999))
        assert refused.value.gap_reason is None
        done = store.record_checkpoint(_new("in-time", not_after_ms=2_000))
        assert (done.seq, done.deduped) == (1, False)
        # A replay of a recorded request returns its row, deadline or not.
        again = store.record_checkpoint(_new("in-time", not_after_ms=1))
        assert (again.seq, again.replayed) == (1, True)
