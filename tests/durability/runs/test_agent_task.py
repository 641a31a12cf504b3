"""Agent tasks' engine contracts, in process, with a scripted harness (the
adapter protocol is the boundary): output validation and corrections,
verify, budgets killing the agent within one event, quota failover without
a spent retry, parking until the earliest reset and supervise waking it,
sessions continued or never continued, a lost session started fresh."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durability.runs import agent_rows
from durability.runs.agent import AgentConfig, register_harness
from durability.runs.execute import EngineConfig, resume_run, start_run
from durability.runs.fence import Claim
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from durability.runs.supervise import Supervisor
from durability.store.clock import ManualClock
from tests.durability.runs import agentkit, wfkit
from tests.durability.runs.agentkit import Scripted, answer, session, tool, usage
from tests.helpers import wait_for

HARNESSES: dict[str, Scripted] = {}

WF = """
class Out(BaseModel):
    n: int

workflow = Workflow("agents")
workflow.agent("work", prompt="do the work", harness=CHAIN, output=Out, OPTS)
"""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_800_000_000_000)


@pytest.fixture
def runs(db_location: Path | str, clock: ManualClock) -> Iterator[Runs]:
    wfkit.reset()
    HARNESSES.clear()
    with Runs(db_location, clock=clock) as store:
        yield store
    HARNESSES.clear()


def harness(name: str, *programs: list[Any]) -> Scripted:
    """A scripted harness ``name`` playing ``programs`` (each a list of steps,
    nested lists flattened)."""
    flat = [[s for part in p for s in (part if isinstance(part, list) else [part])]
            for p in programs]
    HARNESSES[name] = found = Scripted(name=name, programs=flat)
    register_harness(name, lambda: HARNESSES[name])
    return found


def config(tmp_path: Path, clock: ManualClock) -> EngineConfig:
    return EngineConfig(heartbeat_s=0.05, clock=clock,
                        agents=AgentConfig(private_root=tmp_path / "private", poll_s=0.01,
                                           grace_s=0.5))


def workflow(tmp_path: Path, chain: tuple[str, ...] = ("s1",), opts: str = "") -> Path:
    body = WF.replace("CHAIN", repr(chain)).replace(", OPTS", f", {opts}" if opts else "")
    return wfkit.write(tmp_path / "wf", body)


def start(runs: Runs, tmp_path: Path, clock: ManualClock, run_id: str,
          chain: tuple[str, ...] = ("s1",), opts: str = "") -> RunOutcome:
    (tmp_path / "wt").mkdir(exist_ok=True)
    return start_run(runs, workflow(tmp_path, chain, opts), config=config(tmp_path, clock),
                     run_id=run_id, worktree=str(tmp_path / "wt"))


def attempts(runs: Runs, run_id: str) -> list[tuple[Any, ...]]:
    return runs._read("SELECT attempt, state, error_json, harness, session_id FROM attempts "
                      "WHERE run_id=$1 ORDER BY attempt", (run_id,))


def kinds(runs: Runs, run_id: str) -> list[str]:
    return [e.kind for e in runs.events(run_id)]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_a_valid_answer_is_recorded_with_the_session_and_calls(runs: Runs, tmp_path: Path,
                                                               clock: ManualClock) -> None:
    h = harness("s1", [session(), usage(100, 20), tool("t1", "a.txt", "A"),
                       usage(50, 10), tool("t2", "b.txt", "B"), answer({"n": 7}, cost=0.01)])
    outcome = start(runs, tmp_path, clock, "a1")
    assert outcome.state == "finished", outcome
    assert runs.outputs("a1")[0]["output"] == {"n": 7}
    [(attempt, state, _, name, sid)] = attempts(runs, "a1")
    assert (attempt, state, name) == (1, "succeeded", "s1")
    assert sid == h.seen[0].session_id and sid  # the id the engine chose, recorded
    assert agent_rows.completed_calls(runs, "a1", sid) == {"t1", "t2"}
    assert (tmp_path / "wt" / "b.txt").read_text() == "B"
    assert h.seen[0].prompt == "do the work" and h.seen[0].resume_id is None
    assert h.seen[0].schema["properties"]["n"]["type"] == "integer"
    assert h.seen[0].hook_env["DURABILITY_RUN_ID"] == "a1"
    assert h.seen[0].hook_env["DURABILITY_ATTEMPT"] == "1"
    used = runs.usage("a1")
    assert (used.turns, used.tokens) == (2, 180)
    ended = [e for e in runs.events("a1") if e.kind == "agent-ended"]
    assert ended and ended[0].detail and ended[0].detail["exit"] == 0
    assert ended[0].detail["input_tokens"] == 150 and ended[0].detail["output_tokens"] == 30
    reconciled = next(e for e in runs.events("a1") if e.kind == "agent-usage")
    assert reconciled.detail and reconciled.detail["reported_usd"] == 0.01


def test_the_cost_limit_kills_the_agent_within_the_event_that_crossed_it(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    harness("s1", [session(), {"child": True}, {"child": "detached"}, usage(10, 10, cost=0.3),
                   usage(10, 10, cost=0.3),
                   {"sleep": 1.0}, usage(10, 10, cost=0.3), {"write": ["late.txt", "x"]},
                   answer({"n": 1})])
    outcome = start(runs, tmp_path, clock, "b1", opts="max_cost=0.5")
    assert outcome.state == "failed"
    assert outcome.error and outcome.error["code"] == "BUDGET_COST_EXCEEDED"
    assert "cost used 0.6 of 0.5" in outcome.error["message"]
    assert runs.usage("b1").turns == 2  # the third usage was never emitted: killed first
    assert not (tmp_path / "wt" / "late.txt").exists()
    private = next((tmp_path / "private" / "b1").glob("*/*"))
    assert gone(int((private / "pid").read_text()))
    assert gone(int((private / "child.pid").read_text()))  # the whole group
    wait_for(lambda: gone(int((private / "detached.pid").read_text())), timeout=10)
    ended = next(e for e in runs.events("b1") if e.kind == "agent-ended")
    assert ended.detail and ended.detail["killed"] == "budget"
    assert "budget-hit" in kinds(runs, "b1")
    assert runs.outputs("b1") == []


def test_a_quota_fails_over_to_the_next_harness_without_spending_a_retry(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    reset = clock() + 3_600_000
    harness("s1", [session(), {"emit": {"type": "quota", "message": "usage limit",
                                        "reset_at_ms": reset}}, {"sleep": 5}])
    second = harness("s2", [session(), tool("t1", "c.txt", "C"), answer({"n": 2})])
    outcome = start(runs, tmp_path, clock, "c1", chain=("s1", "s2"))  # retries=0
    assert outcome.state == "finished", outcome
    assert [a[1] for a in attempts(runs, "c1")] == ["succeeded"]
    assert attempts(runs, "c1")[0][3] == "s2"
    assert [(b.harness, b.reset_at_ms) for b in agent_rows.blocks(runs, "c1")] == [("s1", reset)]
    assert "agent-failover" in kinds(runs, "c1")
    assert second.seen[0].resume_id is None


def _launcher(runs: Runs, tmp_path: Path, clock: ManualClock,
              outcomes: list[RunOutcome]) -> Any:
    class Done:
        def poll(self) -> int | None:
            return 0

    def launch(claim: Claim) -> Done:
        outcomes.append(resume_run(runs, claim.run_id, config=config(tmp_path, clock),
                                   owner=claim.owner, claim_epoch=claim.epoch))
        return Done()

    return launch


def test_all_blocked_parks_until_the_earliest_reset_and_supervise_finishes_it(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    early, late = clock() + 600_000, clock() + 7_200_000
    first = harness("s1", [session(), {"emit": {"type": "quota", "message": "limit",
                                                "reset_at_ms": early}}],
                    [session(), tool("t1", "d.txt", "D"), answer({"n": 3})])
    harness("s2", [session(), {"emit": {"type": "quota", "message": "limit",
                                        "reset_at_ms": late}}])
    outcome = start(runs, tmp_path, clock, "d1", chain=("s1", "s2"))
    assert (outcome.state, outcome.wake_at_ms) == ("waiting-quota", early)
    woken: list[RunOutcome] = []
    sup = Supervisor(runs, supervisor_id="t", launch=_launcher(runs, tmp_path, clock, woken),
                     stale_after_ms=30_000, clock=clock)
    assert sup.tick() == []
    clock.advance(599_000)
    assert sup.tick() == []
    clock.advance(1_000)
    [claim] = sup.tick()
    assert claim.owner.name == "supervisor:t"
    assert [o.state for o in woken] == ["finished"]
    # The attempt last ran s2's session, and s2 is still blocked (not tried
    # again): s1 starts a session of its own on the tree.
    assert first.seen[1].resume_id is None
    assert len(HARNESSES["s2"].seen) == 1
    assert [b.harness for b in agent_rows.blocks(runs, "d1")] == ["s2"]
    assert [a[1] for a in attempts(runs, "d1")] == ["stopped", "succeeded"]


def test_a_quota_without_a_reset_waits_for_a_person(runs: Runs, tmp_path: Path,
                                                    clock: ManualClock) -> None:
    harness("s1", [session(), {"emit": {"type": "quota", "message": "limit"}}],
            [session(), answer({"n": 4})])
    outcome = start(runs, tmp_path, clock, "e1")
    assert (outcome.state, outcome.wake_at_ms) == ("waiting-quota", None)
    sup = Supervisor(runs, supervisor_id="t", launch=_launcher(runs, tmp_path, clock, []),
                     stale_after_ms=30_000, clock=clock)
    clock.advance(30 * 24 * 3_600_000)
    assert sup.tick() == []
    assert resume_run(runs, "e1", config=config(tmp_path, clock)).state == "finished"


def test_an_invalid_answer_is_corrected_in_the_same_session(runs: Runs, tmp_path: Path,
                                                            clock: ManualClock) -> None:
    h = harness("s1", [session(), answer(None, text="the answer is seven")],
                [session(), answer(None, text='```json\n{"n": 7}\n```')])
    outcome = start(runs, tmp_path, clock, "f1")
    assert outcome.state == "finished", outcome
    assert runs.outputs("f1")[0]["output"] == {"n": 7}
    assert h.seen[1].resume_id == h.seen[0].session_id
    assert "not JSON" in h.seen[1].prompt
    assert kinds(runs, "f1").count("agent-correction") == 1


def test_answers_still_invalid_after_the_corrections_fail_output_invalid(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    h = harness("s1", [session(), answer({"n": "many"})])
    outcome = start(runs, tmp_path, clock, "g1", opts="corrections=1")
    assert outcome.state == "failed"
    assert outcome.error and outcome.error["code"] == "OUTPUT_INVALID"
    assert len(h.seen) == 2  # the answer, one correction turn, then the failure
    assert "n: Input should be a valid integer" in h.seen[1].prompt
    assert runs.outputs("g1") == []


def test_a_refusal_of_verify_fails_output_invalid_and_records_nothing(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    harness("s1", [session(), answer({"n": 5})])
    opts = "verify=lambda out, wt: None if (wt / 'ok').exists() else 'no ok file'"
    outcome = start(runs, tmp_path, clock, "h1", opts=opts)
    assert outcome.state == "failed"
    assert outcome.error and outcome.error["code"] == "OUTPUT_INVALID"
    assert "no ok file" in outcome.error["message"]
    assert runs.outputs("h1") == []
    assert "agent-refused" in kinds(runs, "h1")


def test_a_lost_session_starts_fresh_on_the_tree_with_an_event(runs: Runs, tmp_path: Path,
                                                               clock: ManualClock) -> None:
    h = harness("s1", [session(), tool("t1", "e.txt", "E"),
                       {"emit": {"type": "quota", "message": "limit", "reset_at_ms": 1}}],
                [{"emit": {"type": "result", "ok": False, "session_lost": True,
                           "error": "No conversation found with session ID x"}}, {"exit": 1}],
                [session(), answer({"n": 6})])
    assert start(runs, tmp_path, clock, "i1").state == "waiting-quota"
    assert resume_run(runs, "i1", config=config(tmp_path, clock)).state == "finished"
    assert h.seen[1].resume_id == h.seen[0].session_id  # tried to continue it
    # The resumed attempt holds the fresh session it ended with.
    assert attempts(runs, "i1")[-1][4] == h.seen[2].session_id
    assert h.seen[2].resume_id is None and h.seen[2].prompt.startswith("do the work")
    lost = next(e for e in runs.events("i1") if e.kind == "agent-session-lost")
    assert lost.detail and "No conversation found" in lost.detail["reason"]


def test_a_failed_attempts_session_is_never_continued(runs: Runs, tmp_path: Path,
                                                      clock: ManualClock) -> None:
    h = harness("s1", [session(), answer(None, ok=False)], [session(), answer({"n": 8})])
    outcome = start(runs, tmp_path, clock, "j1", opts="retries=1")
    assert outcome.state == "finished", outcome
    assert [a[1] for a in attempts(runs, "j1")] == ["failed", "succeeded"]
    assert h.seen[1].resume_id is None


def test_a_cancelled_attempts_session_is_never_continued(runs: Runs, tmp_path: Path,
                                                         clock: ManualClock) -> None:
    h = harness("s1", [session(), {"hang": True}], [session(), answer({"n": 9})])
    done: list[RunOutcome] = []
    thread = threading.Thread(target=lambda: done.append(start(runs, tmp_path, clock, "k1")))
    thread.start()
    wait_for(lambda: list((tmp_path / "private").glob("k1/*/*/hanging")), timeout=30)
    runs.request("k1", "cancel", live_within_ms=3_600_000)
    thread.join(30)
    assert done and done[0].state == "cancelled"
    private = next((tmp_path / "private" / "k1").glob("*/*"))
    assert gone(int((private / "pid").read_text()))
    assert json.loads(attempts(runs, "k1")[0][2])["code"] == "RUN_CANCELLED"
    assert resume_run(runs, "k1", config=config(tmp_path, clock)).state == "finished"
    assert h.seen[1].resume_id is None


def test_a_harness_that_was_not_blocked_keeps_the_chain_order(runs: Runs, tmp_path: Path,
                                                              clock: ManualClock) -> None:
    assert agentkit.AGENT.is_file()
    harness("s1", [session(), answer({"n": 1})])
    harness("s2", [session(), answer({"n": 2})])
    assert start(runs, tmp_path, clock, "l1", chain=("s1", "s2")).state == "finished"
    assert len(HARNESSES["s2"].seen) == 0 and runs.outputs("l1")[0]["output"] == {"n": 1}


ENGINE = """
import sys
from pathlib import Path
from durability.runs.agent import AgentConfig, register_harness
from durability.runs.execute import EngineConfig, start_run
from durability.runs.run_rows import Runs
from tests.durability.runs.agentkit import Scripted

