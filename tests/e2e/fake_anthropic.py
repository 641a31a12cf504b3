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
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


@dataclass
class Script:
    """What the stand-in answers; a test may change it before starting Claude."""

    tool_name: str = "Bash"
    tool_input: dict[str, Any] = field(default_factory=lambda: dict(BASH_INPUT))
    final_text: str = FINAL_TEXT
    plan: Plan | None = None


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
    if script.plan is not None:
        return _planned(body, script.plan, script.final_text, seq)
    if _last_user_has_tool_result(body):
        return [{"type": "text", "text": script.final_text}], "end_turn"
    if _offers_tool(body, script.tool_name):
        return [{"type": "tool_use", "id": f"toolu_e2e_{seq:04d}", "name": script.tool_name,
                 "input": script.tool_input}], "tool_use"
    return [{"type": "text", "text": "ok"}], "end_turn"


def _usage() -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def sse_events(message_id: str, model: str, blocks: list[dict[str, Any]],
               stop_reason: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The streaming events of one message, in the Messages API's order."""
    yield "message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": _usage()}}
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
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


class FakeAnthropic:
    """The stand-in server, in a daemon thread; use as a context manager."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # Not daemon threads: closing the server joins every handler, so no
        # thread outlives the test (each is bounded by the handler's timeout).
        self._server.daemon_threads = False
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-anthropic", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def record(self, method: str, path: str, body: Any) -> int:
        with self._lock:
            self.requests.append(Recorded(method, path, body))
            return len(self.requests)

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
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # A wedged client must not hold a server thread for ever.
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest's output clean; the requests are recorded

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else {}
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

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
            blocks, stop = answer_blocks(body, fake.script, seq)
            model = str(body.get("model") or MODEL)
            message_id = f"msg_e2e_{seq:04d}"
            if body.get("stream"):
                self._stream(message_id, model, blocks, stop)
            else:
                self._json(200, {"id": message_id, "type": "message", "role": "assistant",
                                 "model": model, "content": blocks, "stop_reason": stop,
                                 "stop_sequence": None, "usage": _usage()})

        def _stream(self, message_id: str, model: str, blocks: list[dict[str, Any]],
                    stop: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            # No Content-Length: the stream ends when the connection closes.
            self.send_header("Connection", "close")
            self.end_headers()
            for event, data in sse_events(message_id, model, blocks, stop):
                self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler
