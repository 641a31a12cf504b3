"""The MCP tool ``agent_run`` (durability/mcp/tools.py): ``durability agent
run``'s twin.  The run is recorded as a one-task agent run in the served
worktree and handed to a worker of its own, so the call answers at once;
bad input is refused before anything is recorded.

The worker here finds no agent CLI on its PATH (no network, no real model:
the real harnesses are driven end to end in tests/e2e/test_agent_claude.py),
so the run it drives ends ``AGENT_UNAVAILABLE``: that it got that far shows
the hand-over reached the agent task."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from durability.config import Settings
from durability.mcp.stdio import call
from durability.mcp.tools import Here, tools
from durability.runs.run_rows import Runs
from tests.helpers import make_git_repo


def _call(here: Here, arguments: dict[str, object]) -> dict[str, Any]:
    done = anyio.run(call, here, tools(here)["agent_run"], arguments)
    assert isinstance(done.structured_content, dict)
    return {"is_error": done.is_error, **done.structured_content}


def _settled(settings: Settings, run_id: str, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        with Runs(settings.database) as r:
            row = r.get_run(run_id)
        if row.state not in ("running", "pending"):
            return row
        assert time.monotonic() < deadline, f"run {run_id} still {row.state}"
        time.sleep(0.2)


def test_an_agent_run_is_recorded_and_handed_to_a_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_git_repo(tmp_path / "repo")
    # The worker's PATH: the interpreter's folder only, so no agent CLI is found.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    settings = Settings.from_env()
    here = Here(settings=settings, cwd=repo)
    answer = _call(here, {"prompt": "fix the test", "run_id": "agent-1",
                          "harness": ["claude", "codex"], "max_cost": 1.5})
    assert answer["is_error"] is False, answer
    assert answer["run_id"] == "agent-1" and answer["state"] == "running"
    spec = (settings.state_dir / "agent-runs" / "agent-1.py").read_text()
    assert "fix the test" in spec and "codex" in spec
    row = _settled(settings, "agent-1")
    assert row.worktree == str(repo.resolve())
    assert row.state == "failed", row
    assert "AGENT_UNAVAILABLE" in (row.error_json or ""), row
    # The same run id again is that run, nothing done.
    again = _call(here, {"prompt": "something else", "run_id": "agent-1"})
    assert again["is_error"] is False and again["existing"] is True, again
    assert "fix the test" in (settings.state_dir / "agent-runs" / "agent-1.py").read_text()


@pytest.mark.parametrize("arguments, code", [
    ({"prompt": ""}, "invalid-value"),
    ({"prompt": "x", "harness": ["claude", "claude"]}, "invalid-value"),
    ({"prompt": "x", "harness": ["aider"]}, "invalid-value"),
    ({"prompt": "x", "run_id": "../etc"}, "invalid-value"),
    ({"prompt": "x", "max_cost": -1}, "invalid-value"),
])
def test_bad_input_is_refused_and_nothing_recorded(
        tmp_path: Path, arguments: dict[str, object], code: str) -> None:
    repo = make_git_repo(tmp_path / "repo")
    settings = Settings.from_env()
    here = Here(settings=settings, cwd=repo)
    answer = _call(here, arguments)
    assert answer["is_error"] is True, answer
    assert answer["error"]["code"] == code, answer
    assert not (settings.state_dir / "agent-runs").exists() or not any(
        (settings.state_dir / "agent-runs").iterdir())


def test_another_worktree_is_refused(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    other = make_git_repo(tmp_path / "other")
    here = Here(settings=Settings.from_env(), cwd=repo)
    answer = _call(here, {"prompt": "x", "worktree": str(other)})
    assert answer["is_error"] is True
    assert answer["error"]["code"] == "invalid-value", answer
    assert "--any-worktree" in answer["error"]["message"]
