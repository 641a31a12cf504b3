"""Gemini CLI's chat file: ``~/.gemini/tmp/<project>/chats/session-<time>-<short id>.jsonl``
(docs/explanation/session-formats.md).

A header line (``sessionId``, ``projectHash``, ``startTime``,
``lastUpdated``, ``kind``), then message records and ``$set`` patches; later
lines win: ``{"$set": {"messages": [...]}}`` replaces the list, a record with
an ``id`` is upserted into it.  A model message (``type`` ``gemini``) holds
its calls in ``toolCalls`` (``id``: ``<tool name>__<the model's id>``,
``name``, ``args``, ``status``) once they ran; the results follow as a user
message of ``functionResponse`` parts.

The chat file carries no CLI version: the shape is checked instead (the
header's keys, the kinds of record), as Gemini CLI 0.61.0 writes it
(``TESTED``); anything else is refused (``Unsupported``).  Gemini's hook
payloads carry no call id, so a boundary is matched to the chat's completed
calls by position and tool name (``call_at``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.agents.transcripts import Unsupported, json_lines, write_new
from durability.agents.transcripts.claude import Turn

__all__ = ["TESTED", "Cut", "call_at", "completed_calls", "cut", "write_session"]

#: The Gemini CLI version whose chat files were cut and resumed in a test.
TESTED = "0.61.0"
_HEADER = frozenset({"sessionId", "projectHash", "startTime", "lastUpdated", "kind"})
_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Cut:
    source: Path
    session_id: str
    call_id: str
    header: dict[str, Any]
    kept: list[dict[str, Any]]
    dropped: list[Turn]


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the message list the file's lines make."""
    header: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = []
    for n, item in json_lines(path, MAX_BYTES):
        if header is None:
            if not set(item) >= _HEADER:
                raise Unsupported(f"Gemini chat {path} has no header of the shape tested "
                                  f"(gemini {TESTED})")
            header = item
            continue
        if set(item) == {"$set"} and isinstance(item["$set"], dict):
            listed = item["$set"].get("messages")
            if isinstance(listed, list):
                messages = [m for m in listed if isinstance(m, dict)]
            continue
        if isinstance(item.get("id"), str) and item.get("type") in _TYPES:
            at = next((k for k, m in enumerate(messages) if m.get("id") == item["id"]), None)
            if at is None:
                messages.append(item)
            else:
                messages[at] = item
            continue
        raise Unsupported(f"Gemini chat {path} line {n} is of a kind not tested "
                          f"(gemini {TESTED})")
    if header is None:
        raise Unsupported(f"Gemini chat {path} is empty")
    return header, messages


def _calls(m: dict[str, Any]) -> list[dict[str, Any]]:
    calls = m.get("toolCalls") if m.get("type") == "gemini" else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def completed_calls(path: str | os.PathLike[str]) -> list[str]:
    """The chat's tool calls that ran (``status`` success or error), oldest first."""
    _, messages = _read(Path(path))
    return [str(c.get("id")) for m in messages for c in _calls(m)
            if c.get("status") in ("success", "error")]


def call_at(path: str | os.PathLike[str], index: int, tool_name: str | None) -> str:
    """The id of the chat's ``index``-th completed call (from 0), which must
    be a call of ``tool_name``: how a Gemini boundary, which has no id of its
    own, finds its call (its position among the session's boundaries)."""
    _, messages = _read(Path(path))
    done = [c for m in messages for c in _calls(m) if c.get("status") in ("success", "error")]
    if index >= len(done) or (tool_name is not None and done[index].get("name") != tool_name):
        seen = [str(c.get("name")) for c in done]
        raise LookupError(f"the chat {path} does not hold call {index + 1} as {tool_name} "
                          f"(its completed calls: {', '.join(seen) or 'none'})")
    return str(done[index].get("id"))


def _responds(m: dict[str, Any], call: str) -> bool:
    parts = m.get("content") if m.get("type") == "user" else None
    short = call.split("__", 1)[-1]
    return isinstance(parts, list) and any(
        isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
        and p["functionResponse"].get("id") in (call, short) for p in parts)


def _turns(messages: list[dict[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    for m in messages:
        for c in _calls(m):
            turns.append(Turn("tool_use", str(c.get("id")), str(c.get("name"))))
            turns.append(Turn("tool_result", str(c.get("id"))))
        text = m.get("content")
        if isinstance(text, str) and text.strip():
            turns.append(Turn("text" if m.get("type") == "gemini" else "prompt",
                              text=" ".join(text.split())[:200]))
        elif isinstance(text, list) and m.get("type") == "user":
            words = " ".join(str(p.get("text")) for p in text
                             if isinstance(p, dict) and "text" in p)
            if words.strip():
                turns.append(Turn("prompt", text=" ".join(words.split())[:200]))
    return turns


def cut(path: str | os.PathLike[str], call_id: str) -> Cut:
    """The chat at ``path`` up to and including the user message holding
    the result of call ``call_id`` (a chat call id, ``name__id``)."""
    source = Path(path)
    header, messages = _read(source)
    at = next((k for k, m in enumerate(messages)
               if any(c.get("id") == call_id for c in _calls(m))), None)
    if at is None:
        raise LookupError(f"tool call {call_id} is not in {source}")
    if len(_calls(messages[at])) > 1:
        others = [str(c.get("id")) for c in _calls(messages[at]) if c.get("id") != call_id]
        raise Unsupported(f"tool call {call_id} ran beside {', '.join(others)} in one "
                          "parallel batch: the conversation cannot end between them")
    end = next((k for k in range(at + 1, len(messages)) if _responds(messages[k], call_id)),
               None)
    if end is None:
        raise LookupError(f"tool call {call_id} has no result in {source}")
    return Cut(source, str(header.get("sessionId")), call_id, header, messages[:end + 1],
               _turns(messages[end + 1:]))


def write_session(c: Cut) -> tuple[str, Path]:
    """Write ``c`` as a new session beside its source: a header with a new
    session id and one ``$set`` of the kept messages, in a file named with
    the new id's first 8 characters (Gemini's cleanup deletes a file whose
    short id another file shares).  Never over an existing file."""
    for _ in range(8):
        new_id = str(uuid.uuid4())
        if not any(c.source.parent.glob(f"session-*-{new_id[:8]}.jsonl")):
            break
    stamp = time.strftime("%Y-%m-%dT%H-%M", time.gmtime())
    target = c.source.parent / f"session-{stamp}-{new_id[:8]}.jsonl"
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    header = {**c.header, "sessionId": new_id, "lastUpdated": now}
    data = (json.dumps(header, ensure_ascii=False) + "\n"
            + json.dumps({"$set": {"messages": c.kept}}, ensure_ascii=False) + "\n").encode()
    write_new(target, data)
    return new_id, target
