"""A scripted stand-in of the Anthropic Messages API on 127.0.0.1, for driving
the real Claude Code CLI offline.

The script is decided by the request's content, not by a turn counter,
because Claude Code sends side requests of its own (titles, quota checks,
summaries) in an order that changes between releases:

- a request whose last user message carries a ``tool_result`` gets the final
  text (the agent saw its tool run and is done);
- a request that offers the ``Bash`` tool gets one ``tool_use`` of it;
- anything else (a side request without tools) gets a short text.

A test that needs several calls gives a ``plan`` instead: a function of the
tool results Claude Code has sent back so far (oldest first) that returns the
next call, or None when the agent is done (the final text).  A request that
offers no tools at all is a side request and gets the short text.

Every request is recorded (path and body) so a test can say what it saw.
Endpoints other than ``POST /v1/messages`` get a harmless empty answer.

More a ``Script`` can say (issue 23: budgets, quota, structured output):

- ``usage``: the tokens each answer reports, a dict (every answer) or a
  function of the answer's number among the *main* requests (1, 2, ...; the
  ones offering tools).  Keys as the Messages API names them:
  ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``; missing keys are 0.  As the real API
  does, ``message_start`` carries them with ``output_tokens`` 1 (a
  placeholder) and the closing ``message_delta`` the real output count.
  Without ``usage`` every answer reports 10 input and 5 output tokens.
- ``failures``: answers given *instead of* a main request's message, first
  in first out, one per request: ``Failure(429, retry_after_s=0)``,
  ``Failure(529)`` (overloaded), or ``usage_limit(reset_at)``: a 429 as the
  API gives it when a usage limit is hit (the unified rate-limit headers with
  the reset, and a message ending in ``resets 9am (Europe/Berlin)`` style
  text; with an API key Claude Code shows only that message, the headers
  count for a claude.ai login).  Claude Code retries a 429 or 529 itself
  (``system/api_retry`` lines, at most ``CLAUDE_CODE_MAX_RETRIES`` times,
  waiting ``retry-after`` but at least about half a second) and, when they
  are spent, ends with a synthetic ``API Error: Request rejected (429) ·
  <message>`` assistant message and an error result.
  ``fail_always``: one ``Failure`` for every main request once ``failures``
  is spent (a quota that never lifts).
- ``say``: a text block before each tool call, in the same message.
- ``structured``: the JSON the agent answers with when the request offers
  Claude Code's ``StructuredOutput`` tool (``--json-schema``): the final
  turn is a call of that tool with this input instead of ``final_text``.

``main_requests()`` lists the main requests (the conversation itself),
``failed`` counts the failures answered.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.e2e.standin import JsonHandler, StandIn

MODEL = "claude-sonnet-4-5"
FINAL_TEXT = "Done: I wrote made-by-claude.txt."
BASH_INPUT = {"command": "echo hello > made-by-claude.txt", "description": "write a file"}


@dataclass
class Recorded:
    method: str
    path: str
    body: Any


#: The next call (tool name, input) given the tool results so far; None: done.
Plan = Callable[[list[dict[str, Any]]], "tuple[str, dict[str, Any]] | None"]
#: Tokens one answer reports, by the Messages API's names.
UsageSpec = dict[str, int] | Callable[[int], dict[str, int]]
STRUCTURED_TOOL = "StructuredOutput"


@dataclass(frozen=True)
class Failure:
    """An error answer in place of a message: ``status`` 429 (rate limited)
    or 529 (overloaded), with ``retry-after`` when given."""

    status: int
    retry_after_s: float | None = None
    message: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def body(self) -> dict[str, Any]:
        kind = "overloaded_error" if self.status == 529 else "rate_limit_error"
        default = "Overloaded" if self.status == 529 else "Number of requests has exceeded " \
            "your rate limit"
        return {"type": "error", "error": {"type": kind, "message": self.message or default}}


def reset_text(reset_at: float, tz_name: str = "UTC") -> str:
    """How Claude Code words a reset time within a day: ``9am (UTC)``, ``9:30pm (UTC)``."""
    from zoneinfo import ZoneInfo

    at = datetime.fromtimestamp(reset_at, ZoneInfo(tz_name))
    hour = at.hour % 12 or 12
    minute = f":{at.minute:02d}" if at.minute else ""
    return f"{hour}{minute}{'am' if at.hour < 12 else 'pm'} ({tz_name})"


def usage_limit(reset_at: float, tz_name: str = "UTC", *, kind: str = "session") -> Failure:
    """The 429 of a usage limit that resets at ``reset_at`` (epoch seconds):
    the unified rate-limit headers the API sends, and a message naming the
    reset the way Claude Code words it."""
    headers = (("anthropic-ratelimit-unified-status", "rejected"),
               ("anthropic-ratelimit-unified-reset", str(int(reset_at))),
               ("anthropic-ratelimit-unified-representative-claim", "five_hour"))
    return Failure(429, message=f"You've hit your {kind} limit · resets "
                   f"{reset_text(reset_at, tz_name)}", headers=headers)


@dataclass
class Script:
    """What the stand-in answers; a test may change it before starting Claude."""

    tool_name: str = "Bash"
    tool_input: dict[str, Any] = field(default_factory=lambda: dict(BASH_INPUT))
    final_text: str = FINAL_TEXT
    plan: Plan | None = None
    usage: UsageSpec | None = None
    failures: list[Failure] = field(default_factory=list)
    fail_always: Failure | None = None
    structured: Any = None
    #: A text block the agent says before each tool call (one message, two
    #: content blocks: Claude Code prints a line per block).
    say: str | None = None


def _last_user_has_tool_result(body: dict[str, Any]) -> bool:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        return isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content)
    return False


def _offers_tool(body: dict[str, Any], name: str) -> bool:
    return any(isinstance(t, dict) and t.get("name") == name for t in body.get("tools") or [])


def results_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of one request's history, oldest first."""
    found: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return found


