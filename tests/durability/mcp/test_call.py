"""``server.call``, the one place a tool's outcome becomes an MCP answer: a
bug of ours inside a tool is an ``internal-error`` answer, never a raise that
would take the call (or the server) down.  The tools here are stand-ins (the
registry is ours); the real tools are driven through a client in test_server.py."""

from __future__ import annotations

from pathlib import Path

import anyio
from pydantic import BaseModel

from durability.config import Settings
from durability.ground.errors import RestoreError
from durability.mcp import models
from durability.mcp.stdio import call
from durability.mcp.tools import Here, Tool


def _tool(run: object) -> Tool:
    return Tool("t", "a stand-in", models.NoIn, models.RunsOut, run)  # type: ignore[arg-type]


def _call(settings: Settings, tool: Tool, arguments: dict[str, object]) -> dict[str, object]:
    here = Here(settings=settings, cwd=Path.cwd())
    done = anyio.run(call, here, tool, arguments)
    assert isinstance(done.structured_content, dict)
    return {"is_error": done.is_error, **done.structured_content}


def test_a_bug_in_a_tool_is_an_internal_error_answer(settings: Settings) -> None:
    def broken(here: Here, args: BaseModel) -> BaseModel:
        raise KeyError("oops")

    assert _call(settings, _tool(broken), {}) == {
        "is_error": True, "error": {"code": "internal-error",
                                    "message": "t failed unexpectedly; see the server's stderr"}}


def test_a_library_error_keeps_its_code_on_one_printable_line(settings: Settings) -> None:
    def refuses(here: Here, args: BaseModel) -> BaseModel:
        raise RestoreError("in the way:\n  a\x1b[2Jb\n", code="restore-conflict")

    answer = _call(settings, _tool(refuses), {})
    assert answer["error"] == {"code": "restore-conflict", "message": "in the way: | a\\x1b[2Jb"}


def test_arguments_are_checked_before_the_tool_runs(settings: Settings) -> None:
    ran = []

    def records(here: Here, args: BaseModel) -> BaseModel:
        ran.append(args)
        return models.RunsOut(runs=[])

    answer = _call(settings, _tool(records), {"unexpected": 1})
    assert answer["is_error"] is True and answer["error"]["code"] == "invalid-value"  # type: ignore[index]
    assert ran == []
    assert _call(settings, _tool(records), {}) == {"is_error": False, "runs": []}
