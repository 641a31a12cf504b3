"""A scripted stand-in of the OpenAI Responses API on 127.0.0.1, for driving
the real Codex CLI offline.

Codex is pointed at it by a private ``CODEX_HOME/config.toml`` naming a
model provider of its own (``codex_config``): ``base_url`` is this server's
``/v1``, ``wire_api = "responses"``, the key read from an environment
variable.  Codex then sends ``POST /v1/responses`` with ``stream: true`` and
reads Server-Sent Events: ``response.created``, one
``response.output_item.done`` per output item (a ``function_call`` or an
assistant ``message``), and ``response.completed`` carrying the usage.

The script is decided by the request's content, as for the Anthropic
stand-in: a ``plan`` is a function of the tool outputs Codex has sent back
so far (the ``function_call_output`` items of the request's input, oldest
first) returning the next call (tool name, arguments) or None when the agent
is done (the final text).  Without a plan, the first request gets one
``exec_command`` of ``command`` and the one after its output the final text.

``failures`` answers the next requests with an HTTP error instead (a 429
with a ``usage_limit_reached`` body, say), one per request, before the
script goes on.  Every request is recorded (path, headers, body) so a test
can say what conversation Codex sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.e2e.standin import Failure, JsonHandler, Recorded, Recording

#: A model slug the pinned Codex knows (an unknown one makes it warn with an
#: ``error`` item and fall back to default metadata).
MODEL = "gpt-5.5"
FINAL_TEXT = "Done: I wrote made-by-codex.txt."
COMMAND = "echo hello > made-by-codex.txt"
API_KEY_ENV = "FAKE_OPENAI_API_KEY"


#: The next call given the tool outputs so far; None: done.  A call is (tool
#: name, arguments): a dict for a function tool (``exec_command``), the raw
#: text for a freeform tool (``apply_patch``'s patch).
Plan = Callable[[list[dict[str, Any]]], "tuple[str, dict[str, Any] | str] | None"]


def usage_limit(resets_at: int, plan_type: str = "plus") -> Failure:
    """The 429 the ChatGPT backend answers when a plan's usage limit is hit."""
    return Failure(429, {"error": {
        "type": "usage_limit_reached", "message": "The usage limit has been reached",
        "plan_type": plan_type, "resets_at": resets_at}})


def rate_limited(retry_after_s: int = 1) -> Failure:
    """A plain 429 (rate limit, retried by Codex)."""
    return Failure(429, {"error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded",
                                   "message": "Rate limit reached for requests"}},
                   {"Retry-After": str(retry_after_s)})


@dataclass
class Script:
    """What the stand-in answers; a test may change it before starting Codex."""

    command: str = COMMAND
    final_text: str = FINAL_TEXT
    plan: Plan | None = None
    #: Tokens reported by every response.
    input_tokens: int = 100
    cached_input_tokens: int = 20
    output_tokens: int = 7
    #: Answered, one per request, before the script.
    failures: list[Failure] = field(default_factory=list)


def outputs_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``function_call_output`` items of one request's input, oldest first."""
    return [i for i in body.get("input") or []
            if isinstance(i, dict) and i.get("type") in ("function_call_output",
                                                           "custom_tool_call_output")]


def calls_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``function_call`` items of one request's input, oldest first."""
    return [i for i in body.get("input") or []
            if isinstance(i, dict) and i.get("type") in ("function_call", "custom_tool_call")]


def user_texts(body: dict[str, Any]) -> list[str]:
    """The user messages' texts (the environment context included)."""
    found: list[str] = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" \
                and item.get("role") == "user":
            found += [c.get("text", "") for c in item.get("content") or []
                      if isinstance(c, dict)]
    return found


