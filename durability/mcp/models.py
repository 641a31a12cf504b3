"""The typed inputs and outputs of the MCP tools (docs/how-to/mcp.md).

Inputs are strict about what comes from outside: unknown fields are refused
(a misspelt ``seq`` must not silently restore the latest checkpoint), ids are
checked as ``ids.validate_id`` checks every id, and numbers are never taken
from strings or floats.  Outputs mirror the CLI's ``--json`` shapes, so a
person and an agent read the same fields.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from durability.ground import ids
from durability.store.events import Event
from durability.store.models import Attempt, Gap, Session

__all__ = [
    "ApproveIn",
    "AttemptOut",
    "AttemptsOut",
    "CheckpointOut",
    "CheckpointsOut",
    "DecisionOut",
    "DenyIn",
    "DiffIn",
    "DiffOut",
    "ErrorOut",
    "EventOut",
    "FileChangeOut",
    "GapOut",
    "GapsIn",
    "GapsOut",
    "GcPreviewIn",
    "GcPreviewOut",
    "LogIn",
    "LogOut",
    "LogsIn",
    "LogsOut",
    "NoIn",
    "PickIn",
    "RemoteOut",
    "RemotesIn",
    "RemotesOut",
    "RestoreIn",
    "RestoreOut",
    "RunIdIn",
    "RunStatusIn",
    "RunStatusOut",
    "RunsOut",
    "ServiceStatusOut",
    "SessionOut",
    "SessionsIn",
    "SessionsOut",
    "ShowOut",
    "SideOut",
    "SnapshotIn",
    "SnapshotOut",
    "SnapshotsIn",
    "TotalsOut",
    "UndoOut",
]


def _id(value: str) -> str:
    return ids.validate_id(value, "id")  # ValueError: pydantic reports it as invalid


def _path(value: str) -> str:
    if not value or "\0" in value:
        raise ValueError("not a usable path")
    return value


Id = Annotated[str, AfterValidator(_id)]
#: SQLite's INTEGER: a larger number from the agent is refused here, not by
#: an OverflowError deep in a tool (an internal-error the model cannot fix).
INT_MAX = 2**63 - 1
PathText = Annotated[str, AfterValidator(_path), Field(max_length=4096)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


def _mirror(record: type[Any], **overrides: Any) -> type[_Out]:
    """An output model with exactly the fields (types, defaults, order) of
    ``record``, an engine dataclass: where the MCP answer is the engine's
    record, its schema follows the record instead of a copy of it.
    ``overrides`` are ``create_model`` field definitions."""
    hints = get_type_hints(record)
    fields: dict[str, Any] = {
        f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(record)}
    fields.update(overrides)
    return create_model(f"_{record.__name__}Fields", __base__=_Out, **fields)


# -- inputs --------------------------------------------------------------------

_WORKTREE = ("A path inside the worktree (absolute, or relative to the folder the server "
             "was started in); default: that folder.")
_RUN = ("The run or session id; default: the newest session that touched the worktree.")


class SessionsIn(_In):
    worktree: PathText | None = Field(default=None, description="Only sessions that touched the "
                                      "worktree holding this path (default: the served "
                                      "worktree; every session with --any-worktree).")
    limit: int | None = Field(default=50, ge=1, description="Only the newest N; null: all.")


class RunIdIn(_In):
    run_id: Id | None = Field(default=None, description=_RUN)
    worktree: PathText | None = Field(default=None, description=_WORKTREE)


class SnapshotsIn(RunIdIn):
    node_id: Id | None = Field(default=None, description="Only this node (task).")
    limit: int | None = Field(default=100, ge=1, description="Only the last N in the "
                              "listing's order (a long session has one per tool call); "
                              "null: all.")


class GapsIn(RunIdIn):
    limit: int | None = Field(default=100, ge=1, description="Only the newest N; null: all.")


class PickIn(RunIdIn):
    """One checkpoint: the latest attempt and seq unless named."""

    node_id: Id | None = Field(default=None,
                               description="Node (task); default: the run's only node.")
    iteration: int | None = Field(default=None, ge=0, le=INT_MAX,
                                  description="Iteration (from 0).")
    attempt: int | None = Field(default=None, ge=1, le=INT_MAX, description="Attempt (from 1).")
    seq: int | None = Field(default=None, ge=1, le=INT_MAX,
                            description="Checkpoint seq; default: the latest.")


class DiffIn(PickIn):
    to_seq: int | None = Field(default=None, ge=1, le=INT_MAX,
                               description="Compare seq with this seq of the "
                               "same attempt.")
    to_worktree: bool = Field(default=False, description="Compare seq with the files as they "
                              "are now (nothing is captured).")
    paths: list[PathText] = Field(default_factory=list, max_length=256,
                                  description="Only these paths (relative to the worktree "
                                  "root; a folder: everything under it).")
    patch: bool = Field(default=False, description="Also return git's unified diff text (cut at "
                        "max_patch_bytes).")
    max_patch_bytes: int = Field(default=200_000, ge=1, le=5_000_000)


class RestoreIn(PickIn):
    paths: list[PathText] = Field(default_factory=list, max_length=256,
                                  description="Restore only these files or folders "
                                  "(relative to the worktree root); default: the whole tree.")
    dry_run: bool = Field(default=False, description="Only say what would be written, deleted or "
                          "left; change nothing and record nothing.")


class SnapshotIn(_In):
    worktree: PathText | None = Field(default=None, description=_WORKTREE)
    run_id: Id | None = Field(default=None, description="Record under this run; default: the "
                              "newest session of the worktree.")
    node_id: Id | None = Field(default=None, description="Node; default: the session's only node, "
                               "else `session`.")
    iteration: int = Field(default=0, ge=0, le=INT_MAX)
    attempt: int = Field(default=1, ge=1, le=INT_MAX)
    label: str | None = Field(default=None, max_length=1000,
                              description="A label for the checkpoint.")


class LogIn(_In):
    worktree: PathText | None = Field(default=None, description=_WORKTREE)
    limit: int | None = Field(default=50, ge=1, le=10_000, description="Only the newest N entries.")


class LogsIn(RunIdIn):
    limit: int = Field(default=100, ge=1, le=10_000, description="Only the newest N events "
                       "(a session logs one per checkpoint).")


#: A retention window in days, as the config file and `gc`'s options take it.
Days = Annotated[float, Field(ge=0, le=36_500)]


class GcPreviewIn(_In):
    worktree: PathText | None = Field(default=None, description=_WORKTREE)
    keep_all_days: Days | None = Field(default=None, description="Override: every checkpoint "
                                       "younger than this is kept.")
    hourly_days: Days | None = Field(default=None, description="Override: then the newest per "
                                     "attempt and hour, up to this age.")
    daily_days: Days | None = Field(default=None, description="Override: then the newest per "
                                    "attempt and day, up to this age.")
    pre_restore_days: Days | None = Field(default=None, description="Override: pre-restore "
                                          "checkpoints are kept this long.")
    limit: int = Field(default=100, ge=1, le=10_000, description="List only the newest N "
                       "checkpoints that would be dropped.")


class RemotesIn(_In):
    worktree: PathText | None = Field(default=None, description=_WORKTREE)


class RunStatusIn(_In):
    run_id: Id


class ApproveIn(_In):
    run_id: Id
    node_id: Id


class DenyIn(ApproveIn):
    reason: str | None = Field(default=None, max_length=2000)


class NoIn(_In):
    pass


# -- outputs -------------------------------------------------------------------


# The mirrors carry no docstring: it would become the schema's description.
# (``harnesses`` is always answered, so required, as it was.)
class SessionOut(_mirror(Session, harnesses=(str, ...))):  # type: ignore[misc]
    pass


class SessionsOut(_Out):
    sessions: list[SessionOut]
    total: int


class CheckpointOut(_Out):
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


class CheckpointsOut(_Out):
    run_id: str
    checkpoints: list[CheckpointOut]
    total: int = Field(description="How many the run has (more than listed when limited).")


class FileChangeOut(_Out):
    status: str
    path: str
    old_path: str | None
    old_mode: str | None
    new_mode: str | None
    binary: bool
    additions: int
    deletions: int


class TotalsOut(_Out):
    files: int
    additions: int
    deletions: int


class SideOut(_Out):
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int
    commit_id: str


class ShowOut(_Out):
    checkpoint: CheckpointOut
    base: SideOut | None = Field(description="What the files are compared with (None: the "
                                 "first checkpoint of its worktree).")
    files: list[FileChangeOut]
    totals: TotalsOut


class DiffOut(_Out):
    from_: SideOut | None = Field(alias="from", serialization_alias="from")
    to: SideOut | Literal["worktree"] | None
    files: list[FileChangeOut]
    totals: TotalsOut
    patch: str | None = Field(default=None, description="git's unified diff (undecodable bytes "
                              "escaped), when asked for.")
    patch_truncated: bool = False

    model_config = ConfigDict(frozen=True, populate_by_name=True)


class GapOut(_mirror(Gap)):  # type: ignore[misc]
    pass


class GapsOut(_Out):
    run_id: str
    gaps: list[GapOut]
    total: int
    torn_spool_lines: int = 0


class AttemptOut(_mirror(Attempt)):  # type: ignore[misc]
    pass


class AttemptsOut(_Out):
    run_id: str
    attempts: list[AttemptOut]


class LogOut(_Out):
    worktree: str
    entries: list[dict[str, Any]] = Field(description="Newest first: `kind` is checkpoint "
                                          "or gap; the fields of `durability log --json`.")


class SnapshotOut(_Out):
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int | None
    commit_id: str | None
    deduped: bool
    skipped: list[dict[str, str]] = Field(description="Paths left out of the checkpoint "
                                          "(each also a gap), or still changing.")


class UndoOut(_Out):
    """The call that puts the tree back as it was before the restore."""

    tool: Literal["restore"] = "restore"
    arguments: dict[str, Any]
    command: str


class RestoreOut(_Out):
    dry_run: bool
    worktree: str
    target: SideOut
    paths: list[str] | None
    written: list[str] = Field(description="Paths written (dry run: that would be).")
    deleted: list[str] = Field(description="Paths deleted (dry run: that would be).")
    left: list[dict[str, str]] = Field(default_factory=list, description="Dry run: paths "
                                       "left as they are, and why.")
    pre_restore: SideOut | None = Field(default=None, description="The checkpoint of the tree "
                                        "before the restore (None on a dry run).")
    undo: UndoOut | None = None


class RunsOut(_Out):
    runs: list[dict[str, Any]]


class RunStatusOut(_Out):
    model_config = ConfigDict(frozen=True, extra="allow")

    run_id: str
    state: str | None
    tasks: list[dict[str, Any]]


class ServiceStatusOut(_Out):
    model_config = ConfigDict(frozen=True, extra="allow")

    running: bool
    socket: str
    answering: bool | None = Field(default=None, description="A service listens but does "
                                   "not answer (stopped or flooded) when false.")


class DecisionOut(_Out):
    run_id: str
    node_id: str
    decision: Literal["approved", "denied"]
    next: str


class EventOut(_mirror(Event)):  # type: ignore[misc]
    pass


class LogsOut(_Out):
    run_id: str
    events: list[EventOut] = Field(description="The newest `limit`, oldest first, as "
                                   "`durability logs --json` prints them.")
    total: int = Field(description="How many events the run has.")


class GcPreviewOut(_Out):
    dry_run: Literal[True] = True
    worktree: str
    policy: dict[str, Any]
    checkpoints: dict[str, Any] = Field(description="{before, dropped, kept, kept_by}: over "
                                        "the repository of the worktree.")
    repositories: list[dict[str, Any]]
    skipped: list[dict[str, str]]
    would_drop: list[CheckpointOut] = Field(description="The newest `limit` of the "
                                            "checkpoints gc would drop, oldest first.")
    would_drop_total: int


class RemoteOut(_Out):
    name: str
    url: str
    worktree: str
    created_at_ms: int
    pushed: int = Field(description="Checkpoints of the worktree on this remote.")
    pending: int = Field(description="Not pushed yet (the service pushes them).")
    failed: int = Field(description="Not pushed within the bound (each a "
                        "replication-failed gap); retried.")


class RemotesOut(_Out):
    worktree: str
    checkpoints: int = Field(description="How many checkpoints the worktree has.")
    remotes: list[RemoteOut]


class ErrorOut(_Out):
    """What a failed call carries (``is_error`` results): a stable code of
    durability/ground/errors.py and one line of message."""

    code: str
    message: str
