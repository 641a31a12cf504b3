"""Each request is on record once, checkpoint or gap, never both (issue 8
item 8): the store arbitrates the races between a late service answer and the
hook that gave up on it, under SQLite's write lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.store import AttemptKey, Checkpoint, Gap, NewCheckpoint, RecordRefused, Store

KEY = AttemptKey("run-once", "n", 0, 1)


def _new(request_id: str) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id="a" * 40, worktree="/w", source="hook",
                         request_id=request_id)


def _gap(request_id: str, reason: str = "timeout") -> Gap:
    return Gap(ts_ms=1, run_id=KEY.run_id, request_id=request_id, reason=reason,
               node_id=KEY.node_id, iteration=0, attempt=1, worktree="/w", source="hook",
               tool_use_id="t", detail="gave up")


def test_a_checkpoint_for_a_request_already_a_gap_is_refused(db_location: Path | str) -> None:
    with Store(db_location) as store:
        assert store.add_gaps([_gap("r1")]) == 1
        with pytest.raises(RecordRefused) as refused:
            store.record_checkpoint(_new("r1"))
        assert refused.value.gap_reason == "timeout"
        assert store.checkpoints(KEY.run_id) == []


def test_a_gap_for_a_request_already_a_checkpoint_is_skipped(db_location: Path | str) -> None:
    with Store(db_location) as store:
        store.record_checkpoint(_new("r1"))
        assert store.add_gaps([_gap("r1"), _gap("r2")]) == 1
        assert [g.request_id for g in store.gaps(KEY.run_id)] == ["r2"]


def test_what_is_on_record_for_a_request(db_location: Path | str) -> None:
    # The hook's fallback asks this under the worktree lock before capturing,
    # so a late answer of the service is found instead of captured again.
    with Store(db_location) as store:
        assert store.request_record("r1") is None
        store.record_checkpoint(_new("r1"))
        store.add_gaps([_gap("r2", "jj-failed")])
        found = store.request_record("r1")
        assert isinstance(found, Checkpoint)
        assert (found.seq, found.request_id) == (1, "r1")
        gap = store.request_record("r2")
        assert isinstance(gap, Gap)
        assert gap.reason == "jj-failed"
