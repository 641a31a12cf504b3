"""The conversation half of a rewind, per harness: what a new session that
ends right after the boundary's tool call would hold, and writing it.

Only formats a test has resumed are written (docs/how-to/rewind.md); any
other is ``conversation-unsupported``, naming the harness and version, and
the code half is still there with ``--code-only``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from durability.agents.transcripts import Unsupported
from durability.agents.transcripts import claude as claude_transcript
from durability.agents.transcripts import codex as codex_transcript
from durability.agents.transcripts import gemini as gemini_transcript
from durability.agents.transcripts.claude import Turn
from durability.ground.errors import DurabilityError
from durability.store.boundaries import Boundary

__all__ = ["UNSUPPORTED", "ConversationPlan", "Turn", "plan", "write"]

UNSUPPORTED = "conversation-unsupported"


@dataclass(frozen=True)
class ConversationPlan:
    """A new session to write: from which transcript, what it keeps and drops."""

    harness: str
    source: str
    call_id: str
    kept_lines: int
    dropped: tuple[Turn, ...]
    #: The harness versions that wrote the kept part.
    versions: tuple[str, ...]
    #: The folder the harness is started in to find the new session.
    cwd: str | None
    cut: claude_transcript.Cut | codex_transcript.Cut | gemini_transcript.Cut | None = field(
        default=None, repr=False, compare=False)


def _refuse(message: str) -> DurabilityError:
    return DurabilityError(message + "; the code alone: add --code-only", code=UNSUPPORTED)


def plan(boundary: Boundary, transcript: str | None,
         session: Sequence[Boundary] = ()) -> ConversationPlan:
    """What the conversation half would do for ``boundary``, whose session's
    transcript is at ``transcript`` (the boundary's own, else another of its
    session's boundaries'; ``session``: all of them, by seq);
    ``conversation-unsupported`` when it cannot."""
    harness = boundary.harness or "claude"
    if harness not in ("claude", "codex", "gemini"):
        raise _refuse(f"{harness} sessions: their transcript format is not supported yet "
                      "(docs/how-to/rewind.md)")
    if harness == "gemini":
        return _gemini(boundary, transcript, session)
    if not boundary.tool_use_id:
        raise _refuse(f"boundary seq {boundary.seq} has no tool call id to end the "
                      "conversation at")
    if not transcript:
        raise _refuse(f"{harness}: the hook reported no transcript for session "
                      f"{boundary.run_id}")
    _where_the_harness_keeps_them(harness, transcript)
    try:
        if harness == "codex":
            x = codex_transcript.cut(transcript, boundary.tool_use_id)
            return ConversationPlan("codex", transcript, boundary.tool_use_id, len(x.kept),
                                    tuple(x.dropped), x.versions, x.cwd, x)
        c = claude_transcript.cut(transcript, boundary.tool_use_id)
    except (Unsupported, LookupError) as exc:
        raise _refuse(f"{harness}: {exc}") from None
    return ConversationPlan("claude", transcript, boundary.tool_use_id, len(c.kept),
                            tuple(c.dropped), c.versions, _cwd(c), c)


def _gemini(boundary: Boundary, transcript: str | None,
            session: Sequence[Boundary]) -> ConversationPlan:
    """Gemini's hooks name no call: the boundary's id is filled in from the
    chat file first (``gemini_call_ids``, by ``rewind``); without one the
    conversation cannot be cut at it."""
    if not transcript:
        raise _refuse(f"gemini: the hook reported no chat file for session {boundary.run_id}")
    if not boundary.tool_use_id:
        try:
            done = gemini_transcript.completed_calls(transcript)
        except Unsupported as exc:
            raise _refuse(f"gemini: {exc}") from None
        rows = [b for b in session if b.harness == "gemini" and b.transcript_path == transcript]
        raise _refuse(f"gemini: the chat {transcript} holds {len(done)} completed calls and "
                      f"the session {len(rows)} boundaries, not the same calls one to one: "
                      f"boundary seq {boundary.seq} has no call id")
    try:
        g = gemini_transcript.cut(transcript, boundary.tool_use_id)
    except (Unsupported, LookupError) as exc:
        raise _refuse(f"gemini: {exc}") from None
    _where_the_harness_keeps_them("gemini", transcript)
    return ConversationPlan("gemini", transcript, boundary.tool_use_id, len(g.kept),
                            tuple(g.dropped), (), boundary.worktree, g)


#: Where each harness keeps its sessions, as the transcript's path ends: a
#: new session is written beside the transcript, and the path comes from the
#: hook's payload (whatever ran ``snapshot-hook`` named it).
_FOLDERS = {"claude": "a Claude Code projects folder (projects/<folder>/<session>.jsonl)",
            "codex": "a Codex sessions folder (sessions/YYYY/MM/DD/rollout-*.jsonl)",
            "gemini": "a Gemini CLI chats folder (chats/session-*.jsonl)"}


def _where_the_harness_keeps_them(harness: str, transcript: str) -> None:
    """Refuse a transcript not where ``harness`` keeps its sessions."""
    path = Path(transcript)
    parts = path.parts
    if harness == "claude":
        ok = len(parts) >= 3 and parts[-3] == "projects"
    elif harness == "codex":
        ok = (len(parts) >= 5 and parts[-5] == "sessions" and path.name.startswith("rollout-")
              and all(p.isdigit() for p in parts[-4:-1]))
    else:
        ok = len(parts) >= 2 and parts[-2] == "chats" and path.name.startswith("session-")
    if not (ok and path.is_absolute() and path.suffix == ".jsonl" and ".." not in parts):
        raise _refuse(f"{harness}: the transcript {transcript} is not in {_FOLDERS[harness]}; "
                      "no new session is written beside it")


def _cwd(c: claude_transcript.Cut) -> str | None:
    return next((str(i["cwd"]) for i in c.kept if isinstance(i.get("cwd"), str)), None)


@dataclass(frozen=True)
class Written:
    """The new session: its id, its transcript, the command that continues it."""

    session_id: str
    path: str
    resume: tuple[str, ...]


def write(p: ConversationPlan) -> Written:
    """Write ``p``'s new session (a new id, beside the original)."""
    try:
        if isinstance(p.cut, gemini_transcript.Cut):
            session, path = gemini_transcript.write_session(p.cut)
            return Written(session, str(path), ("gemini", "--resume", session))
        if isinstance(p.cut, codex_transcript.Cut):
            thread = codex_transcript.new_thread_id()
            path = codex_transcript.write_session(p.cut, thread)
            return Written(thread, str(path), ("codex", "resume", thread))
        assert p.cut is not None
        new_id = str(uuid.uuid4())
        path = claude_transcript.write_session(p.cut, new_id)
    except OSError as exc:
        raise DurabilityError(f"cannot write the new session beside {p.source}: "
                              f"{exc.strerror or exc}", code="error") from None
    return Written(new_id, str(path), ("claude", "--resume", new_id))


