"""The MCP twins of the run commands, ``run``, ``resume``, ``pause``,
``cancel`` and ``fork`` (and ``approve`` with ``--allow-approve``), through
the SDK's stdio client against the installed ``durability mcp``, on a real
jj repository: each run is driven by a detached worker process, so a call
answers while the run's task is still at work, and the CLI reads the same
state afterwards."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from durability.runs.run_rows import PARKED
from tests.durability.mcp.test_server import Mcp, serve
from tests.helpers import cli, cli_json, make_jj_repo

#: A run whose first task waits for the test's go-ahead file (outside the
#: worktree: a resumed attempt restores the tree), so the test can act while
#: it is at work; the second is gated.
FLOW = """\
from __future__ import annotations

import time
from pathlib import Path

from durability.runs.workflow import Workflow

workflow = Workflow("mcp-flow")
SIGNALS = SIGNALS_DIR


@workflow.task()
def first(ctx):
    Path(SIGNALS, "started").write_text("started\\n")
    go = Path(SIGNALS, "go")
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        ctx.check()  # a cancel stops the task here
        time.sleep(0.05)
    Path(ctx.worktree, "done.txt").write_text("done\\n")
    return {"n": 1}


@workflow.task(deps=["first"], approval=True)
def gate(ctx):
    return {"gate": "passed"}
"""


def _flow(signals: Path) -> str:
    return FLOW.replace("SIGNALS_DIR", repr(str(signals)))


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The repository, its workflow, and the folder of the task's signals."""
    repo = make_jj_repo(tmp_path / "repo").resolve()
    (repo / "README.md").write_text("hello\n")
    signals = tmp_path / "signals"
    signals.mkdir()
    flow = repo / "flow.py"
    flow.write_text(_flow(signals))
    return repo, flow, signals


