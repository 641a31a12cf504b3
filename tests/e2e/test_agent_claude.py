"""End to end: ``durability agent run`` with the real pinned Claude Code,
offline against the loopback stand-in of its API, in a real jj repository.

A multi-call task ends with its structured answer validated and recorded,
every call a checkpoint of the attempt naming the call and the session.
``kill -9`` of the engine mid-session leaves no agent process; ``durability
resume`` puts the tree back to the last completed call's checkpoint (the
unfinished call's file is gone), continues the same session (the stand-in's
first request of the resumed process carries the earlier tool results and
the continuation prompt), and no completed call runs twice.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.runs.agent import CONTINUE_PROMPT
from durability.runs.run_rows import Runs
from durability.store.store import Store
from tests.e2e.fake_anthropic import FakeAnthropic, Script, results_in
from tests.e2e.test_claude_code import BARE_PATH, CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import durability_exe, jj, make_jj_repo, wait_for

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "required": ["files"], "properties": {"files": {"type": "integer"}},
          "additionalProperties": False}


def bash(command: str) -> tuple[str, dict[str, Any]]:
    return "Bash", {"command": command, "description": "step"}


def jj_repo(path: Path) -> Path:
    repo = make_jj_repo(path).resolve()
    (repo / "README.md").write_text("hello\n")
    jj(repo, "commit", "-m", "init")
    return repo


def engine_env(base_url: str) -> dict[str, str]:
    env = claude_env(base_url)
    env["PATH"] = f"{Path(claude_exe()).parent}:{BARE_PATH}"
    return env


def agent_procs(repo: Path) -> list[int]:
    """Processes working in ``repo`` (the agent and anything it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") == str(repo):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_agent_run_finishes_a_multi_call_task_with_a_valid_answer(tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    calls = (("Write", {"file_path": str(repo / "a.txt"), "content": "one\n"}),
             bash("echo two > b.txt"), bash("echo ran >> log.txt"))

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        return calls[len(results)] if len(results) < len(calls) else None

    script = Script(plan=plan, structured={"files": 3},
                    usage={"input_tokens": 1000, "output_tokens": 50})
    with FakeAnthropic(script) as fake:
        done = subprocess.run([durability_exe(), "agent", "run", "Make a.txt, b.txt, log.txt",
                               "--worktree", str(repo), "--run-id", "e1", "--output-schema",
                               str(schema), "--max-cost", "5", "--json"],
                              env=engine_env(fake.base_url), capture_output=True, text=True,
                              timeout=CLAUDE_TIMEOUT_S * 2)
        responses = len(fake.main_requests())
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["state"] == "finished"
    settings = Settings.from_env()
    with Runs(settings.database) as runs:
        assert runs.outputs("e1")[0]["output"] == {"files": 3}
        [(harness, session)] = runs._read(
            "SELECT harness, session_id FROM attempts WHERE run_id=$1", ("e1",))
        assert harness == "claude" and session
        used = runs.usage("e1")
        assert used.tokens >= 4 * 1000 and used.cost > 0  # priced by the table
        assert used.turns == responses  # one per model response of the conversation
    named = {c.tool_use_id: c for c in Store(settings.database).checkpoints("e1")
             if c.tool_use_id}
    assert len(named) == 3 and {c.session_id for c in named.values()} == {session}
    assert {c.attempt for c in named.values()} == {1}
    assert (repo / "log.txt").read_text() == "ran\n"


def test_kill_9_mid_session_then_resume_continues_it_on_the_last_completed_call(
        tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    phase: dict[str, Any] = {"resumed": False}
    first = (bash("echo one >> log.txt"), bash("echo two >> log.txt"),
             bash("echo partial > partial.txt; sleep 600"))

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        n = len(results)
        if not phase["resumed"]:
            return first[n] if n < len(first) else None
        # The continued conversation: one more call (however the interrupted
        # third one appears in its history), then the end.
        at = phase.setdefault("three_at", n)
        return bash("echo three >> log.txt") if n == at else None

    script = Script(plan=plan, final_text="All done.")
    with FakeAnthropic(script) as fake:
        env = engine_env(fake.base_url)
        engine = subprocess.Popen([durability_exe(), "agent", "run", "Write the log",
                                   "--worktree", str(repo), "--run-id", "k1"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: (repo / "partial.txt").exists(), timeout=CLAUDE_TIMEOUT_S)
            settings = Settings.from_env()
            with Runs(settings.database) as runs:
                wait_for(lambda: len(runs._read("SELECT tool_use_id FROM agent_calls WHERE "
                                                "run_id=$1", ("k1",))) == 2, timeout=30)
                completed = [r[0] for r in runs._read(
                    "SELECT tool_use_id FROM agent_calls WHERE run_id=$1 "
                    "ORDER BY completed_at_ms", ("k1",))]
            assert agent_procs(repo), "the agent should be running its third call"
            time.sleep(1.5)  # the watch captures partial.txt
            engine.kill()
            engine.wait(10)
            # The watchdog's work: Claude Code and the tool shell it runs in a
            # session of its own (the `sleep 600`).
            wait_for(lambda: not agent_procs(repo), timeout=20)
        finally:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
        assert (repo / "partial.txt").exists()
        before = len(fake.main_requests())
        phase["resumed"] = True
        done = subprocess.run([durability_exe(), "resume", "k1", "--json"], env=env,
                              capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S * 2)
        resumed = fake.main_requests()[before:]
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["state"] == "finished"
    # The resumed conversation carries the completed calls' results and the
    # continuation prompt.
    carried = [r["tool_use_id"] for r in results_in(resumed[0].body)]
    assert carried[:2] == completed, (carried, completed)
    assert CONTINUE_PROMPT[:40] in json.dumps(resumed[0].body["messages"])
    # No completed call ran twice; the unfinished call's file was undone.
    assert (repo / "log.txt").read_text() == "one\ntwo\nthree\n"
    assert not (repo / "partial.txt").exists()
    with Runs(Settings.from_env().database) as runs:
        restore = next(e.detail for e in runs.events("k1") if e.kind == "restore" and e.detail)
        assert restore["reason"] == f"last completed call {completed[-1]}"
        [cp] = [c for c in Store(Settings.from_env().database).checkpoints("k1")
                if (c.attempt, c.seq) == (restore["to"]["attempt"], restore["to"]["seq"])]
        assert cp.tool_use_id == completed[-1]
        sessions = {r[0] for r in runs._read("SELECT session_id FROM attempts WHERE run_id=$1",
                                             ("k1",))}
        assert len(sessions) == 1  # the same session, continued
