"""Run lifecycle in one process: pause drains, cancel then resume, quota
park and wake on a controllable clock, budgets, approvals, claims."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from durability.ground.store_errors import ClaimFailed, ClaimLost, RunOwnerAlive, RunStillRunning
from durability.runs.execute import EngineConfig, resume_run, start_run
from durability.runs.fence import Claim, Owner
from durability.runs.resume import claim_run
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from durability.runs.supervise import Supervisor
from durability.runs.worktree import NullWorktreeOps
from durability.store.clock import ManualClock
from durability.store.models import AttemptKey, Checkpoint
from tests.durability.runs import wfkit
from tests.helpers import wait_for

FAST = EngineConfig(heartbeat_s=0.02)


class Background:
    """``start_run`` on a thread, for tests that act on a live run."""

    def __init__(self, runs: Runs, path: Path, run_id: str) -> None:
        self.result: list[RunOutcome | BaseException] = []
        self.thread = threading.Thread(target=self._go, args=(runs, path, run_id))
        self.thread.start()

    def _go(self, runs: Runs, path: Path, run_id: str) -> None:
        try:
            self.result.append(start_run(runs, path, config=FAST, run_id=run_id))
        except BaseException as exc:
            self.result.append(exc)

    def join(self) -> RunOutcome | BaseException:
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.result[0]


GATED = """
workflow = Workflow("gated")