async def _parked(mcp: Mcp, run_id: str, timeout_s: float = 90.0) -> dict[str, Any]:
    """The run's status once its worker parked it (a deadline, not a timing
    assertion: a loaded machine only makes it slower)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        status = await mcp.call("run_status", run_id=run_id)
        if status["state"] in PARKED:
            return status
        assert loop.time() < deadline, f"run {run_id} never parked: {status}"
        await asyncio.sleep(0.1)


async def _until(path: Path, timeout_s: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not path.exists():
        assert loop.time() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.05)


def _pid_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.slow  # workers drive real runs: 10-40 s each on this machine
def test_run_answers_at_once_and_a_worker_drives_it_to_the_gate(tmp_path: Path) -> None:
    repo, flow, signals = _project(tmp_path)
    seen: dict[str, Any] = {}

    async def body(mcp: Mcp) -> None:
        started = await mcp.call("run", workflow="flow.py", run_id="m1")
        seen["started"] = started
        assert (started["run_id"], started["state"], started["existing"]) == (
            "m1", "running", False)
        worker = started["worker"]
        assert worker["pid"] != os.getpid() and worker["epoch"] >= 1
        assert worker["owner"].startswith("mcp:")
        # The task is at work and waits for us: the server still answers.
        await _until(signals / "started")
        status = await mcp.call("run_status", run_id="m1")
        assert status["state"] == "running" and status["owner"] == worker["owner"]
        assert (await mcp.call("runs"))["runs"][0]["run_id"] == "m1"
        # A second start of the same run id is the run as it is: nothing done.
        again = await mcp.call("run", workflow=str(flow), run_id="m1")
        assert (again["existing"], again["worker"], again["state"]) == (True, None, "running")
        (signals / "go").write_text("go\n")
        parked = await _parked(mcp, "m1")
        assert (parked["state"], parked["waiting_on"]) == ("waiting-approval", "gate")
        # Gates are a person's: approve is not served without --allow-approve.
        names = {t.name for t in (await mcp.session.list_tools()).tools}
        assert {"run", "resume", "pause", "cancel", "fork"} <= names
        assert "approve" not in names
        events = (await mcp.call("logs", run_id="m1", limit=1000))["events"]
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "run-started" and "run-parked" in kinds
        seen["events"] = events

    serve(repo, body)
    assert (repo / "done.txt").read_text() == "done\n"
    # The CLI reads the state the worker left, event for event.
    assert cli_json("run-status", "m1")["state"] == "waiting-approval"
    logged = [json.loads(line) for line in cli("logs", "m1", "--json").stdout.splitlines()]
    assert logged[:len(seen["events"])] == seen["events"]
    worker = seen["started"]["worker"]
    log = Path(worker["log"])
    assert log.name == "m1.log" and log.is_file()
    assert (log.stat().st_mode & 0o077) == 0 or (log.parent.stat().st_mode & 0o077) == 0
    assert _pid_gone(worker["pid"]), "the worker outlived the run it drove"


@pytest.mark.slow  # workers drive real runs: 10-40 s each on this machine
def test_approve_resume_pause_cancel_and_fork_through_the_server(tmp_path: Path) -> None:
    repo, _, signals = _project(tmp_path)
    (signals / "go").write_text("go\n")  # the first task finishes at once

    async def body(mcp: Mcp) -> None:
        await mcp.call("run", workflow="flow.py", run_id="m2")
        assert (await _parked(mcp, "m2"))["state"] == "waiting-approval"
        # A parked run is paused and cancelled at once (nobody works on it).
        assert await mcp.call("pause", run_id="m2") == {
            "run_id": "m2", "request": "pause", "outcome": "paused"}
        decided = await mcp.call("approve", run_id="m2", node_id="gate")
        assert decided["decision"] == "approved"
        resumed = await mcp.call("resume", run_id="m2")
        assert resumed["state"] == "running" and resumed["worker"]["epoch"] > 1
        done = await _parked(mcp, "m2")
        assert done["state"] == "finished", done
        assert await mcp.error("cancel", run_id="m2") == "RUN_NOT_ACTIVE"
        assert await mcp.error("pause", run_id="m2") == "RUN_NOT_ACTIVE"

        # A live run is asked, and its owner acts on it within a heartbeat.
        for gone in (signals / "go", signals / "started", repo / "done.txt"):
            gone.unlink(missing_ok=True)
        await mcp.call("run", workflow="flow.py", run_id="m3")
        await _until(signals / "started")
        asked = await mcp.call("cancel", run_id="m3")
        assert asked == {"run_id": "m3", "request": "cancel", "outcome": "requested"}
        assert (await _parked(mcp, "m3"))["state"] == "cancelled"
        assert not (repo / "done.txt").exists()  # the task was stopped, not finished
        # Resuming the cancelled run finishes what was left (up to the gate).
        (signals / "go").write_text("go\n")
        await mcp.call("resume", run_id="m3")
        assert (await _parked(mcp, "m3"))["state"] == "waiting-approval"

        # Fork m2 at its first task into a new run: the task runs again there.
        forked = await mcp.call("fork", run_id="m2", node_id="first", new_run_id="m2-fork")
        assert (forked["run_id"], forked["state"]) == ("m2-fork", "running")
        status = await _parked(mcp, "m2-fork")
        assert status["state"] == "waiting-approval"
        assert status["forked_from"]["parent_run_id"] == "m2"
        assert await mcp.error("fork", run_id="m2", node_id="first",
                               new_run_id="m2-fork") == "invalid-value"  # taken
        assert await mcp.error("fork", run_id="m2", node_id="nope") == "not-found"

    serve(repo, body, "--allow-approve")
    assert cli_json("run-status", "m2")["state"] == "finished"
    assert cli_json("run-status", "m2-fork")["forked_from"]["node_id"] == "first"


@pytest.mark.slow  # workers drive real runs: 10-40 s each on this machine
def test_refusals_keep_the_commands_codes_and_the_server_lives_on(tmp_path: Path) -> None:
    repo, flow, signals = _project(tmp_path)
    (signals / "go").write_text("go\n")
    other = make_jj_repo(tmp_path / "other").resolve()
    (other / "flow.py").write_text(_flow(signals))
    # Loads in the server: its print must miss the wire, its exit end nothing.
    (repo / "broken.py").write_text("print('noise on stdout')\nraise SystemExit(3)\n")
    (repo / "empty.py").write_text("x = 1\n")
    (repo / "outside.py").symlink_to(other / "flow.py")
    # A run of the other project, started by its own CLI.
    done = cli("run", str(other / "flow.py"), "--run-id", "theirs", "--worktree", str(other))
    assert done.returncode == 0, done.stderr

    async def body(mcp: Mcp) -> None:
        # Inputs from outside: checked before anything runs.
        assert await mcp.error("run", workflow="flow.py", run_id="../x") == "invalid-value"
        assert await mcp.error("run", workflow="flow.py", max_turns=-1) == "invalid-value"
        assert await mcp.error("run", workflow="flow.py", max_turns="3") == "invalid-value"
        assert await mcp.error("run", workflow="flow.py", detach=False) == "invalid-value"
        assert await mcp.error("run", workflow="") == "invalid-value"
        assert await mcp.error("run", workflow="nope.py") == "invalid-value"
        # Another project's workflow, directly or through a link, and its worktree.
        assert await mcp.error("run", workflow=str(other / "flow.py")) == "invalid-value"
        assert await mcp.error("run", workflow="outside.py") == "invalid-value"
        assert await mcp.error("run", workflow="flow.py", worktree=str(other)) == "invalid-value"
        # The engine's own refusals, with the commands' codes.
        assert await mcp.error("run", workflow="broken.py") == "WORKFLOW_INVALID"
        assert await mcp.error("run", workflow="empty.py") == "WORKFLOW_INVALID"
        await mcp.call("run", workflow="flow.py", run_id="r1")
        assert await mcp.error("run", workflow="empty.py", run_id="r1") == "invalid-value"
        assert (await _parked(mcp, "r1"))["state"] == "waiting-approval"
        assert await mcp.error("resume", run_id="nope") == "not-found"
        assert await mcp.error("resume", run_id="theirs") == "invalid-value"
        assert await mcp.error("pause", run_id="theirs") == "invalid-value"
        assert await mcp.error("cancel", run_id="theirs") == "invalid-value"
        assert await mcp.error("fork", run_id="theirs", node_id="first") == "invalid-value"
        assert await mcp.error("deny", run_id="theirs", node_id="gate") == "invalid-value"
        # An edited workflow refuses a resume, unless the change is accepted.
        flow.write_text(_flow(signals) + "\n# edited\n")
        assert await mcp.error("resume", run_id="r1") == "RESUME_METADATA_MISMATCH"
        resumed = await mcp.call("resume", run_id="r1", accept_workflow_change=True)
        assert resumed["worker"] is not None
        assert (await _parked(mcp, "r1"))["state"] == "waiting-approval"
        # A run whose owner is at work is not taken from it.
        (signals / "go").unlink()
        (signals / "started").unlink(missing_ok=True)
        await mcp.call("run", workflow="flow.py", run_id="r2")
        await _until(signals / "started")
        assert await mcp.error("resume", run_id="r2") == "RUN_OWNER_ALIVE"
        (signals / "go").write_text("go\n")
        assert (await _parked(mcp, "r2"))["state"] == "waiting-approval"
        # After all that, the server still answers.
        assert (await mcp.call("run_status", run_id="r2"))["run_id"] == "r2"

    serve(repo, body)
    # Nothing was recorded for the refused starts.
    ids = {r["run_id"] for r in cli_json("runs")}
    assert ids == {"theirs", "r1", "r2"}, ids
