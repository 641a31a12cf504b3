"""A finished, failed or cancelled run can still be resumed (engine
``resume`` is legal from every state), and ``on_resume=clean`` starts the
task again from its first attempt's ``attempt start`` checkpoint.  gc judged
such a run by age and thinned that checkpoint away, so a later clean resume
silently fell back to the newest tree."""

from __future__ import annotations

import pytest

from durability.retention.policy import DAY_MS, Policy, judge
from durability.runs.attempt_checkpoints import (
    ATTEMPT_SOURCE,
    END_LABEL,
    START_LABEL,
    restore_target,
)
from durability.store import Checkpoint
from durability.store.gc_rows import RetentionRow

NOW = 1_000 * DAY_MS
OLD = NOW - 200 * DAY_MS


def _rows(state: str | None) -> list[RetentionRow]:
    made = [(1, 1, START_LABEL, ATTEMPT_SOURCE), (1, 2, None, "hook"), (1, 3, END_LABEL,
            ATTEMPT_SOURCE), (2, 1, START_LABEL, ATTEMPT_SOURCE), (2, 2, None, "hook")]
    tops = {1: 3, 2: 2}
    rows = []
    for attempt, seq, label, source in made:
        c = Checkpoint("run-1", "build", 0, attempt, seq, f"c{attempt}-{seq}", None, None, "/wt",
                       source, None, label, f"r{attempt}-{seq}", OLD + attempt * 1000 + seq)
        rows.append(RetentionRow(c, state, None, tops[attempt]))
    return rows


@pytest.mark.parametrize("state", ["failed", "cancelled", "finished"])
def test_gc_keeps_what_a_clean_resume_starts_from(state: str) -> None:
    rows = _rows(state)
    kept = [v.row.checkpoint for v in judge(rows, Policy(), NOW) if not v.expired]
    target = restore_target(kept, node_id="build", iteration=0, worktree="/wt",
                            on_resume="clean")
    assert target is not None
    assert target.reason == "first-start"
    assert (target.checkpoint.attempt, target.checkpoint.seq) == (1, 1)
    # continue's target (the newest) is kept too.
    assert restore_target(kept, node_id="build", iteration=0, worktree="/wt",
                          on_resume="continue") == restore_target(
        [r.checkpoint for r in rows], node_id="build", iteration=0, worktree="/wt",
        on_resume="continue")


def test_a_hook_session_has_no_resume_to_keep_for() -> None:
    # No engine state: judged by age alone, as documented.
    verdicts = judge(_rows(None), Policy(), NOW)
    assert [v.kept_by for v in verdicts] == [None, None, "newest", None, "newest"]


def test_gc_keeps_what_a_continue_resume_starts_from() -> None:
    """A restore puts its pre-restore checkpoint on the target's attempt, as
    that attempt's newest; a resume never starts from a pre-restore one, so
    it goes to the newest other checkpoint of the worktree, which gc judged
    by age alone."""
    rows = _rows("failed")[:3]  # attempt 1: start, hook, end (seq 3)
    c = rows[2].checkpoint
    pre = Checkpoint(c.run_id, c.node_id, c.iteration, 1, 4, "c1-4", None, None, "/wt",
                     "pre-restore", None, None, "r1-4", c.created_at_ms + 1)
    rows = [RetentionRow(r.checkpoint, "failed", None, 4) for r in rows]
    rows.append(RetentionRow(pre, "failed", None, 4))
    before = restore_target([r.checkpoint for r in rows], node_id="build", iteration=0,
                            worktree="/wt", on_resume="continue")
    assert before is not None and before.checkpoint.seq == 3
    kept = [v.row.checkpoint for v in judge(rows, Policy(), NOW) if not v.expired]
    assert restore_target(kept, node_id="build", iteration=0, worktree="/wt",
                          on_resume="continue") == before
