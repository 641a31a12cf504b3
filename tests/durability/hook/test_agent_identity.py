"""Checkpoint rows carry who made the call: the harness, and a Claude Code
sub-agent's agent_id / agent_type; sessions list the harnesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import ServiceProcess, hook_payload, make_git_repo, run_cli, run_cli_json


def _call(repo: Path, call: str, **extra: str) -> None:
    (repo / f"{call}.txt").write_text(call)
    payload = hook_payload(repo, session_id="sess-agents", tool_use_id=call,
                           file_path=str(repo / f"{call}.txt"), **extra)
    done = run_cli("snapshot-hook", input=json.dumps(payload))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def _check(repo: Path) -> None:
    _call(repo, "main-call")
    _call(repo, "sub-call", agent_id="a1b2c3", agent_type="code-reviewer")
    _call(repo, "odd-call", agent_id="x\x1by", agent_type="t" * 300)
    rows = {r["tool_use_id"]: r for r in run_cli_json("snapshots", "sess-agents")}
    assert {k: (r["harness"], r["agent_id"], r["agent_type"]) for k, r in rows.items()} == {
        "main-call": ("claude", None, None),
        "sub-call": ("claude", "a1b2c3", "code-reviewer"),
        "odd-call": ("claude", None, None),  # not printable / too long: not kept
    }
    # Each row names the session its call came from (migration 0016).
    assert {r["session_id"] for r in rows.values()} == {"sess-agents"}
    table = run_cli("snapshots", "sess-agents").stdout
    assert "[code-reviewer] Write sub-call.txt" in table
    [session] = run_cli_json("sessions")
    assert session["harnesses"] == "claude"


def test_in_process(tmp_path: Path) -> None:
    _check(make_git_repo(tmp_path / "repo"))


def test_through_the_service(tmp_path: Path, service_process: ServiceProcess) -> None:
    assert os.environ["DURABILITY_SOCKET"] == str(service_process.socket_path)
    _check(make_git_repo(tmp_path / "repo"))


@pytest.mark.parametrize("bad", [{"harness": "other"}, {"agent_id": "x" * 201}])
def test_the_wire_refuses_a_bad_identity(bad: dict[str, str]) -> None:
    from durability.ground.errors import ProtocolError
    from durability.service import protocol

    line = json.dumps({"v": 1, "op": "capture", "request_id": "r1", "run_id": "r",
                       "node_id": "n", "worktree": "/tmp", "source": "hook", **bad}).encode()
    with pytest.raises(ProtocolError):
        protocol.parse_request(line)
