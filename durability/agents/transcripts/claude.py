"""Claude Code's session transcript: ``<config>/projects/<folder>/<session>.jsonl``.

One JSON object a line.  The conversation's lines (``user``, ``assistant``,
``attachment``, ``system``) each carry ``uuid``, ``parentUuid``,
``sessionId`` and the CLI's ``version``; an assistant message with several
content blocks is one line per block; a tool's result is a ``user`` line
whose content holds a ``tool_result`` block naming the call's ``tool_use_id``.
Around them: ``queue-operation`` lines (the prompt queue), and at the end a
``last-prompt`` line naming the leaf.

Tested with Claude Code 2.1.197 and 2.1.332 (``AROUND``: the kinds of line
each writes besides the conversation's).  A transcript written by a version
not tested, or holding a kind of line not seen with its version (2.1.220's
file-history-delta lines, for one), is refused (``Unsupported``), never
rewritten by guess.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.agents.transcripts import Unsupported, json_lines, write_new

__all__ = ["TESTED_VERSIONS", "Cut", "Turn", "completed_calls", "cut", "project_folder",
           "write_session"]

#: The versions whose transcripts were read, cut and resumed in a test
#: (tests/e2e/test_rewind.py), each with the kinds of line it writes around
#: the conversation: kept as they are (with the new session id).  2.1.332
#: added the API requests' records (``api-request``, its ``-shape`` and
#: ``-blob``), ``tools-used`` and ``atis-latch``.
AROUND: dict[str, frozenset[str]] = {
    "2.1.197": frozenset({"queue-operation"}),
    "2.1.332": frozenset({"queue-operation", "atis-latch", "api-request-shape",
                          "api-request-blob", "api-request", "tools-used"}),
}
TESTED_VERSIONS = frozenset(AROUND)
#: The conversation's own lines: they carry a version, a uuid and a session id.
_CONVERSATION = frozenset({"user", "assistant", "attachment", "system"})
#: Lines about the session's end (its leaf, its summaries, its cost): not
#: carried over, they would name lines the copy does not hold.
_DROPPED = frozenset({"last-prompt", "summary", "cost-state"})
# A transcript larger than this is not read whole into memory.
MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Turn:
    """One part of the conversation a rewind drops (or keeps)."""

    #: ``prompt`` (a person's message), ``text`` (the agent's), ``tool_use``, ``tool_result``.
    kind: str
    tool_use_id: str | None = None
    tool_name: str | None = None
    #: The first characters of a prompt or text.
    text: str | None = None


@dataclass(frozen=True)
class Cut:
    """The transcript up to and including one tool call's result."""

    source: Path
    session_id: str
    call_id: str
    #: The kept lines, parsed.
    kept: list[dict[str, Any]]
    dropped: list[Turn]
    #: The Claude Code versions the kept lines were written by.
    versions: tuple[str, ...] = field(default=())