@workflow.task()
def first(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    wfkit.GATES["first-started"].set()
    while not wfkit.GATES["release"].is_set():
        ctx.sleep(0.01)
    return {"n": 1}

@workflow.task(deps=["first"])
def second(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    return {"n": ctx.inputs["first"]["n"] + 1}
"""


def test_pause_drains_in_flight_work_without_abandoning(runs: Runs, tmp_path: Path) -> None:
    run = Background(runs, wfkit.write(tmp_path, GATED), "p1")
    wait_for(lambda: wfkit.GATES["first-started"].is_set())
    assert runs.request("p1", "pause", live_within_ms=10_000) == "requested"
    wait_for(lambda: runs.get_run("p1").requested == "pause")
    wfkit.GATES["release"].set()
    outcome = run.join()
    assert isinstance(outcome, RunOutcome) and outcome.state == "paused"
    assert [(a.node_id, a.state) for a in runs.attempts("p1")] == [("first", "succeeded")]
    assert runs.get_run("p1").owner is None
    assert resume_run(runs, "p1", config=FAST).state == "finished"
    assert wfkit.CALLS == [("first", 0, 1), ("second", 0, 1)]


def test_cancel_stops_in_flight_then_resume_reruns_it(runs: Runs, tmp_path: Path) -> None:
    run = Background(runs, wfkit.write(tmp_path, GATED), "c1")
    wait_for(lambda: wfkit.GATES["first-started"].is_set())
    assert runs.request("c1", "cancel", live_within_ms=10_000) == "requested"
    outcome = run.join()
    assert isinstance(outcome, RunOutcome) and outcome.state == "cancelled"
    [attempt] = runs.attempts("c1")
    assert attempt.state == "stopped" and "RUN_CANCELLED" in (attempt.error_json or "")
    wfkit.GATES["release"].set()
    assert resume_run(runs, "c1", config=FAST).state == "finished"
    assert wfkit.CALLS == [("first", 0, 1), ("first", 0, 2), ("second", 0, 1)]


def test_pause_and_cancel_of_an_idle_run_apply_at_once(runs: Runs, tmp_path: Path) -> None:
    gated = GATED.replace("@workflow.task(deps", "@workflow.task(approval=True, deps")
    path = wfkit.write(tmp_path, gated)
    wfkit.GATES["release"].set()
    assert start_run(runs, path, config=FAST, run_id="i1").state == "waiting-approval"
    assert runs.request("i1", "pause", live_within_ms=10_000) == "paused"
    assert runs.request("i1", "cancel", live_within_ms=10_000) == "cancelled"
    assert runs.get_run("i1").state == "cancelled"


QUOTA = """
workflow = Workflow("quota")

@workflow.task()
def call_model(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    if ctx.attempt == 1:
        ctx.quota_exhausted(reset_at_ms=RESET)
    return {"answer": 42}
"""


class _Done:
    def poll(self) -> int | None:
        return 0


def _in_process_launcher(runs: Runs, outcomes: list[RunOutcome]) -> object:
    def launch(claim: Claim) -> _Done:
        outcomes.append(resume_run(runs, claim.run_id, config=FAST, owner=claim.owner,
                                   claim_epoch=claim.epoch))
        return _Done()
    return launch


def test_quota_parks_and_the_supervisor_wakes_it_after_the_reset(runs: Runs,
                                                                 tmp_path: Path) -> None:
    reset_at = wfkit.CLOCK() + 3_600_000
    path = wfkit.write(tmp_path, QUOTA.replace("RESET", str(reset_at)))
    outcome = start_run(runs, path, config=FAST, run_id="q1")
    assert (outcome.state, outcome.wake_at_ms) == ("waiting-quota", reset_at)
    woken: list[RunOutcome] = []
    sup = Supervisor(runs, supervisor_id="t", launch=_in_process_launcher(runs, woken),  # type: ignore[arg-type]
                     stale_after_ms=30_000, clock=wfkit.CLOCK)
    assert sup.tick() == []
    wfkit.CLOCK.advance(3_599_000)
    assert sup.tick() == []
    wfkit.CLOCK.advance(1_000)
    [claim] = sup.tick()
    assert claim.owner.name == "supervisor:t"
    assert [o.state for o in woken] == ["finished"]
    assert wfkit.CALLS == [("call_model", 0, 1), ("call_model", 0, 2)]


def test_quota_without_a_reset_time_waits_for_a_person(runs: Runs, tmp_path: Path) -> None:
    path = wfkit.write(tmp_path, QUOTA.replace("RESET", "None"))
    assert start_run(runs, path, config=FAST, run_id="q2").wake_at_ms is None
    sup = Supervisor(runs, supervisor_id="t", launch=_in_process_launcher(runs, []),  # type: ignore[arg-type]
                     stale_after_ms=30_000, clock=wfkit.CLOCK)
    wfkit.CLOCK.advance(10 * 24 * 3_600_000)
    assert sup.tick() == []
    assert resume_run(runs, "q2", config=FAST).state == "finished"


BUDGET = """
workflow = Workflow("budget", limits=Limits(turns=2, tokens=10_000))

@workflow.task()
def chat(ctx):
    for _ in range(5):
        wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
        ctx.progress(turns=1, tokens=100)
    return {"never": True}
"""


def test_a_budget_aborts_the_attempt_with_a_code_naming_the_limit(runs: Runs,
                                                                  tmp_path: Path) -> None:
    outcome = start_run(runs, wfkit.write(tmp_path, BUDGET), config=FAST, run_id="b1")
    assert outcome.state == "failed"
    assert outcome.error and outcome.error["code"] == "BUDGET_TURNS_EXCEEDED"
    assert len(wfkit.CALLS) == 3  # the third turn crossed the limit of two
    assert runs.usage("b1").turns == 3
    assert runs.outputs("b1") == []
    # Resuming does not buy more: the limit is crossed before anything starts.
    again = resume_run(runs, "b1", config=FAST)
    assert again.error and again.error["code"] == "BUDGET_TURNS_EXCEEDED"
    assert len(wfkit.CALLS) == 3


def _row_owned_by(runs: Runs, tmp_path: Path, owner: Owner, run_id: str) -> None:
    path = wfkit.write(tmp_path, GATED)
    claim = runs.create_run(run_id, owner=owner, workflow_path=str(path),
                            repo_root=str(tmp_path), worktree=None, metadata_json="{}",
                            plan_json="[]", limits_json="{}")
    runs.start_running(claim)


def test_claims_refuse_live_owners_and_fresh_heartbeats(runs: Runs, tmp_path: Path) -> None:
    here = Owner.this_process()
    _row_owned_by(runs, tmp_path, here, "o1")
    row = runs.get_run("o1")
    now = row.heartbeat_at_ms or 0
    me = Owner.this_process("me")
    with pytest.raises(RunOwnerAlive):
        claim_run(runs, row, owner=me, now=now, stale_after_ms=60_000)
    _row_owned_by(runs, tmp_path, Owner("far", 1, "another-host"), "o2")
    far = runs.get_run("o2")
    beat = far.heartbeat_at_ms or 0
    with pytest.raises(RunStillRunning):
        claim_run(runs, far, owner=me, now=beat, stale_after_ms=60_000)
    # Stale, or forced: claimable.
    assert claim_run(runs, far, owner=me, now=beat + 60_000, stale_after_ms=60_000)
    assert claim_run(runs, row, owner=me, now=now, stale_after_ms=60_000, force=True)


def test_an_owner_whose_process_is_gone_is_claimable_at_once(runs: Runs, tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    _row_owned_by(runs, tmp_path, Owner("gone", dead.pid, Owner.this_process().host), "o3")
    row = runs.get_run("o3")
    claim = claim_run(runs, row, owner=Owner.this_process("me"), now=row.heartbeat_at_ms or 0,
                      stale_after_ms=60_000)
    assert claim.epoch == row.claim_epoch + 1


def test_of_two_claims_on_one_observation_one_wins(runs: Runs, tmp_path: Path) -> None:
    _row_owned_by(runs, tmp_path, Owner("gone", 1, "elsewhere"), "o4")
    row = runs.get_run("o4")
    later = (row.heartbeat_at_ms or 0) + 10**9
    winner = claim_run(runs, row, owner=Owner("a", os.getpid(), "h"), now=later,
                       stale_after_ms=1)
    with pytest.raises(ClaimFailed):
        claim_run(runs, row, owner=Owner("b", os.getpid(), "h"), now=later, stale_after_ms=1)
    # The displaced owner of an earlier epoch can record nothing.
    with pytest.raises(ClaimLost):
        runs.begin_attempt(Claim("o4", row.claim_epoch, Owner("gone", 1, "elsewhere")),
                           "first", 0, None)
    assert runs.begin_attempt(winner, "first", 0, None).attempt == 1


def test_a_run_taken_over_stops_and_records_nothing_more(runs: Runs, tmp_path: Path) -> None:
    run = Background(runs, wfkit.write(tmp_path, GATED), "l1")
    wait_for(lambda: wfkit.GATES["first-started"].is_set())
    row = runs.get_run("l1")
    assert runs.claim("l1", expected_epoch=row.claim_epoch, owner=Owner.this_process("thief"))
    wfkit.GATES["release"].set()
    assert isinstance(run.join(), ClaimLost)
    assert runs.outputs("l1") == []
    assert runs.get_run("l1").owner == "thief"


def test_since_a_claim_made_after_the_resume_began_is_a_lost_race(runs: Runs,
                                                                 tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    path = wfkit.write(tmp_path, GATED)
    wfkit.GATES["release"].set()
    start_run(runs, path, config=FAST, run_id="s1")
    with pytest.raises(ClaimFailed):
        resume_run(runs, "s1", config=EngineConfig(clock=clock), since_ms=0)


FLAKY = """
workflow = Workflow("flaky")

@workflow.task()
def upstream(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    return {"n": 1}

@workflow.task(deps=["upstream"], retries=1)
def flaky(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    if wfkit.GATES["park"].is_set() and ctx.attempt == 2:
        ctx.quota_exhausted(reset_at_ms=None)
    if not wfkit.GATES["fixed"].is_set():
        raise RuntimeError(f"broken on attempt {ctx.attempt}")
    return {"n": ctx.inputs["upstream"]["n"] + 1}
"""


class _RecordingOps(NullWorktreeOps):
    """Records the restores the runner asks for (the engine's own seam)."""

    def __init__(self) -> None:
        self.restored: list[AttemptKey] = []

    def restore_checkpoint(self, target: Checkpoint, worktree: str,
                           interrupted: AttemptKey) -> str:
        self.restored.append(interrupted)
        return "recorded"


def _flaky_calls() -> list[int]:
    return [attempt for node, _, attempt in wfkit.CALLS if node == "flaky"]


def test_resuming_a_failed_run_gives_the_failed_task_a_fresh_retry_budget(
        runs: Runs, tmp_path: Path) -> None:
    ops = _RecordingOps()
    config = EngineConfig(heartbeat_s=0.02, ops=ops)
    path = wfkit.write(tmp_path, FLAKY)
    first = start_run(runs, path, config=config, run_id="f1", worktree=str(tmp_path))
    assert first.state == "failed" and first.error
    assert first.error["code"] == "TASK_FAILED" and "attempt 2" in first.error["message"]
    # Not fixed yet: the resume runs it again, two more tries (retries=1),
    # numbered on from the last attempt, then fails again.
    again = resume_run(runs, "f1", config=config)
    assert again.state == "failed" and again.error and "attempt 4" in again.error["message"]
    assert _flaky_calls() == [1, 2, 3, 4]
    wfkit.GATES["fixed"].set()
    assert resume_run(runs, "f1", config=config).state == "finished"
    assert _flaky_calls() == [1, 2, 3, 4, 5]
    assert [c for c in wfkit.CALLS if c[0] == "upstream"] == [("upstream", 0, 1)]
    assert [(a.attempt, a.state) for a in runs.attempts("f1") if a.node_id == "flaky"] == \
        [(1, "failed"), (2, "failed"), (3, "failed"), (4, "failed"), (5, "succeeded")]
    assert [o["output"] for o in runs.outputs("f1") if o["node_id"] == "flaky"] == [{"n": 2}]
    # A task that failed (rather than being interrupted) is not restored.
    assert ops.restored == []


def test_only_a_failed_run_has_its_retry_budget_restarted(runs: Runs, tmp_path: Path) -> None:
    wfkit.GATES["park"].set()  # attempt 1 fails, attempt 2 parks on quota
    path = wfkit.write(tmp_path, FLAKY)
    assert start_run(runs, path, config=FAST, run_id="f2").state == "waiting-quota"
    # Resumed from waiting-quota: attempt 1's failure still counts, so one
    # more failure (attempt 3) uses up retries=1.
    outcome = resume_run(runs, "f2", config=FAST)
    assert outcome.state == "failed" and outcome.error
    assert "attempt 3" in outcome.error["message"]
    assert _flaky_calls() == [1, 2, 3]
