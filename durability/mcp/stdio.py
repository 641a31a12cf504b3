"""``durability mcp``: the tools of ``tools.py`` served over stdio with the
official MCP SDK's low-level server (docs/how-to/mcp.md).

The low-level server, not ``MCPServer``: every answer is built here, so a
failure reaches the agent as one shape whatever raised it.  A tool that
fails answers ``is_error`` with ``{"error": {"code", "message"}}`` (a stable
code of durability/ground/errors.py, or an engine code) and the text
``durability: <code>: <message>``, as the CLI prints it; arguments that do
not fit the tool's input schema are ``invalid-value`` the same way (the
model can read and correct them, as the protocol asks).  Only a tool name
the server does not have is a protocol error (``INVALID_PARAMS``, with
``data.code`` ``not-found``).  Nothing a call raises stops the server.

stdout is the protocol's: nothing else may write there.  The library logs
to stderr, and every tool runs in a worker thread (SQLite, jj and git block).

Each request line is checked here before the SDK reads it (``_Lines``): a
line that is not JSON (or not UTF-8) is answered with a JSON-RPC parse error
(-32700, id null); a line longer than ``MAX_LINE_BYTES``, nested deeper than
the parser takes, or valid JSON that is no JSON-RPC message is answered
Invalid Request (-32600, with the request's id when it has one).  The SDK's
own reader would drop such a line without a word.  Either way the server
reads on.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, cast

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ValidationError

from durability.ground import ids
from durability.ground.errors import DurabilityError
from durability.mcp.tools import Here, Tool, tools
from durability.store import EngineError

__all__ = ["MAX_LINE_BYTES", "build", "serve"]

log = logging.getLogger("durability.mcp")

_INSTRUCTIONS = (
    "Checkpoints of this worktree: every tool call is captured. `sessions` and `log` find "
    "them, `show` and `diff` read them, `restore` puts files back (a checkpoint of the tree "
    "is taken first; the answer's `undo` reverses it; dry_run=true changes nothing). Run ids "
    "default to the newest session of the worktree the server runs in. `run`, `resume` and "
    "`fork` hand the run to a worker process and answer at once: follow it with `run_status` "
    "and `logs`, stop it with `pause` or `cancel`.")


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


#: The longest request line read whole.  A tool's arguments are ids, paths
#: and small numbers; a longer line is answered Invalid Request and skipped
#: without being held in memory.
MAX_LINE_BYTES = 4 * 1024 * 1024
_SKIP_CHUNK = 64 * 1024


class _Lines:
    """The request lines of the wire, each checked before the SDK's reader
    parses it (it would drop a bad one without an answer): a bad line is
    answered on the server's write stream and never reaches the SDK."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = wire
        self._write: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write: Any) -> None:
        """The stream the server's answers go out on (known once it runs)."""
        self._write = write
        self._ready.set()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline(MAX_LINE_BYTES + 1)
            if not line:
                raise StopAsyncIteration
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                await self._skip_rest()
                await self._refuse(None, types.INVALID_REQUEST,
                                   f"Invalid Request: a request line longer than "
                                   f"{MAX_LINE_BYTES} bytes (skipped)")
                continue
            if not line.strip():
                continue  # a blank line is no message: nothing to answer
            problem = _problem(line)
            if problem is None:
                return line.decode("utf-8")
            await self._refuse(*problem)

    async def _readline(self, limit: int) -> bytes:
        # In a worker thread, as anyio's wrapped files read (a blocking read).
        return await anyio.to_thread.run_sync(self._wire.readline, limit)

    async def _skip_rest(self) -> None:
        while True:
            part = await self._readline(_SKIP_CHUNK)
            if not part or part.endswith(b"\n"):
                return

    async def _refuse(self, id_: int | str | None, code: int, message: str) -> None:
        log.warning("refused a request line: %s", message)
        await self._ready.wait()
        error = types.JSONRPCError(jsonrpc="2.0", id=id_,
                                   error=types.ErrorData(code=code, message=message))
        try:
            await self._write.send(SessionMessage(error))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the server is stopping: nobody reads the answer


def _problem(line: bytes) -> tuple[int | str | None, int, str] | None:
    """What is wrong with one request line, as (id, code, message); None when
    it is a JSON-RPC message."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, types.PARSE_ERROR, "Parse error: the line is not UTF-8"
    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        invalid = [e for e in errors if e["type"] == "json_invalid"]
        if invalid:
            why = str(invalid[0]["msg"]).removeprefix("Invalid JSON: ")
            if "recursion limit" in why:
                return None, types.INVALID_REQUEST, ("Invalid Request: JSON nested too deep "
                                                     f"({ids.printable(why)})")
            return None, types.PARSE_ERROR, f"Parse error: {ids.printable(why)}"
        return _id_of(text), types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC message"
    return None


def _id_of(text: str) -> int | str | None:
    """The id of a request that is valid JSON (no deeper than the parser
    above took) but no JSON-RPC message, when it names one."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    found = data.get("id") if isinstance(data, dict) else None
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


@contextmanager
def _wire_stdin() -> Iterator[BinaryIO]:
    """fd 0 for the protocol alone: the wire is read from a private
    duplicate while fd 0 reads the null device (so a child or a handler
    reads EOF, never a request), and fd 0 is the wire again afterwards (as
    the SDK's stdio transport does for the stdin it reads itself)."""
    try:
        wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # fd 0 closed: nothing to read but the end
        if sys.stdin is not None:
            yield sys.stdin.buffer
        else:
            with open(os.devnull, "rb") as empty:
                yield empty
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # Never closed: a worker thread may still block on it after the end.
        yield os.fdopen(wire, "rb", buffering=_SKIP_CHUNK, closefd=False)
    finally:
        os.dup2(wire, 0)


def serve(here: Here) -> None:
    """Serve on stdin and stdout until the client closes them."""

    async def main(wire: BinaryIO) -> None:
        server = build(here)
        lines = _Lines(wire)
        async with stdio_server(stdin=cast(Any, lines)) as (read, write):
            lines.answer_on(write)
            await server.run(read, write, server.create_initialization_options())

    # fd 0 is taken before the event loop opens its own descriptors: with
    # fd 0 closed at the start, the loop's would land there and be taken.
    with _wire_stdin() as wire:
        anyio.run(main, wire)
