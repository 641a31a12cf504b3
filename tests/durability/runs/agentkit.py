"""A scripted agent harness for the engine's tests of agent tasks.

The adapter protocol (``durability.agents.protocol``) is the boundary the
engine is written against, so the engine's contracts are tested with a
harness of our own: ``Scripted`` implements the protocol over a small
Python program (``scripted_agent.py``, run as a real process in its own
group) that plays one *program* per invocation: emit stream lines, write
files, run the hook, sleep, hang, start a grandchild, exit.

Stream lines (one JSON object each) and the events they mean::

    {"type": "session", "id": S}                   session
    {"type": "usage", "input": N, "output": N, "model": M, "cost": X}   usage
    {"type": "tool_use", "id": T, "name": NAME}    tool_call
    {"type": "tool_result", "id": T, "name": NAME} tool_result (completed)
    {"type": "quota", "message": M, "reset_at_ms": R}   quota
    {"type": "text", "text": TEXT}                 message
    {"type": "result", "ok": B, "text": T, "structured": V, "cost": X,
     "session_lost": B, "error": E, "turns": N}    result (the verdict)
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.agents.protocol import (
    AgentRequest,
    Event,
    Final,
    QuotaSignal,
    ToolCall,
    Usage,
)

AGENT = Path(__file__).with_name("scripted_agent.py")


@dataclass
class Seen:
    """One invocation as the harness saw it."""

    prompt: str
    resume_id: str | None
    session_id: str | None
    worktree: Path
    max_turns: int | None
    schema: Any
    hook_command: tuple[str, ...]
    hook_env: dict[str, str]


@dataclass
class Scripted:
    """The harness: plays ``programs`` in order, one per invocation (the
    last one again when they run out)."""

    name: str = "scripted"
    executable: str = sys.executable
    programs: list[list[dict[str, Any]]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def prepare(self, request: AgentRequest) -> None:
        with self._lock:
            index = len(self.seen)
            program = self.programs[min(index, len(self.programs) - 1)]
            self.seen.append(Seen(request.prompt, request.resume_id, request.session_id,
                                  request.worktree, request.max_turns, request.output_schema,
                                  request.hook_command, dict(request.hook_env)))
        (request.private_dir / "program.json").write_text(json.dumps({
            "steps": program, "session_id": request.resume_id or request.session_id,
            "hook": list(request.hook_command)}))

    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        return [executable, str(AGENT), str(request.private_dir / "program.json")]

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        return {**base, "SCRIPTED_PRIVATE": str(request.private_dir)}

    def stdin(self, request: AgentRequest) -> bytes | None:
        return request.prompt.encode()

    def parse(self, line: str) -> list[Event]:
        try:
            raw = json.loads(line)
        except ValueError:
            return []
        kind = raw.get("type")
        if kind == "session":
            return [Event("session", session_id=raw["id"], raw=raw)]
        if kind == "usage":
            return [Event("usage", usage=Usage(raw.get("model"), raw.get("input", 0),
                                               raw.get("output", 0), raw.get("cache_read", 0),
                                               raw.get("cache_write", 0), raw.get("cost")),
                          raw=raw)]
        if kind == "tool_use":
            return [Event("tool_call", tool=ToolCall(raw["id"], raw.get("name", "Tool")),
                          raw=raw)]
        if kind == "tool_result":
            return [Event("tool_result", tool=ToolCall(raw["id"], raw.get("name", "Tool"),
                                                       completed=True), raw=raw)]
        if kind == "quota":
            return [Event("quota", quota=QuotaSignal(raw.get("message", "limit"),
                                                     raw.get("reset_at_ms")), raw=raw)]
        if kind == "text":
            return [Event("message", text=raw.get("text"), raw=raw)]
        if kind == "result":
            return [Event("result", session_id=raw.get("session_id"), text=raw.get("text"),
                          raw=raw)]
        return []

    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        session = next((e.session_id for e in reversed(events) if e.session_id), None)
        result = next((e.raw for e in reversed(events) if e.kind == "result"), None)
        quota = next((e.quota for e in events if e.quota is not None), None)
        if result is None:
            return Final(False, session, error=f"no result (exit {returncode}): "
                         f"{stderr_head[:200]}", quota=quota)
        assert result is not None
        return Final(bool(result.get("ok", True)) and returncode == 0, session,
                     text=result.get("text"), structured=result.get("structured"),
                     num_turns=result.get("turns"), reported_cost_usd=result.get("cost"),
                     error=result.get("error"), session_lost=bool(result.get("session_lost")),
                     quota=quota)


def answer(structured: Any = None, *, text: str | None = None, cost: float | None = None,
           ok: bool = True) -> dict[str, Any]:
    """A program step: the final result line."""
    line: dict[str, Any] = {"type": "result", "ok": ok, "structured": structured, "text": text}
    if cost is not None:
        line["cost"] = cost
    return {"emit": line}


def usage(inp: int, out: int, *, model: str = "m1", cost: float | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "usage", "input": inp, "output": out, "model": model}
    if cost is not None:
        line["cost"] = cost
    return {"emit": line}


def session() -> dict[str, Any]:
    """The session line, with the id the engine asked for (or resumes)."""
    return {"session": True}


def tool(call_id: str, path: str | None = None, text: str = "", *,
         hook: bool = False) -> list[dict[str, Any]]:
    """A tool call: announced, a file written, the hook run (optional), its result."""
    steps: list[dict[str, Any]] = [{"emit": {"type": "tool_use", "id": call_id,
                                             "name": "Write"}}]
    if path is not None:
        steps.append({"write": [path, text]})
    if hook:
        steps.append({"hook": call_id, "path": path})
    steps.append({"emit": {"type": "tool_result", "id": call_id, "name": "Write"}})
    return steps