def _lines(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, item in json_lines(path, MAX_BYTES):
        if not isinstance(item.get("type"), str):
            raise Unsupported(f"{path} line {n} is not a transcript entry (no type)")
        out.append(item)
    return out


def _blocks(item: dict[str, Any]) -> list[dict[str, Any]]:
    message = item.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _results(item: dict[str, Any]) -> list[str]:
    if item.get("type") != "user":
        return []
    return [str(b.get("tool_use_id")) for b in _blocks(item) if b.get("type") == "tool_result"]


def _uses(item: dict[str, Any]) -> list[dict[str, Any]]:
    if item.get("type") != "assistant":
        return []
    return [b for b in _blocks(item) if b.get("type") == "tool_use"]


def completed_calls(path: str | os.PathLike[str]) -> list[str]:
    """The tool calls the transcript holds as completed (a result line came
    back for each), oldest first.  Read only; any version."""
    done: list[str] = []
    for item in _lines(Path(path)):
        done += [r for r in _results(item) if r not in done]
    return done


def _turns(items: list[dict[str, Any]]) -> list[Turn]:
    turns: list[Turn] = []
    for item in items:
        for b in _blocks(item):
            kind = b.get("type")
            if kind == "tool_use":
                turns.append(Turn("tool_use", str(b.get("id")), str(b.get("name"))))
            elif kind == "tool_result":
                turns.append(Turn("tool_result", str(b.get("tool_use_id"))))
            elif kind == "text" and item.get("type") in ("user", "assistant"):
                text = " ".join(str(b.get("text") or "").split())[:200]
                turns.append(Turn("prompt" if item.get("type") == "user" else "text", text=text))
    return turns


def _check_shape(path: Path, items: list[dict[str, Any]]) -> tuple[str, ...]:
    """The versions of the kept lines; ``Unsupported`` unless every line is
    of a kind and version this module was tested with."""
    versions: list[str] = []
    for item in items:
        version = item.get("version")
        if item["type"] in _CONVERSATION and (
                not isinstance(version, str) or not isinstance(item.get("uuid"), str)
                or not isinstance(item.get("sessionId"), str)):
            raise Unsupported(f"Claude Code transcript {path} has a {item['type']} line "
                                  "without version, uuid or sessionId")
        if isinstance(version, str) and version not in versions:
            versions.append(version)
    untested = [v for v in versions if v not in TESTED_VERSIONS]
    if untested:
        raise Unsupported(f"claude {', '.join(untested)} (transcript {path}); tested: "
                          f"{', '.join(sorted(TESTED_VERSIONS))}")
    around = frozenset().union(*(AROUND[v] for v in versions)) if versions else frozenset()
    for item in items:
        kind = item["type"]
        if kind not in _CONVERSATION and kind not in around:
            raise Unsupported(f"Claude Code transcript {path} has a {kind!r} line, a kind not "
                              f"tested with claude {', '.join(versions) or '(no version)'}")
    return tuple(versions)


def cut(path: str | os.PathLike[str], call_id: str) -> Cut:
    """The transcript at ``path`` up to and including the line holding the
    result of tool call ``call_id``.  ``LookupError`` when it holds no such
    result; ``Unsupported`` when a kept line is of a kind or version not
    tested, or the cut would end inside a batch of parallel calls (a call
    of the same message without its result)."""
    source = Path(path)
    items = _lines(source)
    end = next((n for n, item in enumerate(items) if call_id in _results(item)), None)
    if end is None:
        raise LookupError(f"tool call {call_id} has no result in {source} (a sub-agent's "
                          "call is in its own transcript)")
    kept = [i for i in items[:end + 1] if i["type"] not in _DROPPED]
    versions = _check_shape(source, kept)
    answered = {r for item in kept for r in _results(item)}
    unanswered = [str(u.get("id")) for item in kept for u in _uses(item)
                  if str(u.get("id")) not in answered]
    if unanswered:
        raise Unsupported(f"tool call {call_id} ran beside {', '.join(unanswered)} in one "
                          "parallel batch, whose results come after it: the conversation "
                          "cannot end between them")
    session = next((str(i["sessionId"]) for i in kept if isinstance(i.get("sessionId"), str)),
                   source.stem)
    dropped = _turns([i for i in items[end + 1:] if i["type"] not in _DROPPED])
    return Cut(source, session, call_id, kept, dropped, versions)


def write_session(c: Cut, new_id: str, folder: Path | None = None) -> Path:
    """Write ``c`` as session ``new_id`` beside its source (the same project
    folder, which is what ``claude --resume`` looks in), every line's
    ``sessionId`` the new one; never over an existing file.  The source is
    not touched."""
    target = (folder or c.source.parent) / f"{new_id}.jsonl"
    lines = []
    for item in c.kept:
        copy = dict(item)
        if "sessionId" in copy:
            copy["sessionId"] = new_id
        lines.append(json.dumps(copy, ensure_ascii=False, separators=(",", ":")))
    data = ("\n".join(lines) + "\n").encode()
    write_new(target, data)
    return target


def project_folder(config_dir: Path, cwd: str) -> Path:
    """Where Claude Code keeps the transcripts of sessions started in
    ``cwd``: every character but letters and digits becomes ``-``."""
    return config_dir / "projects" / "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)
