"""Runs handed to a worker (``durability.runs.detach``), on each backend: the
claimant marks the run running, a pause asked before the worker starts is
kept for it, the resume is logged once, and a worker that cannot start
leaves the run paused for a resume rather than claimed by nobody at work."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.runs.detach import WorkerNotStarted, hand_over, worker_argv
from durability.runs.execute import EngineConfig, create_run, resume_claim, resume_run
from durability.runs.fence import Claim, Owner
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from tests.durability.runs import wfkit

FLOW = """\
workflow = Workflow("detached")


@workflow.task()
def only(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    return {}
"""


def _created(runs: Runs, tmp_path: Path, run_id: str, owner: Owner) -> Claim:
    made = create_run(runs, wfkit.write(tmp_path / "wf", FLOW), run_id=run_id, owner=owner)
    assert not isinstance(made, RunOutcome)
    return made[1]


def test_a_pause_asked_before_the_worker_starts_is_kept_for_it(runs: Runs,
                                                                tmp_path: Path) -> None:
    owner = Owner.this_process("mcp:test")
    claim = _created(runs, tmp_path, "d1", owner)
    runs.start_running(claim)  # what hand_over does before it spawns
    assert runs.get_run("d1").state == "running"
    # The claimant's process is alive and its heartbeat fresh: the owner is asked.
    assert runs.request("d1", "pause", live_within_ms=10_000) == "requested"
    # The worker (here in process, as the child would) takes the claim over.
    done = resume_run(runs, "d1", config=EngineConfig(), owner=owner,
                      claim_epoch=claim.epoch, claim_started=True)
    assert done.state == "paused"
    assert wfkit.CALLS == []  # nothing started after the pause
    kinds = [e.kind for e in runs.events("d1")]
    assert "run-resumed" not in kinds  # a fresh start, handed over: not a resume


def test_a_handed_over_resume_is_logged_once(runs: Runs, tmp_path: Path) -> None:
    owner = Owner.this_process("mcp:first")
    claim = _created(runs, tmp_path, "d2", owner)
    runs.park(claim, "paused")
    again = Owner.this_process("mcp:second")
    claim = resume_claim(runs, "d2", owner=again, now=runs._clock(), stale_after_ms=1000)
    runs.start_running(claim)
    done = resume_run(runs, "d2", config=EngineConfig(), owner=again,
                      claim_epoch=claim.epoch, claim_started=True)
    assert done.state == "finished" and wfkit.CALLS == [("only", 0, 1)]
    assert [e.kind for e in runs.events("d2")].count("run-resumed") == 1


def test_a_worker_that_cannot_start_leaves_the_run_paused(runs: Runs, tmp_path: Path) -> None:
    claim = _created(runs, tmp_path, "d3", Owner.this_process("mcp:test"))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(WorkerNotStarted) as caught:
        hand_over(runs, claim, runs_dir=blocker / "runs", env=None)
    assert caught.value.code == "RUN_WORKER_FAILED" and "durability resume d3" in str(
        caught.value)
    row = runs.get_run("d3")
    assert (row.state, row.owner) == ("paused", None)
    # ...so a resume takes it at once, though the claimant is alive.
    claim = resume_claim(runs, "d3", owner=Owner.this_process("next"), now=runs._clock(),
                         stale_after_ms=10**9)
    assert claim.epoch > 1


def test_the_worker_is_the_supervisors_child_command() -> None:
    claim = Claim("r", 3, Owner("mcp:x", 1, "h"))
    argv = worker_argv(claim, accept_workflow_change=True, python="py")
    assert argv == ["py", "-P", "-m", "durability", "resume", "r", "--claim-epoch", "3",
                    "--claim-owner", "mcp:x", "--claim-started", "--quiet",
                    "--accept-workflow-change"]