def add_file_patch(path: str, text: str) -> str:
    """An ``apply_patch`` patch adding ``path`` with ``text`` (lines)."""
    body = "".join(f"+{line}\n" for line in text.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def _default_plan(command: str) -> Plan:
    def plan(outputs: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | str] | None:
        return None if outputs else ("exec_command", {"cmd": command})
    return plan


def answer_items(body: dict[str, Any], script: Script, seq: int) -> list[dict[str, Any]]:
    """The output items of one Responses request."""
    plan = script.plan or _default_plan(script.command)
    if not body.get("tools"):  # a side request (a title, a summary)
        return [_message(f"msg_e2e_{seq:04d}", "ok")]
    call = plan(outputs_in(body))
    if call is None:
        return [_message(f"msg_e2e_{seq:04d}", script.final_text)]
    name, arguments = call
    if isinstance(arguments, str):
        return [{"type": "custom_tool_call", "id": f"ctc_e2e_{seq:04d}", "status": "completed",
                 "call_id": f"call_e2e_{seq:04d}", "name": name, "input": arguments}]
    return [{"type": "function_call", "id": f"fc_e2e_{seq:04d}", "call_id": f"call_e2e_{seq:04d}",
             "name": name, "arguments": json.dumps(arguments)}]


def _message(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def sse_events(response_id: str, model: str, items: list[dict[str, Any]],
               script: Script) -> Iterator[dict[str, Any]]:
    """The streaming events of one response, in the Responses API's order."""
    yield {"type": "response.created", "response": {"id": response_id, "model": model,
                                                    "status": "in_progress", "output": []}}
    for index, item in enumerate(items):
        yield {"type": "response.output_item.added", "output_index": index, "item": item}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield {"type": "response.output_text.delta", "item_id": item["id"],
                   "output_index": index, "content_index": 0, "delta": text}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": {
        "id": response_id, "model": model, "status": "completed", "output": items,
        "usage": {"input_tokens": script.input_tokens,
                  "input_tokens_details": {"cached_tokens": script.cached_input_tokens},
                  "output_tokens": script.output_tokens,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": script.input_tokens + script.output_tokens}}}


def codex_config(codex_home: Path, base_url: str, *, model: str = MODEL,
                 retries: int = 0, extra: str = "") -> Path:
    """A private ``config.toml`` pointing Codex at the stand-in (``base_url``
    is the server's root; Codex appends ``/responses`` to the provider's)."""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    path.write_text(
        f'model = "{model}"\n'
        'model_provider = "standin"\n'
        'check_for_update_on_startup = false\n'
        '[analytics]\nenabled = false\n'
        '[model_providers.standin]\n'
        'name = "loopback stand-in"\n'
        f'base_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n'
        f'env_key = "{API_KEY_ENV}"\n'
        f'request_max_retries = {retries}\n'
        f'stream_max_retries = {retries}\n'
        + extra)
    return path


class FakeOpenAI(Recording):
    """The stand-in server, in a daemon thread; use as a context manager."""

    thread_name = "fake-openai"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        super().__init__(_handler_for(self))

    def responses(self) -> list[Recorded]:
        """The Responses requests Codex made."""
        with self._lock:
            return [r for r in self.requests
                    if r.method == "POST" and r.path.split("?")[0].endswith("/responses")]

    def tool_outputs(self) -> list[dict[str, Any]]:
        """Every distinct tool output Codex sent back (by call id, first seen)."""
        seen: dict[str, dict[str, Any]] = {}
        for r in self.responses():
            for item in outputs_in(r.body):
                seen.setdefault(str(item.get("call_id")), item)
        return list(seen.values())


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            fake.record("GET", self.path, dict(self.headers), None)
            if self.path.split("?")[0].endswith("/models"):
                self._json(200, {"models": [], "data": []})
            else:
                self._json(200, {})

        def do_POST(self) -> None:
            body = self._body()
            seq = fake.record("POST", self.path, dict(self.headers), body)
            if not self.path.split("?")[0].endswith("/responses") or not isinstance(body, dict):
                self._json(200, {})
                return
            failure = fake.next_failure()
            if failure is not None:
                self._json(failure.status, failure.body, failure.headers)
                return
            items = answer_items(body, fake.script, seq)
            model = str(body.get("model") or MODEL)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in sse_events(f"resp_e2e_{seq:04d}", model, items, fake.script):
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                 .encode())
                self.wfile.flush()
            self.close_connection = True

    return Handler
