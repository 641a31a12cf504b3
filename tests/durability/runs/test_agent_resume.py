"""``kill -9`` of the engine in the middle of an agent session, then
``durability resume``: the agent's group is gone, the worktree is put back
to the checkpoint of the session's last completed tool call (not to a
newer watch capture of the call that never finished), and the same session
is continued with the continuation prompt (scripted harness; the real
Claude Code's twin is tests/e2e/test_agent_claude.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from durability.config import Settings
from durability.runs.agent import CONTINUE_PROMPT
from durability.runs.run_rows import Runs
from tests.durability.runs.test_agent_task import gone
from tests.helpers import durability_exe, wait_for

ROOT = Path(__file__).resolve().parents[3]

WF = """
from pathlib import Path

from pydantic import BaseModel

from durability.runs.agent import register_harness
from durability.runs.workflow import Workflow
from tests.durability.runs.agentkit import Scripted, answer, session, tool

MARK = Path(__file__).with_name("resumed")
FIRST = [session(), *tool("t1", "a.txt", "A", hook=True), *tool("t2", "b.txt", "B", hook=True),
         {"emit": {"type": "tool_use", "id": "t3", "name": "Write"}},
         {"write": ["c.txt", "C"]}, {"write": ["a.txt", "A3"]}, {"child": True}, {"hang": True}]
SECOND = [{"ls": True}, session(), answer({"n": 1})]


def make():
    return Scripted(name="claude", programs=[SECOND if MARK.exists() else FIRST])


register_harness("claude", make)


class Out(BaseModel):
    n: int


workflow = Workflow("resume-agent")
workflow.agent("work", prompt="write three files", output=Out)
"""


@pytest.mark.slow
def test_kill_9_mid_session_then_resume_continues_the_session_on_the_last_call(
        repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    path = folder / "wf.py"
    path.write_text(WF)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    engine = subprocess.Popen([durability_exe(), "run", str(path), "--worktree", str(repo),
                               "--run-id", "r1"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = Settings.from_env().state_dir
    try:
        hanging = wait_for(lambda: list((state / "agents" / "r1").glob("*/*/hanging")),
                           timeout=90)
        first = hanging[0].parent
        wait_for(lambda: (first / "child.pid").exists(), timeout=10)
        agent, child = (int((first / n).read_text()) for n in ("pid", "child.pid"))
        time.sleep(1.5)  # the watch captures the unfinished call's files
        engine.kill()
        engine.wait(10)
        wait_for(lambda: gone(agent) and gone(child), timeout=20)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    assert (repo / "c.txt").exists()
    (folder / "resumed").write_text("1")
    # The installed command: a resume asked before the run's last claim
    # (this test process) would be a lost race, not a resume.
    done = subprocess.run([durability_exe(), "resume", "r1", "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "finished"
    second = next(p for p in (state / "agents" / "r1").glob("*/*") if "work.0.2" in str(p))
    tree = json.loads((second / "tree.json").read_text())
    assert tree == {"README.md": "hello\n", "a.txt": "A", "b.txt": "B"}
    assert (second / "prompt.txt").read_text() == CONTINUE_PROMPT
    with Runs(Settings.from_env().database) as runs:
        events = runs.events("r1")
        sessions = [e.detail["session_id"] for e in events if e.kind == "agent-session"
                    and e.detail]
        resumed = [e.detail for e in events if e.kind == "agent-resume" and e.detail]
        restore = [e.detail for e in events if e.kind == "restore" and e.detail]
        assert resumed and resumed[0]["session_id"] == sessions[0]
        assert restore and restore[0]["reason"] == "last completed call t2"
        assert runs.outputs("r1")[0]["output"] == {"n": 1}
    # The tool calls that completed ran once: the continued session did not redo them.
    tools = (state / "agents" / "r1" / "tools.log").read_text().split()
    assert tools.count("a.txt") == 2 and tools.count("b.txt") == 1 and tools.count("c.txt") == 1