def _planned(body: dict[str, Any], plan: Plan, final_text: str,
             seq: int) -> tuple[list[dict[str, Any]], str]:
    if not body.get("tools"):
        return [{"type": "text", "text": "ok"}], "end_turn"
    call = plan(results_in(body))
    if call is None:
        return [{"type": "text", "text": final_text}], "end_turn"
    name, tool_input = call
    return [{"type": "tool_use", "id": f"toolu_e2e_{seq:04d}", "name": name,
             "input": tool_input}], "tool_use"


def answer_blocks(body: dict[str, Any], script: Script,
                  seq: int) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason for one Messages request."""
    blocks, stop = _answer_blocks(body, script, seq)
    if script.say is not None and stop == "tool_use":
        blocks = [{"type": "text", "text": script.say}, *blocks]
    if (script.structured is not None and _offers_tool(body, STRUCTURED_TOOL)
            and stop == "end_turn"):
        return [{"type": "tool_use", "id": f"toolu_e2e_{seq:04d}", "name": STRUCTURED_TOOL,
                 "input": script.structured}], "tool_use"
    return blocks, stop


def _answer_blocks(body: dict[str, Any], script: Script,
                   seq: int) -> tuple[list[dict[str, Any]], str]:
    if script.plan is not None:
        return _planned(body, script.plan, script.final_text, seq)
    if _last_user_has_tool_result(body):
        return [{"type": "text", "text": script.final_text}], "end_turn"
    if _offers_tool(body, script.tool_name):
        return [{"type": "tool_use", "id": f"toolu_e2e_{seq:04d}", "name": script.tool_name,
                 "input": script.tool_input}], "tool_use"
    return [{"type": "text", "text": "ok"}], "end_turn"


USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
              "cache_read_input_tokens")


def _usage(spec: UsageSpec | None = None, number: int = 0) -> dict[str, int]:
    if spec is None:
        return {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0}
    given = spec(number) if callable(spec) else spec
    return {key: int(given.get(key, 0)) for key in USAGE_KEYS}


def sse_events(message_id: str, model: str, blocks: list[dict[str, Any]],
               stop_reason: str,
               usage: dict[str, int] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """The streaming events of one message, in the Messages API's order."""
    usage = usage or _usage()
    # The real API counts output tokens in the closing message_delta (the
    # start carries a placeholder); the default keeps the old 5 and 5.
    start = usage if usage == _usage() else {**usage, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start}}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "tool_use", "id": block["id"],
                                                            "name": block["name"], "input": {}}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(block["input"])}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


