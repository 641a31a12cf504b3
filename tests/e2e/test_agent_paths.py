"""End to end through the engine with the real agent CLIs (issue 23's paths):
``durability agent run`` / ``durability resume`` as installed, the real
Claude Code and Codex against the loopback stand-ins the tests own, in real
jj repositories.

- a usage limit with a reset time on Claude fails over to Codex, whose
  answer is validated; the block is remembered, so a resume before the
  reset does not ask Claude again;
- a cost limit crossed mid-session kills the agent within one usage event:
  ``BUDGET_COST_EXCEEDED`` naming the figures, no agent process left;
- an invalid answer gets one correction turn in the same conversation.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.runs import agent_rows
from durability.runs.agent import CORRECTION_PROMPT, FRESH_NOTE, AgentConfig
from durability.runs.execute import EngineConfig, resume_run, start_run
from durability.runs.fence import Claim
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from durability.runs.supervise import Supervisor
from durability.store.clock import ManualClock
from tests.e2e import fake_openai
from tests.e2e.agent_driver import CODEX, cli_path
from tests.e2e.fake_anthropic import FakeAnthropic, Script, results_in, usage_limit
from tests.e2e.fake_openai import FakeOpenAI
from tests.e2e.test_agent_claude import agent_procs, bash, engine_env, jj_repo
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S
from tests.helpers import durability_exe, wait_for

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "required": ["files"], "properties": {"files": {"type": "integer"}},
          "additionalProperties": False}


def chain_env(tmp_path: Path, anthropic: FakeAnthropic, openai: FakeOpenAI) -> dict[str, str]:
    """Claude Code and Codex both on the agent's PATH, each at its stand-in;
    Claude spends no retries of its own on a 429."""
    env = engine_env(anthropic.base_url)
    codex_home = tmp_path / "codex-home"
    fake_openai.codex_config(codex_home, openai.base_url)
    env |= {"PATH": f"{Path(cli_path(CODEX)).parent}:{env['PATH']}",
            "CODEX_HOME": str(codex_home), fake_openai.API_KEY_ENV: "sk-e2e",
            "CLAUDE_CODE_MAX_RETRIES": "0"}
    return env


def engine(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([durability_exe(), *args], env=env, capture_output=True, text=True,
                          timeout=CLAUDE_TIMEOUT_S * 3)


def events(run_id: str, kind: str) -> list[dict[str, Any]]:
    with Runs(Settings.from_env().database) as runs:
        return [e.detail or {} for e in runs.events(run_id) if e.kind == kind]


def test_a_claude_usage_limit_fails_over_to_codex_which_finishes_the_run(
        tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    reset = time.time() + 3 * 3600
    codex = fake_openai.Script(command="echo one > by-codex.txt",
                               final_text=json.dumps({"files": 1}))
    with FakeAnthropic(Script(fail_always=usage_limit(reset))) as anthropic, \
            FakeOpenAI(codex) as openai:
        done = engine("agent", "run", "Write by-codex.txt", "--worktree", str(repo),
                      "--harness", "claude,codex", "--run-id", "f1", "--output-schema",
                      str(schema), "--json", env=chain_env(tmp_path, anthropic, openai))
        assert anthropic.failed >= 1 and openai.responses()
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["state"] == "finished", done.stdout
    [failover] = events("f1", "agent-failover")
    assert (failover["from"], failover["to"]) == ("claude", "codex")
    with Runs(Settings.from_env().database) as runs:
        assert runs.outputs("f1")[0]["output"] == {"files": 1}
        assert [(b.harness, abs(b.reset_at_ms / 1000 - reset) <= 60)
                for b in agent_rows.blocks(runs, "f1") if b.reset_at_ms] == [("claude", True)]
        # Failing over spent no retry: one attempt, Codex's.
        assert [r[0] for r in runs._read("SELECT harness FROM attempts WHERE run_id=$1",
                                         ("f1",))] == ["codex"]
    assert (repo / "by-codex.txt").read_text() == "one\n"


def test_a_claude_usage_limit_fails_over_to_codex_and_the_block_is_remembered(
        tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    reset = time.time() + 3 * 3600
    claude = Script(fail_always=usage_limit(reset))
    # Codex: its first answer is a server error (the run fails, not a
    # quota), so the run is resumed while Claude's reset is hours away.
    codex = fake_openai.Script(command="echo one > by-codex.txt",
                               final_text=json.dumps({"files": 1}),
                               failures=[fake_openai.Failure(500, {"error": {
                                   "type": "server_error", "message": "boom"}})])
    with FakeAnthropic(claude) as anthropic, FakeOpenAI(codex) as openai:
        env = chain_env(tmp_path, anthropic, openai)
        failed = engine("agent", "run", "Write by-codex.txt", "--worktree", str(repo),
                        "--harness", "claude,codex", "--run-id", "q1", "--output-schema",
                        str(schema), "--json", env=env)
        asked_claude = len(anthropic.main_requests())
        assert failed.returncode != 0, (failed.stdout, failed.stderr)
        assert json.loads(failed.stdout)["state"] == "failed", failed.stdout
        assert asked_claude >= 1 and anthropic.failed == asked_claude
        [failover] = events("q1", "agent-failover")
        assert (failover["from"], failover["to"]) == ("claude", "codex")
        assert abs(failover["reset_at_ms"] / 1000 - reset) <= 60, failover
        done = engine("resume", "q1", "--json", env=env)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert json.loads(done.stdout)["state"] == "finished", done.stdout
        # Claude's reset is hours away: the resume did not ask it again.
        assert len(anthropic.main_requests()) == asked_claude
    with Runs(Settings.from_env().database) as runs:
        assert runs.outputs("q1")[0]["output"] == {"files": 1}
        harnesses = [r[0] for r in runs._read(
            "SELECT harness FROM attempts WHERE run_id=$1 ORDER BY attempt", ("q1",))]
        assert harnesses[-1] == "codex", harnesses
    assert (repo / "by-codex.txt").read_text() == "one\n"


def test_a_cost_limit_crossed_mid_session_kills_claude_within_one_usage_event(
        tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        n = len(results)
        return bash(f"echo {n + 1} >> log.txt") if n < 10 else None

    # 100k input tokens an answer at the table's $5 a million: $0.50 each,
    # so the third answer (1.50) crosses the 1.20 limit.
    script = Script(plan=plan, usage={"input_tokens": 100_000, "output_tokens": 10})
    with FakeAnthropic(script) as fake:
        done = engine("agent", "run", "Write ten lines", "--worktree", str(repo), "--run-id",
                      "c1", "--max-cost", "1.2", "--json", env=engine_env(fake.base_url))
        answered = len(fake.main_requests())
    assert done.returncode != 0, (done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert report["state"] == "failed", report
    assert "BUDGET_COST_EXCEEDED" in json.dumps(report), report
    assert "budget exceeded: cost used 1.5" in json.dumps(report) and "of 1.2" in json.dumps(
        report), report
    # Killed on the third answer's usage: no fourth request, at most its call ran.
    assert answered == 3, answered
    lines = (repo / "log.txt").read_text().splitlines() if (repo / "log.txt").exists() else []
    assert lines in (["1", "2"], ["1", "2", "3"]), lines
    with Runs(Settings.from_env().database) as runs:
        used = runs.usage("c1")
        assert 1.2 < used.cost < 1.51 and used.turns == 3, used
    ended = events("c1", "agent-ended")
    assert ended and ended[-1]["killed"] == "budget", ended[-1]
    assert not agent_procs(repo)


WORKFLOW = '''
from pydantic import BaseModel, field_validator

from durability.runs.workflow import Workflow


class Count(BaseModel):
    files: int

    @field_validator("files")
    @classmethod
    def three(cls, value: int) -> int:
        if value != 3:
            raise ValueError("there are three files")
        return value


workflow = Workflow("count")
workflow.agent("count", prompt="Count the files", output=Count, corrections=1)
'''


class Correcting(Script):
    """Answers ``{"files": 2}`` (valid for the schema, refused by the model's
    validator) until the request carries the engine's correction turn."""

    fake: FakeAnthropic | None = None

    @property
    def structured(self) -> Any:
        last = self.fake.messages()[-1].body if self.fake and self.fake.messages() else {}
        corrected = CORRECTION_PROMPT[:40] in json.dumps(last.get("messages") or [])
        return {"files": 3 if corrected else 2}

    @structured.setter
    def structured(self, value: Any) -> None:
        pass


def test_an_invalid_answer_is_corrected_once_in_the_same_session(tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    flow = tmp_path / "count.py"
    flow.write_text(WORKFLOW)
    script = Correcting(plan=lambda results: None)
    with FakeAnthropic(script) as fake:
        script.fake = fake
        done = engine("run", str(flow), "--worktree", str(repo), "--run-id", "v1", "--json",
                      env=engine_env(fake.base_url))
        main = fake.main_requests()
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["state"] == "finished", done.stdout
    [correction] = events("v1", "agent-correction")
    assert "there are three files" in correction["error"] and correction["left"] == 0
    # The correction turn went to the same conversation: the request that
    # carries it also carries the first answer's StructuredOutput call.
    [turn] = [r for r in main if CORRECTION_PROMPT[:40] in json.dumps(r.body["messages"])]
    assert '"files": 2' in json.dumps(turn.body["messages"]), turn.body["messages"]
    with Runs(Settings.from_env().database) as runs:
        assert runs.outputs("v1")[0]["output"] == {"files": 3}
        sessions = {r[0] for r in runs._read("SELECT session_id FROM attempts WHERE run_id=$1",
                                             ("v1",))}
    assert len(sessions) == 1 and correction["session_id"] in sessions


CHAIN_FLOW = f'''
from durability.runs.workflow import Workflow

workflow = Workflow("chain")
workflow.agent("work", prompt="Write by-claude.txt", harness=("claude", "codex"),
               output={SCHEMA!r})
'''


def test_every_harness_blocked_parks_until_the_earliest_reset_and_supervise_finishes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine in process on a test clock (its blocks, parking and the
    supervisor's wake-up), the real CLIs doing the work."""
    repo = jj_repo(tmp_path / "repo")
    flow = tmp_path / "chain.py"
    flow.write_text(CHAIN_FLOW)
    now = time.time()
    early, late = now + 3600, now + 2 * 3600
    claude = Script(failures=[usage_limit(early)],
                    plan=lambda r: None if r else bash("echo woke > by-claude.txt"),
                    structured={"files": 1})
    codex = fake_openai.Script(failures=[fake_openai.usage_limit(int(late))])
    clock = ManualClock(int(now * 1000))
    config = EngineConfig(heartbeat_s=0.05, clock=clock,
                          agents=AgentConfig(private_root=tmp_path / "private"))
    with FakeAnthropic(claude) as anthropic, FakeOpenAI(codex) as openai:
        for key, value in chain_env(tmp_path, anthropic, openai).items():
            if not key.startswith("DURABILITY_"):
                monkeypatch.setenv(key, value)
        with Runs(Settings.from_env().database, clock=clock) as runs:
            parked = start_run(runs, flow, config=config, run_id="p1", worktree=str(repo))
            assert parked.state == "waiting-quota", parked
            blocks = {b.harness: b.reset_at_ms for b in agent_rows.blocks(runs, "p1")}
            assert set(blocks) == {"claude", "codex"}, blocks
            wake = parked.wake_at_ms
            assert wake is not None and wake == blocks["claude"] == min(
                b for b in blocks.values() if b is not None)
            assert abs(wake / 1000 - early) <= 60, blocks
            asked = (len(anthropic.main_requests()), len(openai.responses()))
            woken: list[RunOutcome] = []

            class Done:
                def poll(self) -> int | None:
                    return 0

            def launch(claim: Claim) -> Done:
                woken.append(resume_run(runs, claim.run_id, config=config, owner=claim.owner,
                                        claim_epoch=claim.epoch))
                return Done()

            sup = Supervisor(runs, supervisor_id="t", launch=launch, stale_after_ms=30_000,
                             clock=clock)
            assert sup.tick() == []
            clock.set(wake - 1_000)
            assert sup.tick() == [] and not woken
            clock.set(wake)
            [claim] = sup.tick()
            assert claim.owner.name == "supervisor:t"
            assert [o.state for o in woken] == ["finished"], woken
            assert runs.outputs("p1")[0]["output"] == {"files": 1}
            # Codex, blocked for another hour, was not asked again.
            assert len(openai.responses()) == asked[1]
            assert len(anthropic.main_requests()) > asked[0]
            assert [b.harness for b in agent_rows.blocks(runs, "p1")] == ["codex"]
    assert (repo / "by-claude.txt").read_text() == "woke\n"


def test_a_lost_session_starts_fresh_on_the_restored_tree_saying_why(tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    phase: dict[str, Any] = {"resumed": False}
    first = (bash("echo one >> log.txt"), bash("echo two >> log.txt"),
             bash("echo partial > partial.txt; sleep 600"))

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        n = len(results)
        if not phase["resumed"]:
            return first[n] if n < len(first) else None
        return bash("echo fresh >> log.txt") if n == 0 else None

    with FakeAnthropic(Script(plan=plan, final_text="All done.")) as fake:
        env = engine_env(fake.base_url)
        proc = subprocess.Popen([durability_exe(), "agent", "run", "Write the log",
                                 "--worktree", str(repo), "--run-id", "l1"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: (repo / "partial.txt").exists(), timeout=CLAUDE_TIMEOUT_S)
            with Runs(Settings.from_env().database) as runs:
                wait_for(lambda: len(runs._read("SELECT tool_use_id FROM agent_calls WHERE "
                                                "run_id=$1", ("l1",))) == 2, timeout=30)
                [(session,)] = runs._read("SELECT session_id FROM attempts WHERE run_id=$1",
                                          ("l1",))
            time.sleep(1.5)  # the watch captures partial.txt
            proc.kill()
            proc.wait(10)
            wait_for(lambda: not agent_procs(repo), timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # The transcript is gone (a cleaned ~/.claude, another machine).
        [transcript] = (Path(env["HOME"]) / ".claude" / "projects").glob(f"*/{session}.jsonl")
        transcript.unlink()
        before = len(fake.main_requests())
        phase["resumed"] = True
        done = engine("resume", "l1", "--json", env=env)
        resumed = fake.main_requests()[before:]
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["state"] == "finished", done.stdout
    [lost] = events("l1", "agent-session-lost")
    assert lost["session_id"] == session and lost["reason"], lost
    # A fresh conversation: none of the earlier results, the note on the tree.
    assert not results_in(resumed[0].body)
    assert FRESH_NOTE.strip()[:40] in json.dumps(resumed[0].body["messages"])
    # On the tree of the last completed call: the unfinished call undone.
    assert not (repo / "partial.txt").exists()
    assert (repo / "log.txt").read_text() == "one\ntwo\nfresh\n"
    # The work was finished by a new session.
    last = events("l1", "agent-ended")[-1]
    assert last["exit"] == 0 and last["session_id"] not in (None, session), last
