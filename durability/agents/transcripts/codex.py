"""Codex CLI's session rollout: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``
(docs/explanation/session-formats.md).

One JSON object a line, ``{"timestamp", "ordinal"?, "type", "payload"}``; the
first is ``session_meta`` (``payload.id``: the thread id; ``cli_version``).
A tool call is a ``response_item`` whose payload is a ``function_call`` or
``custom_tool_call`` with a ``call_id``, complete once its
``function_call_output`` / ``custom_tool_call_output`` with the same
``call_id`` is there.  ``codex exec resume ID`` finds a rollout by the id in
its file name and its first line, so a copy cut after a call's output, with a
new id in both, is a new thread ending there (seen with 0.171.0).

Tested with Codex CLI 0.171.0 (``TESTED_VERSIONS``); any other version, or a
kind of line not seen with it, is refused (``Unsupported``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.agents.transcripts import Unsupported, json_lines, write_new
from durability.agents.transcripts.claude import Turn

__all__ = ["TESTED_VERSIONS", "Cut", "completed_calls", "cut", "new_thread_id", "write_session"]

TESTED_VERSIONS = frozenset({"0.171.0"})
#: The top-level kinds of line 0.171.0 writes (the rollout's ``type``).
_KINDS = frozenset({"session_meta", "event_msg", "turn_context", "world_state",
                    "response_item", "token_usage_record"})
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Cut:
    """The rollout up to and including one tool call's output."""

    source: Path
    session_id: str
    call_id: str
    kept: list[dict[str, Any]]
    dropped: list[Turn]
    versions: tuple[str, ...]
    cwd: str | None


def _lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, item in json_lines(path, MAX_BYTES):
        if not isinstance(item.get("type"), str) or not isinstance(item.get("payload"), dict):
            raise Unsupported(f"{path} line {n} is not a rollout line (type and payload)")
        out.append(item)
    return out


def _payload_type(item: dict[str, Any]) -> str | None:
    kind = item["payload"].get("type")
    return kind if isinstance(kind, str) else None


def _output_of(item: dict[str, Any]) -> str | None:
    if item["type"] == "response_item" and _payload_type(item) in _OUTPUTS:
        return str(item["payload"].get("call_id"))
    return None


def completed_calls(path: str | os.PathLike[str]) -> list[str]:
    """The tool calls the rollout holds as completed (their output is
    there), oldest first.  Read only; any version."""
    done: list[str] = []
    for item in _lines(Path(path)):
        call = _output_of(item)
        if call is not None and call not in done:
            done.append(call)
    return done


def _turns(items: list[dict[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    for item in items:
        if item["type"] != "response_item":
            continue
        p, kind = item["payload"], _payload_type(item)
        if kind in _CALLS:
            turns.append(Turn("tool_use", str(p.get("call_id")), str(p.get("name"))))
        elif kind in _OUTPUTS:
            turns.append(Turn("tool_result", str(p.get("call_id"))))
        elif kind == "message" and p.get("role") in ("user", "assistant"):
            text = " ".join(str(c.get("text") or "") for c in p.get("content") or []
                            if isinstance(c, dict))
            turns.append(Turn("prompt" if p["role"] == "user" else "text",
                              text=" ".join(text.split())[:200]))
    return turns


def cut(path: str | os.PathLike[str], call_id: str) -> Cut:
    """The rollout at ``path`` up to and including the output of tool call
    ``call_id``.  ``LookupError`` when it holds no such output;
    ``Unsupported`` for a version or kind of line not tested, or a cut inside
    a batch of parallel calls."""
    source = Path(path)
    items = _lines(source)
    if not items or items[0]["type"] != "session_meta":
        raise Unsupported(f"Codex rollout {source} does not start with session_meta")
    meta = items[0]["payload"]
    version = meta.get("cli_version")
    if not isinstance(version, str) or version not in TESTED_VERSIONS:
        raise Unsupported(f"codex {version} (rollout {source}); tested: "
                          f"{', '.join(sorted(TESTED_VERSIONS))}")
    end = next((n for n, item in enumerate(items) if _output_of(item) == call_id), None)
    if end is None:
        raise LookupError(f"tool call {call_id} has no output in {source}")
    kept = items[:end + 1]
    odd = sorted({i["type"] for i in kept} - _KINDS)
    if odd:
        raise Unsupported(f"Codex rollout {source} has {', '.join(map(repr, odd))} lines, "
                          f"a kind not tested with codex {version}")
    answered = {_output_of(i) for i in kept}
    unanswered = [str(i["payload"].get("call_id")) for i in kept
                  if i["type"] == "response_item" and _payload_type(i) in _CALLS
                  and str(i["payload"].get("call_id")) not in answered]
    if unanswered:
        raise Unsupported(f"tool call {call_id} ran beside {', '.join(unanswered)} in one "
                          "parallel batch, whose outputs come after it: the conversation "
                          "cannot end between them")
    cwd = meta.get("cwd")
    return Cut(source, str(meta.get("id")), call_id, kept, _turns(items[end + 1:]), (version,),
               cwd if isinstance(cwd, str) else None)


def new_thread_id() -> str:
    """A new thread id in Codex's own form, a UUIDv7 (time-ordered)."""
    ms = time.time_ns() // 1_000_000
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def write_session(c: Cut, new_id: str) -> Path:
    """Write ``c`` as thread ``new_id`` beside its source (the new id in
    the file name and ``session_meta.payload.id``); never over an existing
    file.  The source is not touched."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
    target = c.source.parent / f"rollout-{stamp}-{new_id}.jsonl"
    lines = []
    for n, item in enumerate(c.kept):
        copy = dict(item)
        if n == 0:
            copy["payload"] = {**item["payload"], "id": new_id}
        lines.append(json.dumps(copy, ensure_ascii=False, separators=(",", ":")))
    data = ("\n".join(lines) + "\n").encode()
    write_new(target, data)
    return target