#: Each stand-in of a process numbers its ids from its own base, so that a
#: session resumed against a second stand-in never meets a tool_use id its
#: history already holds (the real API never repeats one; Claude Code treats
#: a repeated id as an interrupted call).
_ID_BASES = itertools.count()


class FakeAnthropic(StandIn):
    """The stand-in server, in a daemon thread; use as a context manager.

    Message and tool_use ids are ``msg_e2e_NNNN`` and ``toolu_e2e_NNNN`` with
    NNNN the request's number plus ``id_base`` (default: 0 for a process's
    first stand-in, 10000 for its second, ...)."""

    thread_name = "fake-anthropic"

    def __init__(self, script: Script | None = None, *, id_base: int | None = None) -> None:
        self.script = script or Script()
        self.id_base = next(_ID_BASES) * 10_000 if id_base is None else id_base
        self.requests: list[Recorded] = []
        #: Failures answered so far (``Script.failures`` and ``fail_always``).
        self.failed = 0
        self._main = 0
        super().__init__(_handler_for(self))

    def record(self, method: str, path: str, body: Any) -> int:
        with self._lock:
            self.requests.append(Recorded(method, path, body))
            return len(self.requests)

    def next_main(self) -> tuple[int, Failure | None]:
        """Number the next main request; the failure to answer it with, if any."""
        with self._lock:
            script = self.script
            failure = script.failures.pop(0) if script.failures else script.fail_always
            if failure is not None:
                self.failed += 1
                return self._main, failure
            self._main += 1
            return self._main, None

    def main_requests(self) -> list[Recorded]:
        """The Messages requests of the conversation itself (they offer tools)."""
        return [r for r in self.messages() if r.body.get("tools")]

    def messages(self) -> list[Recorded]:
        """The Messages requests Claude Code made (count_tokens excluded)."""
        with self._lock:
            return [r for r in self.requests
                    if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block Claude Code sent back."""
        found: list[dict[str, Any]] = []
        for r in self.messages():
            for message in r.body.get("messages") or []:
                content = message.get("content")
                if isinstance(content, list):
                    found += [b for b in content
                              if isinstance(b, dict) and b.get("type") == "tool_result"]
        return found


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            fake.record("GET", self.path, None)
            if self.path.split("?")[0] == "/v1/models":
                self._json(200, {"data": [{"type": "model", "id": MODEL,
                                           "display_name": "Stand-in",
                                           "created_at": "2025-01-01T00:00:00Z"}],
                                 "has_more": False, "first_id": MODEL, "last_id": MODEL})
            else:
                self._json(200, {})

        def do_HEAD(self) -> None:
            fake.record("HEAD", self.path, None)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = self._body()
            seq = fake.record("POST", self.path, body)
            path = self.path.split("?")[0]
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": 10})
                return
            if path != "/v1/messages" or not isinstance(body, dict):
                self._json(200, {})
                return
            usage = _usage()
            if body.get("tools"):
                number, failure = fake.next_main()
                if failure is not None:
                    self._fail(failure)
                    return
                usage = _usage(fake.script.usage, number)
            seq += fake.id_base
            blocks, stop = answer_blocks(body, fake.script, seq)
            model = str(body.get("model") or MODEL)
            message_id = f"msg_e2e_{seq:04d}"
            if body.get("stream"):
                self._stream(message_id, model, blocks, stop, usage)
            else:
                self._json(200, {"id": message_id, "type": "message", "role": "assistant",
                                 "model": model, "content": blocks, "stop_reason": stop,
                                 "stop_sequence": None, "usage": usage})

        def _fail(self, failure: Failure) -> None:
            data = json.dumps(failure.body()).encode()
            self.send_response(failure.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if failure.retry_after_s is not None:
                self.send_header("retry-after", f"{failure.retry_after_s:g}")
            for name, value in failure.headers:
                self.send_header(name, value)
            self.send_header("request-id", f"req_e2e_{int(time.time() * 1000)}")
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, message_id: str, model: str, blocks: list[dict[str, Any]],
                    stop: str, usage: dict[str, int]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            # No Content-Length: the stream ends when the connection closes.
            self.send_header("Connection", "close")
            self.end_headers()
            for event, data in sse_events(message_id, model, blocks, stop, usage):
                self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler
