"""Inputs the agent can make as large as JSON allows: an integer past
SQLite's 64 bits must be an ``invalid-value`` answer the model can correct,
not an ``internal-error`` (SQLite's OverflowError inside the tool)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from durability.config import Settings
from durability.mcp.stdio import call
from durability.mcp.tools import Here, tools
from tests.helpers import cli, make_git_repo

HUGE = 2**63  # one past SQLite's INTEGER


@pytest.mark.parametrize(("tool", "arguments"), [
    ("show", {"seq": HUGE}),
    ("show", {"attempt": HUGE}),
    ("show", {"iteration": HUGE}),
    ("diff", {"seq": 1, "to_seq": HUGE}),
    ("restore", {"seq": HUGE, "dry_run": True}),
    ("snapshot_now", {"attempt": HUGE}),
])
def test_an_integer_past_64_bits_is_invalid_value(tmp_path: Path, settings: Settings, tool: str,
                                                   arguments: dict[str, object]) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    assert cli("snapshot", str(repo), "--run", "r1", "--node", "session").returncode == 0
    here = Here(settings=settings, cwd=repo)
    done = anyio.run(call, here, tools(here)[tool], arguments)
    assert isinstance(done.structured_content, dict)
    assert done.is_error and done.structured_content["error"]["code"] == "invalid-value", \
        done.structured_content
    assert "less than or equal" in done.structured_content["error"]["message"]
