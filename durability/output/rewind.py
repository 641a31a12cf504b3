"""The answers of ``rewind`` and of the boundary listings (issue 24): a
boundary as ``log``, ``show`` and ``browse`` name it, and what a rewind
did or would do (docs/how-to/rewind.md)."""

from __future__ import annotations

from durability.output.answers import PreviewOut, RestoredOut
from durability.output.base import Out, mirror
from durability.output.records import BoundaryRefOut
from durability.rewind.apply import Rewound
from durability.rewind.conversation import Turn
from durability.store.boundaries import Boundary

__all__ = ["BoundaryOut", "BoundaryRefOut", "ConversationOut", "RewoundOut", "TurnOut"]

#: A boundary row, every field (``rewind --json``'s ``boundary``).
BoundaryOut = mirror(Boundary)


TurnOut = mirror(Turn)


class ConversationOut(Out):
    harness: str
    #: The original transcript (read, never changed).
    source: str
    call_id: str
    kept_lines: int
    versions: list[str]
    #: The turns after the call that the new session does not hold.
    dropped: list[TurnOut]  # type: ignore[valid-type]
    #: The new session (None in a dry run).
    session_id: str | None = None
    path: str | None = None
    #: The command that continues it, run in ``cwd``.
    resume: list[str] | None = None
    cwd: str | None = None


class RewoundOut(Out):
    """``rewind --json`` (and the MCP tool's answer)."""

    dry_run: bool
    session: str
    boundary: BoundaryOut  # type: ignore[valid-type]
    #: The code half: a restore's answer, a dry run's preview, or None (--conversation-only).
    code: RestoredOut | PreviewOut | None
    conversation: ConversationOut | None

    @classmethod
    def of(cls, r: Rewound) -> RewoundOut:
        code: RestoredOut | PreviewOut | None = None
        if r.restored is not None:
            code = RestoredOut.of(r.restored)
        elif r.preview is not None:
            code = PreviewOut.of(r.preview)
        conv = None
        if r.conversation is not None:
            p, w = r.conversation, r.written
            conv = ConversationOut(
                harness=p.harness, source=p.source, call_id=p.call_id, kept_lines=p.kept_lines,
                versions=list(p.versions), dropped=[TurnOut.from_record(t) for t in p.dropped],
                session_id=w.session_id if w else None, path=w.path if w else None,
                resume=list(w.resume) if w else None, cwd=p.cwd)
        return cls(dry_run=r.dry_run, session=r.session,
                   boundary=BoundaryOut.from_record(r.boundary), code=code, conversation=conv)
