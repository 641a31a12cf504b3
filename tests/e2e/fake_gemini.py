"""A scripted stand-in of the Gemini API (generativelanguage v1beta) on
127.0.0.1, for driving the real Gemini CLI offline.

Gemini CLI is pointed at it by ``GOOGLE_GEMINI_BASE_URL`` (honoured with
``gemini-api-key`` authentication, and accepted over plain HTTP for
127.0.0.1 only) and ``GEMINI_API_KEY``.  It then sends
``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` and reads
Server-Sent Events, each a ``GenerateContentResponse`` (candidates with
``content.parts``: ``text`` or ``functionCall``; ``usageMetadata``).  Side
requests (``:generateContent``, ``:countTokens``) get short harmless
answers.

The script is decided by the request's content: a ``plan`` is a function of
the ``functionResponse`` parts Gemini CLI has sent back so far (oldest
first) returning the next call (tool name, args) or None when the agent is
done (the final text).  Without a plan, the first request gets one
``run_shell_command`` of ``command`` and the one after its result the final
text.  ``failures`` answers the next streaming requests with an HTTP error
(a 429 ``RESOURCE_EXHAUSTED``), one per request, before the script goes on.
Every request is recorded (path, headers, body).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.e2e.standin import Failure, JsonHandler, Recorded, Recording

MODEL = "gemini-2.5-flash"
FINAL_TEXT = "Done: I wrote made-by-gemini.txt."
COMMAND = "echo hello > made-by-gemini.txt"
API_KEY = "gemini-e2e-dummy-key"


#: The next call (tool name, args) given the function responses so far; None: done.
Plan = Callable[[list[dict[str, Any]]], "tuple[str, dict[str, Any]] | None"]


def resource_exhausted(message: str = "Resource has been exhausted (e.g. check quota).",
                       retry_delay_s: int | None = None, quota_id: str | None = None) -> Failure:
    """The 429 the Gemini API answers for a rate or quota limit."""
    details: list[dict[str, Any]] = []
    if quota_id is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                        "generate_content_free_tier_requests",
                                        "quotaId": quota_id}]})
    if retry_delay_s is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{retry_delay_s}s"})
    return Failure(429, {"error": {"code": 429, "message": message,
                                   "status": "RESOURCE_EXHAUSTED", "details": details}})


@dataclass
class Script:
    command: str = COMMAND
    final_text: str = FINAL_TEXT
    plan: Plan | None = None
    prompt_tokens: int = 120
    cached_tokens: int = 30
    output_tokens: int = 9
    failures: list[Failure] = field(default_factory=list)


def function_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``functionResponse`` parts of one request's contents, oldest first."""
    found: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if isinstance(part, dict) and "functionResponse" in part:
                found.append(part["functionResponse"])
    return found


def function_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if isinstance(part, dict) and "functionCall" in part:
                found.append(part["functionCall"])
    return found


def user_texts(body: dict[str, Any]) -> list[str]:
    return [part["text"] for content in body.get("contents") or []
            if content.get("role") == "user"
            for part in content.get("parts") or [] if isinstance(part, dict) and "text" in part]


def _default_plan(command: str) -> Plan:
    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        return None if results else ("run_shell_command",
                                     {"command": command, "description": "write a file"})
    return plan


def _offers_tools(body: dict[str, Any]) -> bool:
    return any(t.get("functionDeclarations") for t in body.get("tools") or []
               if isinstance(t, dict))


def answer_parts(body: dict[str, Any], script: Script, seq: int) -> list[dict[str, Any]]:
    if not _offers_tools(body):
        return [{"text": "ok"}]
    # Distinct by id: a resumed history sends each functionResponse twice.
    distinct = {str(r.get("id") or i): r for i, r in enumerate(function_responses(body))}
    call = (script.plan or _default_plan(script.command))(list(distinct.values()))
    if call is None:
        return [{"text": script.final_text}]
    name, args = call
    return [{"functionCall": {"id": f"gcall_e2e_{seq:04d}", "name": name, "args": args}}]


def response_chunk(parts: list[dict[str, Any]], script: Script, model: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": script.prompt_tokens,
                          "cachedContentTokenCount": script.cached_tokens,
                          "candidatesTokenCount": script.output_tokens,
                          "totalTokenCount": script.prompt_tokens + script.output_tokens},
        "modelVersion": model,
        "responseId": "resp-e2e",
    }


class FakeGemini(Recording):
    """The stand-in server, in a daemon thread; use as a context manager."""

    thread_name = "fake-gemini"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        super().__init__(_handler_for(self))

    def streams(self) -> list[Recorded]:
        """The streamGenerateContent requests that offered tools (the agent's turns)."""
        with self._lock:
            return [r for r in self.requests if ":streamGenerateContent" in r.path
                    and isinstance(r.body, dict) and _offers_tools(r.body)]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every distinct functionResponse sent back (by id, else name, first seen)."""
        seen: dict[str, dict[str, Any]] = {}
        for r in self.streams():
            for fr in function_responses(r.body):
                seen.setdefault(str(fr.get("id") or fr.get("name")), fr)
        return list(seen.values())


def _handler_for(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            fake.record("GET", self.path, dict(self.headers), None)
            self._json(200, {"models": [{"name": f"models/{MODEL}"}]})

        def do_POST(self) -> None:
            body = self._body()
            seq = fake.record("POST", self.path, dict(self.headers), body)
            path = self.path.split("?")[0]
            model = path.rsplit("/", 1)[-1].split(":")[0] or MODEL
            if path.endswith(":countTokens"):
                self._json(200, {"totalTokens": 10})
                return
            if not isinstance(body, dict):
                self._json(400, {"error": {"code": 400, "message": "bad body"}})
                return
            if path.endswith(":generateContent"):
                # A side request (routing, next-speaker, loop checks): a plain text.
                self._json(200, response_chunk([{"text": "{}"}], fake.script, model))
                return
            if not path.endswith(":streamGenerateContent"):
                self._json(404, {"error": {"code": 404, "message": "not found",
                                           "status": "NOT_FOUND"}})
                return
            if _offers_tools(body):
                failure = fake.next_failure()
                if failure is not None:
                    self._json(failure.status, failure.body, failure.headers)
                    return
            chunk = response_chunk(answer_parts(body, fake.script, seq), fake.script, model)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
