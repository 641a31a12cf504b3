"""The engine's side of isolated worktrees (``durability.runs.isolated``) in one
process, with a recording ``IsolationOps`` (the seam the engine owns): which
worktree each attempt gets, the order of merge, output and removal, the
conflict path, and the sweep of a worktree a crash left merged."""

from __future__ import annotations

from pathlib import Path

from durability.ground.store_errors import WorktreeConflict
from durability.runs.execute import EngineConfig, resume_run, start_run
from durability.runs.isolated import Made, TaskWorktree, task_worktrees
from durability.runs.run_rows import Runs
from durability.store.models import AttemptKey
from tests.durability.runs import wfkit

WORKFLOW = """
workflow = Workflow("iso", max_parallel=2, worktree="isolated")

@workflow.task()
def a(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.worktree, ctx.attempt))
    if wfkit.GATES["fail-a"].is_set():
        wfkit.GATES["fail-a"].clear()
        raise RuntimeError("first try fails")
    return {"a": 1}

@workflow.task(worktree="read")
def b(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.worktree, ctx.attempt))
    return {"b": 2}
"""


class Recorder:
    """An ``IsolationOps`` that makes folders and records every call."""

    def __init__(self, root: Path, conflict: bool = False) -> None:
        self.root, self.conflict = root, conflict
        self.calls: list[tuple[str, str, object]] = []

    def create(self, run_id: str, node_id: str, iteration: int, shared: str,
               base: str | None = None) -> Made:
        path = self.root / f"{node_id}-{iteration}"
        path.mkdir(parents=True, exist_ok=True)
        self.calls.append(("create", node_id, base))
        return Made(str(path), "jj", base or "base0", f"w-{node_id}")

    def usable(self, row: TaskWorktree) -> bool:
        return Path(row.path).is_dir()

    def merge_back(self, row: TaskWorktree, key: AttemptKey) -> str:
        self.calls.append(("merge", key.node_id, key.attempt))
        if self.conflict:
            raise WorktreeConflict("README.md changed on both sides")
        return "merged"

    def remove(self, row: TaskWorktree) -> None:
        self.calls.append(("remove", row.node_id, None))


def _config(ops: Recorder) -> EngineConfig:
    return EngineConfig(heartbeat_s=0.02, isolation=ops)


def test_an_isolated_task_keeps_its_worktree_across_attempts_then_merges_and_goes(
        runs: Runs, tmp_path: Path) -> None:
    ops = Recorder(tmp_path / "iso")
    wfkit.GATES["fail-a"].set()
    path = wfkit.write(tmp_path, WORKFLOW.replace("@workflow.task()\ndef a",
                                                  "@workflow.task(retries=1)\ndef a"))
    outcome = start_run(runs, path, config=_config(ops), run_id="r1", worktree="/shared")
    assert outcome.state == "finished"
    a_calls = [c for c in wfkit.CALLS if c[0] == "a"]
    assert a_calls == [("a", str(tmp_path / "iso" / "a-0"), 1),
                       ("a", str(tmp_path / "iso" / "a-0"), 2)]
    assert ("b", "/shared", 1) in wfkit.CALLS
    # Made once, merged once (after the retry succeeded), then removed.
    assert ops.calls == [("create", "a", None), ("merge", "a", 2), ("remove", "a", None)]
    assert [(r.node_id, r.state) for r in task_worktrees(runs, "r1")] == [("a", "removed")]
    assert [a.worktree for a in runs.attempts("r1") if a.node_id == "a"] == [
        str(tmp_path / "iso" / "a-0")] * 2


def test_a_conflict_fails_the_run_records_no_output_and_keeps_the_worktree(
        runs: Runs, tmp_path: Path) -> None:
    ops = Recorder(tmp_path / "iso", conflict=True)
    outcome = start_run(runs, wfkit.write(tmp_path, WORKFLOW), config=_config(ops),
                        run_id="r2", worktree="/shared")
    assert outcome.state == "failed" and outcome.error is not None
    assert outcome.error["code"] == "WORKTREE_CONFLICT" and outcome.error["node_id"] == "a"
    assert "a" not in {o["node_id"] for o in runs.outputs("r2")}
    assert [r.state for r in task_worktrees(runs, "r2")] == ["conflict"]
    assert ("remove", "a", None) not in ops.calls

    ops.conflict = False  # resolved: the resume runs a again in the same worktree
    assert resume_run(runs, "r2", config=_config(ops)).state == "finished"
    assert [c for c in ops.calls if c[0] == "create"] == [("create", "a", None)]
    assert [r.state for r in task_worktrees(runs, "r2")] == ["removed"]


def test_a_merged_worktree_a_crash_left_behind_is_removed_on_resume(
        runs: Runs, tmp_path: Path) -> None:
    ops = Recorder(tmp_path / "iso")
    path = wfkit.write(tmp_path, WORKFLOW)
    assert start_run(runs, path, config=_config(ops), run_id="r3",
                     worktree="/shared").state == "finished"
    # As if killed between recording a's output and removing its worktree.
    with runs._write() as conn:
        conn.execute("UPDATE task_worktrees SET state='merged' WHERE run_id='r3'")
    ops.calls.clear()
    assert resume_run(runs, "r3", config=_config(ops)).state == "finished"
    assert ops.calls == [("remove", "a", None)]
    assert [r.state for r in task_worktrees(runs, "r3")] == ["removed"]


def test_a_worktree_gone_before_the_retry_is_made_again_from_its_base(
        runs: Runs, tmp_path: Path) -> None:
    import shutil

    ops = Recorder(tmp_path / "iso", conflict=True)
    path = wfkit.write(tmp_path, WORKFLOW)
    assert start_run(runs, path, config=_config(ops), run_id="r4",
                     worktree="/shared").state == "failed"
    shutil.rmtree(tmp_path / "iso" / "a-0")
    ops.conflict = False
    assert resume_run(runs, "r4", config=_config(ops)).state == "finished"
    assert [c for c in ops.calls if c[0] == "create"] == [("create", "a", None),
                                                         ("create", "a", "base0")]