register_harness("s1", lambda: Scripted(name="s1", programs=[[
    {"session": True}, {"child": True}, {"child": "detached"}, {"hang": True}]]))
tmp = Path(sys.argv[1])
with Runs(tmp / "engine.db") as runs:
    start_run(runs, Path(sys.argv[2]), run_id="m1", worktree=str(tmp / "wt"),
              config=EngineConfig(agents=AgentConfig(private_root=tmp / "private",
                                                     grace_s=0.5)))
"""


def test_kill_9_of_the_engine_leaves_no_agent_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "wt").mkdir()
    path = workflow(tmp_path)
    root = Path(__file__).resolve().parents[3]
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, str(tmp_path), str(path)],
                              cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        hanging = wait_for(lambda: list((tmp_path / "private").glob("m1/*/*/hanging")),
                           timeout=60)
        private = hanging[0].parent
        wait_for(lambda: (private / "detached.pid").exists(), timeout=10)
        agent, child, detached = (int((private / n).read_text())
                                  for n in ("pid", "child.pid", "detached.pid"))
        assert not gone(agent) and not gone(child) and not gone(detached)
        engine.kill()  # SIGKILL: no finally, no atexit
        engine.wait(10)
        # The group, and the descendant in a session of its own.
        wait_for(lambda: gone(agent) and gone(child) and gone(detached), timeout=20)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()


def test_a_worker_that_lost_the_run_kills_only_its_own_agent_and_records_nothing(
        runs: Runs, tmp_path: Path, clock: ManualClock) -> None:
    from durability.ground.store_errors import ClaimLost
    from durability.runs.fence import Owner

    harness("s1", [session(), {"hang": True}])
    done: list[RunOutcome | BaseException] = []

    def go() -> None:
        try:
            done.append(start(runs, tmp_path, clock, "n1"))
        except BaseException as exc:
            done.append(exc)

    thread = threading.Thread(target=go)
    thread.start()
    wait_for(lambda: list((tmp_path / "private").glob("n1/*/*/hanging")), timeout=30)
    private = next((tmp_path / "private" / "n1").glob("*/*"))
    row = runs.get_run("n1")
    other = Owner("other-worker", os.getpid(), "elsewhere")
    assert runs.claim("n1", expected_epoch=row.claim_epoch, owner=other) is not None
    taken = max(e.id for e in runs.events("n1"))
    thread.join(30)
    assert len(done) == 1 and isinstance(done[0], ClaimLost)
    assert gone(int((private / "pid").read_text()))  # its own agent: killed
    after = [e.kind for e in runs.events("n1") if e.id > taken]
    assert after == [], after  # not a word about the agent it no longer owns
    assert attempts(runs, "n1")[0][1] == "running"  # left for the new owner to judge


def test_a_turn_is_one_model_response() -> None:
    from durability.agents.protocol import Event, Usage
    from durability.runs.agent import _Spent

    line = {"type": "stream_event"}
    assert _Spent.turn(Event("usage", usage=Usage("m", 10, 1), raw=line)) == 1  # its start
    assert _Spent.turn(Event("usage", usage=Usage("m", 0, 40), raw=line)) == 0  # its end
    assert _Spent.turn(Event("usage", usage=Usage("m", 0, 0, 900), raw=line)) == 1  # cached
    assert _Spent.turn(Event("usage", usage=Usage("m", 10, 1))) == 0  # an end-of-run remainder