def turn_dict(t: Turn) -> dict[str, str | None]:
    return {"kind": t.kind, "tool_use_id": t.tool_use_id, "tool_name": t.tool_name,
            "text": t.text}


def describe_turn(t: Turn) -> str:
    if t.kind in ("tool_use", "tool_result"):
        return f"{t.kind} {t.tool_use_id}" + (f" ({t.tool_name})" if t.tool_name else "")
    return f"{t.kind} {json.dumps(t.text or '', ensure_ascii=False)[:120]}"


def transcript_of(boundaries: list[Boundary], boundary: Boundary) -> str | None:
    """The transcript the harness reported for ``boundary``, else the newest
    another boundary of its session reported."""
    if boundary.transcript_path:
        return boundary.transcript_path
    return next((b.transcript_path for b in reversed(boundaries) if b.transcript_path), None)


def exists(path: str) -> bool:
    return Path(path).is_file()


def gemini_call_ids(session: Sequence[Boundary]) -> dict[int, str]:
    """The call ids of a Gemini session's boundaries that have none, from
    their chat files: only where a chat's completed calls and its
    boundaries pair one to one, in order, each of the same tool (a call
    whose hook failed has no boundary, and then none is named)."""
    found: dict[int, str] = {}
    chats = {b.transcript_path for b in session if b.harness == "gemini" and b.transcript_path}
    for chat in sorted(chats):
        rows = [b for b in session if b.harness == "gemini" and b.transcript_path == chat]
        try:
            done = gemini_transcript.completed_calls(chat)
        except Unsupported:
            continue
        names = [c.split("__", 1)[0] for c in done]
        if len(done) != len(rows) or any(b.tool_name != names[k] for k, b in enumerate(rows)):
            continue  # not the same calls one to one, in order: leave them unnamed
        found.update({b.seq: done[k] for k, b in enumerate(rows) if not b.tool_use_id})
    return found
