"""gc and the tool-call boundaries (decision 0057), on real jj and git
repositories through the real capturer, store and gc.

A call that changed nothing dedups onto its attempt's newest row, which may
be days older than the call: the boundary names that row.  gc keeps it while
a boundary naming it is younger than ``keep_all_days`` (``recent-call``),
judges it as any other row afterwards (here: dropped), and its boundaries
are then collected, naming no commit; the preview, the dry run and the real
gc give the same verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.capture.capturer import Outcome
from durability.config import Settings
from durability.retention import gc
from durability.retention.policy import Policy, judge
from durability.store.boundaries import NewBoundary, boundaries, record_boundaries
from durability.store.gc_rows import RetentionRow, retention_rows
from durability.store.models import Checkpoint
from tests.durability.retention.gckit import DAY, KEY, T0, Recorder, has_object, make_repo

#: Every checkpoint of the last week, and each attempt's newest.
WEEK = Policy(keep_all_days=7, hourly_days=0, daily_days=0, pre_restore_days=0,
              jj_op_log_days=0, prune_grace_s=0)


def _boundary(rec: Recorder, out: Outcome, call: str) -> None:
    assert out.seq is not None and out.commit_id is not None
    record_boundaries(rec.store, [NewBoundary(
        key=KEY, request_id=f"b-{call}", checkpoint_seq=out.seq, commit_id=out.commit_id,
        worktree=str(rec.worktree), harness="claude", tool_use_id=call)])


def _verdicts(rec: Recorder, settings: Settings, now: int) -> dict[int, str | None]:
    return {v.row.checkpoint.seq: v.kept_by for v in gc.verdicts(rec.store, WEEK, now)}


@pytest.mark.parametrize("kind", ["jj", "git"])
def test_a_deduplicated_call_keeps_its_older_row_while_the_call_is_recent(
        tmp_path: Path, settings: Settings, kind: str) -> None:
    worktree = make_repo(kind, tmp_path / "repo")
    rec = Recorder(settings, worktree)
    try:
        first = rec.capture(b"one\n")
        _boundary(rec, first, "t1")
        rec.clock.advance(10 * DAY)
        again = rec.capture(b"one\n")  # a Read ten days on: the same tree
        assert (again.deduped, again.seq, again.commit_id) == (True, 1, first.commit_id)
        _boundary(rec, again, "t2")
        rec.clock.advance(60_000)
        rec.capture(b"two\n")  # seq 2, the attempt's newest
        # Seq 1 is 11 days old, and a call named it a day ago.
        now = T0 + 11 * DAY
        assert _verdicts(rec, settings, now) == {1: "recent-call", 2: "newest"}
        preview = gc.run_gc(settings, rec.store, WEEK, now_ms=now, dry_run=True)
        assert preview.to_dict()["checkpoints"]["kept_by"] == {"newest": 1, "recent-call": 1}
        kept = gc.run_gc(settings, rec.store, WEEK, now_ms=now)
        assert kept.to_dict()["checkpoints"]["dropped"] == 0
        assert [b.commit_id for b in boundaries(rec.store, KEY.run_id)] == [first.commit_id] * 2
        # A week after the call, seq 1 is judged by its own age: it goes, and
        # both of its calls are collected (their files cannot come back).
        later = now + 7 * DAY
        assert _verdicts(rec, settings, later) == {1: None, 2: "newest"}
        done = gc.run_gc(settings, rec.store, WEEK, now_ms=later)
        assert done.to_dict()["checkpoints"]["dropped"] == 1
        assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [2]
        assert [(b.tool_use_id, b.collected) for b in boundaries(rec.store, KEY.run_id)] == [
            ("t1", True), ("t2", True)]
        if kind == "git":  # jj's op log keeps it (jj_op_log_days 0: never trimmed)
            assert not has_object(worktree, first.commit_id)
    finally:
        rec.close()


def test_the_policy_judges_a_row_by_its_newest_call_for_the_keep_window() -> None:
    def row(seq: int, created: int, called: int | None, top: int = 3) -> RetentionRow:
        c = Checkpoint("s", "session", 0, 1, seq, f"{seq:040x}", None, None, "/w", "hook",
                       None, None, f"r{seq}", created)
        return RetentionRow(c, None, None, top, None, called)

    now = 100 * DAY
    rows = [row(1, now - 30 * DAY, now - 6 * DAY),   # called inside the window
            row(2, now - 30 * DAY, now - 8 * DAY),   # called before it
            row(3, now - 30 * DAY, None)]            # the newest
    assert [v.kept_by for v in judge(rows, WEEK, now)] == ["recent-call", None, "newest"]
    # The window off (0 days) keeps no call, as it keeps no recent row.
    off = Policy(keep_all_days=0, hourly_days=0, daily_days=0)
    assert [v.kept_by for v in judge(rows, off, now)] == [None, None, "newest"]


def test_retention_rows_read_the_newest_call_from_the_store(tmp_path: Path,
                                                            settings: Settings) -> None:
    worktree = make_repo("git", tmp_path / "repo")
    rec = Recorder(settings, worktree)
    try:
        out = rec.capture(b"one\n")
        _boundary(rec, out, "t1")
        rec.clock.advance(DAY)
        _boundary(rec, rec.capture(b"one\n"), "t2")
        [r] = retention_rows(rec.store)
        assert r.called_at_ms == T0 + DAY
    finally:
        rec.close()
