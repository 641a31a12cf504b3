"""An isolated task's merge base (``task_worktrees.base_commit``) is a jj
snapshot of the shared worktree, so it is often the very commit a checkpoint
row of that worktree names (a hook session's capture, with no change since).
gc dropped that row as expired and, with no other row naming the commit,
unpinned it; the op-log trim and ``jj util gc`` then collected it, and the
task's merge back (a resume of a failed run whose merge conflicted) could no
longer read its base."""

from __future__ import annotations

from pathlib import Path

from durability.config import Settings
from durability.retention.gc import run_gc
from durability.retention.policy import Policy
from durability.store import Store
from durability.store.db import write_transaction
from durability.store.gc_rows import commits_in_use
from tests.durability.retention.gckit import DAY, T0, Recorder, file_at, make_repo, store_git

AGE_ONLY = Policy(keep_all_days=2.5, hourly_days=0, daily_days=0, pre_restore_days=0,
                  jj_op_log_days=1, prune_grace_s=0)


def _task_worktree(store: Store, base: str, state: str) -> None:
    with store._conn() as db, write_transaction(db) as conn:
        conn.execute(
            "INSERT INTO task_worktrees (run_id, node_id, iteration, path, kind, shared, "
            "base_commit, name, state, created_at_ms, updated_at_ms) "
            "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)",
            ("run-iso", "build", 0, "/nowhere", "jj", "/shared", base, "durability-x", state,
             T0, T0))


def test_an_isolated_tasks_base_stays_pinned_and_readable(tmp_path: Path,
                                                          settings: Settings) -> None:
    wt = make_repo("jj", tmp_path / "wt")
    rec = Recorder(settings, wt)
    base = rec.capture(b"the merge base\n")
    _task_worktree(rec.store, str(base.commit_id), "conflict")
    for _ in range(4):
        rec.clock.advance(DAY)
        rec.capture()
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 5 * DAY)
    assert report.total("dropped") == 3  # the base's row goes: the policy let it go
    repo = store_git(wt)
    assert f"refs/durability/jj/{base.commit_id}" in repo.references
    assert file_at(wt, str(base.commit_id)) == b"the merge base\n"
    rec.close()


def test_a_removed_task_worktree_holds_nothing(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("jj", tmp_path / "wt")
    rec = Recorder(settings, wt)
    _task_worktree(rec.store, "ab" * 20, "removed")
    assert commits_in_use(rec.store, ["ab" * 20]) == set()
    rec.close()
