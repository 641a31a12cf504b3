"""The answers built from one record: a session, a checkpoint (whole, as a
listing shows it, or as the side of a comparison), a gap, an attempt, an
event, a remote, a changed file.

The store's records are mirrored (``mirror``): a field the store adds
reaches ``--json`` and the MCP schemas without a copy to keep in step.  A
changed file and its totals are the library's (``durability.inspect.diff``,
which loads libgit2, so not imported here): their fields are written here
once, and a test holds them to the library's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from durability.output.base import Out, mirror
from durability.store.boundaries import Boundary
from durability.store.events import Event
from durability.store.models import Attempt, Checkpoint, Gap, Session

if TYPE_CHECKING:
    from collections.abc import Sequence

    from durability.inspect.diff import Changes
    from durability.inspect.timeline import Entry

__all__ = ["AttemptOut", "CheckpointOut", "CheckpointRecordOut", "EventOut", "FileChangeOut",
           "GapOut", "LogCallOut", "LogCheckpointOut", "LogGapOut", "PointOut", "RemoteOut",
           "RemoteRowOut", "SessionOut", "SideOut", "SizesOut", "TableCopyOut", "TotalsOut",
           "entry_out", "files_out"]


# The mirrors carry no docstring: it would become the schema's description.
# (``harnesses`` is always answered, so required, as it was.)
class SessionOut(mirror(Session, harnesses=(str, ...))):  # type: ignore[misc]
    pass


class GapOut(mirror(Gap)):  # type: ignore[misc]
    pass


class AttemptOut(mirror(Attempt)):  # type: ignore[misc]
    pass


class EventOut(mirror(Event)):  # type: ignore[misc]
    pass


class CheckpointRecordOut(mirror(Checkpoint)):  # type: ignore[misc]
    pass


class CheckpointOut(Out):
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int
    commit_id: str
    source: str
    tool_use_id: str | None
    label: str | None
    worktree: str
    created_at_ms: int
    harness: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    #: the agent session the call belongs to (an agent run's checkpoints)
    session_id: str | None = None


class SideOut(Out):
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int
    commit_id: str

    @classmethod
    def of(cls, checkpoint: Checkpoint | None) -> SideOut | None:
        """A checkpoint as the side of a comparison (None: no checkpoint)."""
        return None if checkpoint is None else cls.from_record(checkpoint)


class PointOut(Out):
    """A checkpoint of a known attempt: its seq and commit."""

    seq: int
    commit_id: str


class FileChangeOut(Out):
    status: str
    path: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    binary: bool
    additions: int
    deletions: int
    large: bool = Field(description="Over the size limit: not compared, no line counts.")
    old_size: int | None = Field(description="Bytes before (None: the path was absent).")
    new_size: int | None = Field(description="Bytes after (None: the path is gone).")


class TotalsOut(Out):
    files: int
    additions: int
    deletions: int


class SizesOut(Out):
    """What a timeline entry changed: paths, and their bytes before and after."""

    files: int
    old_bytes: int
    new_bytes: int


def files_out(changes: Changes | None) -> tuple[list[FileChangeOut], TotalsOut]:
    """The files ``changes`` holds and their totals (None, a checkpoint
    with no base: none)."""
    if changes is None:
        return [], TotalsOut(files=0, additions=0, deletions=0)
    return ([FileChangeOut.from_record(f) for f in changes.files()],
            TotalsOut.from_record(changes.totals()))


class BoundaryRefOut(Out):
    """A tool-call boundary as a listing names it (issue 24): its session,
    seq and tool call id; ``durability rewind SESSION --seq SEQ`` goes back
    to it."""

    session: str
    seq: int
    call: str | None
    tool_name: str | None

    @classmethod
    def of(cls, b: Boundary) -> BoundaryRefOut:
        return cls(session=b.run_id, seq=b.seq, call=b.tool_use_id, tool_name=b.tool_name)


class LogCheckpointOut(mirror(Checkpoint,  # type: ignore[misc]
                              first={"kind": (Literal["checkpoint"], "checkpoint")},
                              base=(SideOut | None, ...),
                              totals=(SizesOut | None, ...),
                              boundaries=(list[BoundaryRefOut], []))):
    pass


class LogGapOut(mirror(Gap, first={"kind": (Literal["gap"], "gap")})):  # type: ignore[misc]
    pass


#: A tool call whose checkpoint gc collected (decision 0061): its boundary
#: row, every field (as ``rewind --json``'s ``boundary``; ``commit_id`` empty).
class LogCallOut(mirror(Boundary,  # type: ignore[misc]
                        first={"kind": (Literal["call-collected"], "call-collected")})):
    pass


class RemoteRowOut(Out):
    name: str
    url: str
    worktree: str
    created_at_ms: int


class RemoteOut(RemoteRowOut):
    pushed: int = Field(description="Checkpoints of the worktree on this remote.")
    pending: int = Field(description="Not pushed yet (the service pushes them).")
    failed: int = Field(description="Not pushed within the bound (each a "
                        "replication-failed gap); retried.")


class TableCopyOut(Out):
    table: str
    source_rows: int
    target_rows: int


def entry_out(entry: Entry, boundaries: Sequence[Boundary] = ()
              ) -> LogCheckpointOut | LogGapOut | LogCallOut:
    """One entry of a timeline, as ``log --json`` prints it (a checkpoint
    with the tool-call boundaries that name it)."""
    out: LogCheckpointOut | LogGapOut | LogCallOut
    if entry.gap is not None:
        out = LogGapOut.from_record(entry.gap)
    elif entry.call is not None:
        out = LogCallOut.from_record(entry.call)
    else:
        out = LogCheckpointOut.from_record(
            entry.checkpoint, base=SideOut.of(entry.base),
            totals=SizesOut.from_record(entry.totals) if entry.totals else None,
            boundaries=[BoundaryRefOut.of(b) for b in boundaries])
    return out
