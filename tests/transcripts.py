"""Claude Code transcripts shaped as 2.1.197 writes them (the lines
tests/e2e/test_rewind.py reads from the real CLI), for the unit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VERSION = "2.1.197"


def line(kind: str, uuid: str, parent: str | None, content: Any, *, session: str,
         version: str = VERSION, cwd: str = "/w") -> dict[str, Any]:
    role = "assistant" if kind == "assistant" else "user"
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": version, "gitBranch": "", "type": kind,
            "message": {"role": role, "content": content}, "uuid": uuid,
            "timestamp": "2026-12-02T00:00:00.000Z"}


def transcript(path: Path, session: str, calls: list[tuple[str, str]], *,
               version: str = VERSION, cwd: str = "/w") -> Path:
    """A session of ``calls`` (id, tool name), each answered, then a final text."""
    items: list[dict[str, Any]] = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": session,
         "timestamp": "2026-12-02T00:00:00.000Z", "content": "go"},
        line("user", "u0", None, "Edit the project.", session=session, version=version,
             cwd=cwd)]
    parent = "u0"
    for n, (call, tool) in enumerate(calls):
        items.append(line("assistant", f"a{n}", parent,
                          [{"type": "tool_use", "id": call, "name": tool, "input": {}}],
                          session=session, version=version, cwd=cwd))
        items.append(line("user", f"r{n}", f"a{n}",
                          [{"type": "tool_result", "tool_use_id": call, "content": "ok"}],
                          session=session, version=version, cwd=cwd))
        parent = f"r{n}"
    items.append(line("assistant", "end", parent, [{"type": "text", "text": "done"}],
                      session=session, version=version, cwd=cwd))
    items.append({"type": "last-prompt", "lastPrompt": "Edit the project.", "leafUuid": "end",
                  "sessionId": session})
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


CODEX_VERSION = "0.171.0"


def rollout(path: Path, thread: str, calls: list[tuple[str, str]], *,
            version: str = CODEX_VERSION, cwd: str = "/w") -> Path:
    """A Codex rollout shaped as 0.171.0 writes it
    (docs/explanation/session-formats.md): ``calls`` (call id, tool name),
    each with its output, then the agent's message."""
    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-12-02T00:00:00.000Z", "type": kind, "payload": payload}

    items = [line("session_meta", {"id": thread, "cwd": cwd, "cli_version": version,
                                   "model_provider": "openai"}),
             line("event_msg", {"type": "task_started", "turn_id": "t1"}),
             line("turn_context", {"cwd": cwd, "model": "gpt"}),
             line("response_item", {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": "Edit."}]})]
    for call, tool in calls:
        if tool == "apply_patch":
            items.append(line("response_item", {"type": "custom_tool_call", "name": tool,
                                                 "input": "*** Begin Patch", "call_id": call}))
            items.append(line("response_item", {"type": "custom_tool_call_output",
                                                 "call_id": call, "output": "Success."}))
        else:
            items.append(line("response_item", {"type": "function_call", "name": tool,
                                                 "arguments": "{}", "call_id": call}))
            items.append(line("response_item", {"type": "function_call_output",
                                                 "call_id": call, "output": "ok"}))
        items.append(line("event_msg", {"type": "item_completed", "item": {"id": call}}))
        items.append(line("event_msg", {"type": "token_count", "info": None}))
    items.append(line("response_item", {"type": "message", "role": "assistant",
                                        "content": [{"type": "output_text", "text": "done"}]}))
    items.append(line("event_msg", {"type": "task_complete", "turn_id": "t1"}))
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def gemini_chat(path: Path, session: str, calls: list[tuple[str, str]]) -> Path:
    """A Gemini CLI chat file shaped as 0.61.0 writes it
    (docs/explanation/session-formats.md): per call (model id, tool name) a
    model record, the same record again with its toolCalls, and the user
    record of its functionResponse; then a final model text."""
    items: list[dict[str, Any]] = [
        {"sessionId": session, "projectHash": "ab" * 32, "startTime": "2026-12-02T00:00:00Z",
         "lastUpdated": "2026-12-02T00:00:00Z", "kind": "main"},
        {"$set": {"messages": [{"id": "m0", "timestamp": "t", "type": "user",
                                "content": [{"text": "Edit."}]}]}}]
    for n, (gid, tool) in enumerate(calls):
        model = {"id": f"g{n}", "timestamp": "t", "type": "gemini", "content": "",
                 "thoughts": [], "model": "gemini-2.5-pro"}
        items.append(model)
        items.append({**model, "toolCalls": [{"id": f"{tool}__{gid}", "name": tool,
                                              "args": {}, "status": "success",
                                              "result": [{"functionResponse": {
                                                  "id": gid, "name": tool,
                                                  "response": {"output": "ok"}}}]}]})
        items.append({"id": f"u{n}", "timestamp": "t", "type": "user", "content": [
            {"functionResponse": {"id": gid, "name": tool, "response": {"output": "ok"}}}]})
        items.append({"$set": {"lastUpdated": "2026-12-02T00:00:01Z"}})
    items.append({"id": "end", "timestamp": "t", "type": "gemini", "content": "done"})
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path
