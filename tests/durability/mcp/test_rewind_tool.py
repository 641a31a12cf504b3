"""The MCP tool ``rewind`` (durability/mcp/tools.py): the agent rewinds its
own session, in the served worktree only; the answer is ``rewind --json``'s."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from durability.config import Settings
from durability.mcp.stdio import call
from durability.mcp.tools import Here, tools
from tests.durability.rewind.test_rewind import SESSION, _session


def _call(here: Here, arguments: dict[str, object]) -> dict[str, object]:
    done = anyio.run(call, here, tools(here)["rewind"], arguments)
    assert isinstance(done.structured_content, dict)
    return {"is_error": done.is_error, **done.structured_content}


def test_the_agent_rewinds_its_own_session(tmp_path: Path) -> None:
    repo, _ = _session(tmp_path)
    here = Here(settings=Settings.from_env(), cwd=repo)
    seen = _call(here, {"call": "t2", "dry_run": True})  # the newest session of the worktree
    assert seen["is_error"] is False and seen["session"] == SESSION
    assert not (repo / "a.txt").exists()
    done = _call(here, {"seq": 2})
    assert done["is_error"] is False and (repo / "a.txt").read_text() == "a\n"
    conversation = done["conversation"]
    assert isinstance(conversation, dict)
    assert conversation["resume"] == ["claude", "--resume", conversation["session_id"]]
    kept = Path(str(conversation["path"])).read_text().splitlines()
    assert json.loads(kept[-1])["message"]["content"][0]["tool_use_id"] == "t2"
    # The undo: the tree before was checkpoint 2's (the pre-restore capture dedups onto it).
    assert done["code"]["pre_restore"]["seq"] == 2  # type: ignore[index]


def test_another_worktrees_session_is_refused(tmp_path: Path) -> None:
    repo, _ = _session(tmp_path)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    from tests.helpers import make_git_repo

    other = make_git_repo(elsewhere / "repo")
    here = Here(settings=Settings.from_env(), cwd=other)
    answer = _call(here, {"run_id": SESSION, "seq": 2})
    assert answer["is_error"] is True
    assert answer["error"]["code"] == "invalid-value", answer  # type: ignore[index]
    assert not (repo / "a.txt").exists()
