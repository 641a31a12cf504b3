"""``durability mcp``: the tools of ``tools.py`` served over stdio with the
official MCP SDK's low-level server (docs/MCP.md).

The low-level server, not ``MCPServer``: every answer is built here, so a
failure reaches the agent as one shape whatever raised it.  A tool that
fails answers ``is_error`` with ``{"error": {"code", "message"}}`` (a stable
code of durability/errors.py, or an engine code) and the text
``durability: <code>: <message>``, as the CLI prints it; arguments that do
not fit the tool's input schema are ``invalid-value`` the same way (the
model can read and correct them, as the protocol asks).  Only a tool name
the server does not have is a protocol error (``INVALID_PARAMS``, with
``data.code`` ``not-found``).  Nothing a call raises stops the server.

stdout is the protocol's: nothing else may write there.  The library logs
to stderr, and every tool runs in a worker thread (SQLite, jj and git block).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from durability import ids
from durability.errors import DurabilityError
from durability.mcp.tools import Here, Tool, tools
from engine import EngineError

__all__ = ["build", "serve"]

log = logging.getLogger("durability.mcp")

_INSTRUCTIONS = (
    "Checkpoints of this worktree: every tool call is captured. `sessions` and `log` find "
    "them, `show` and `diff` read them, `restore` puts files back (a checkpoint of the tree "
    "is taken first; the answer's `undo` reverses it; dry_run=true changes nothing). Run ids "
    "default to the newest session of the worktree the server runs in.")


def build(here: Here) -> Server[Any]:
    """The server, with the tools ``here`` allows."""
    served = tools(here)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_describe(t) for t in served.values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = served.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}",
                           data={"code": "not-found"})
        return await call(here, tool, params.arguments or {})

    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("worktree-durability")
    except PackageNotFoundError:  # run from a source tree
        ours = "0"
    return Server("durability", version=ours, instructions=_INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _describe(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name, description=tool.description,
        input_schema=tool.input.model_json_schema(),
        output_schema=tool.output.model_json_schema(mode="serialization", by_alias=True),
        annotations=types.ToolAnnotations(read_only_hint=tool.read_only,
                                          destructive_hint=not tool.read_only,
                                          open_world_hint=False))


async def call(here: Here, tool: Tool, arguments: dict[str, Any]) -> types.CallToolResult:
    """Run ``tool``: its typed answer, or its error answer; never a raise."""
    try:
        args = tool.input.model_validate(arguments)
    except ValidationError as exc:
        return _error("invalid-value", _invalid(tool, exc))
    try:
        out = await anyio.to_thread.run_sync(tool.run, here, args)
    except (DurabilityError, EngineError) as exc:
        return _error(exc.code, str(exc))
    except Exception:  # a bug of ours: said, logged, and the server goes on
        log.exception("tool %s failed", tool.name)
        return _error("internal-error", f"{tool.name} failed unexpectedly; see the server's "
                      "stderr")
    return _answer(out)


def _answer(out: BaseModel) -> types.CallToolResult:
    data = out.model_dump(mode="json", by_alias=True)
    text = json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text.decode())],
                                structured_content=data)


def _error(code: str, message: str) -> types.CallToolResult:
    line = " | ".join(part.strip() for part in message.splitlines() if part.strip())
    line = ids.printable(line)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"durability: {code}: {line}")],
        structured_content={"error": {"code": code, "message": line}}, is_error=True)


def _invalid(tool: Tool, exc: ValidationError) -> str:
    """Which arguments are wrong and why; never the values (they may be long
    or hold control characters)."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"bad arguments for {tool.name}: " + "; ".join(problems[:10])


def serve(here: Here) -> None:
    """Serve on stdin and stdout until the client closes them."""

    async def main() -> None:
        server = build(here)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
