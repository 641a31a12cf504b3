"""The answers of commands and tools that put records together.

Where the CLI and an MCP tool answer the same question the same way they
share a model; where their answers differ (``restore --json`` counts the
paths written, the ``restore`` tool lists them and says how to undo), each
has its own, built from the same parts (``records``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field

from durability.output.base import Out
from durability.output.records import (
    AttemptOut,
    BoundaryRefOut,
    CheckpointOut,
    CheckpointRecordOut,
    EventOut,
    FileChangeOut,
    GapOut,
    PointOut,
    RemoteOut,
    SessionOut,
    SideOut,
    TotalsOut,
)

if TYPE_CHECKING:
    from durability.restore.apply import Preview, Restored

__all__ = ["AttemptsOut", "ChangesOut", "CheckpointListedOut", "CheckpointsOut", "DecisionOut",
           "DiffOut", "ErrorOut", "GapsOut", "GcPreviewOut", "LogOut", "LogsOut", "PreviewOut",
           "RemotesOut", "RequestOut", "RestoreOut", "RestoredOut", "RunOutcomeOut",
           "RunStatusOut", "RunsOut", "ServiceStatusOut", "SessionsOut", "ShowOut", "ShownOut",
           "SnapshotOut", "StartedOut", "StoppedOut", "UndoOut", "WorkerOut"]

#: {remote name: pushed | pending | failed}; {} when the worktree has no remote.
Replicated = dict[str, str]


# -- both: the CLI's --json and the MCP tools ------------------------------------


class ChangesOut(Out):
    """``diff --json``: the two sides, the files and their totals."""

    from_: SideOut | None = Field(alias="from", serialization_alias="from")
    to: SideOut | Literal["worktree"] | None
    files: list[FileChangeOut]
    totals: TotalsOut

    model_config = ConfigDict(frozen=True, populate_by_name=True)


# -- the CLI's --json ------------------------------------------------------------


class CheckpointListedOut(CheckpointOut):
    """``snapshots --json``: a listed checkpoint and where it is replicated."""

    replicated: Replicated


class ShownOut(CheckpointRecordOut):
    """``show --json``: the whole checkpoint, its base, what it changed."""

    base: SideOut | None
    files: list[FileChangeOut]
    totals: TotalsOut
    replicated: Replicated
    #: The tool calls whose boundary is this checkpoint (issue 24).
    boundaries: list[BoundaryRefOut] = Field(default_factory=list)


class RestoredOut(Out):
    """``restore --json``."""

    worktree: str
    restored: PointOut
    pre_restore: SideOut
    paths: list[str] | None
    written: int
    deleted: int

    @classmethod
    def of(cls, done: Restored) -> RestoredOut:
        return cls(worktree=done.worktree, restored=PointOut.from_record(done.restored),
                   pre_restore=_pre_restore(done),
                   paths=list(done.paths) if done.paths is not None else None,
                   written=len(done.changes.write), deleted=len(done.changes.delete))


def _pre_restore(done: Restored) -> SideOut:
    """The checkpoint a restore took of the tree first: its undo."""
    key = done.undo_key  # the attempt the pre-restore checkpoint went on
    return SideOut(run_id=key.run_id, node_id=key.node_id, iteration=key.iteration,
                   attempt=key.attempt, seq=done.pre_restore_seq,
                   commit_id=done.pre_restore_commit)


class WriteOut(Out):
    path: str
    how: str


class LeftOut(Out):
    path: str
    why: str


class PreviewOut(Out):
    """``restore --dry-run --json``."""

    dry_run: bool = True
    worktree: str
    target: PointOut
    paths: list[str] | None
    write: list[WriteOut]
    delete: list[str]
    left: list[LeftOut]

    @classmethod
    def of(cls, seen: Preview) -> PreviewOut:
        """The order is part of the format, whatever order a backend's plan
        came in: each group by path (by code point: for UTF-8 names, their
        byte order)."""
        changes = seen.changes
        return cls(worktree=seen.worktree, target=PointOut.from_record(seen.target),
                   paths=list(seen.paths) if seen.paths is not None else None,
                   write=[WriteOut(path=p, how=how) for p, how in sorted(changes.write)],
                   delete=sorted(changes.delete),
                   left=[LeftOut(path=p, why=why) for p, why in sorted(changes.left)])


class StartedOut(Out):
    """``serve --detach --json``."""

    pid: int
    socket: str
    already_running: bool


class StoppedOut(Out):
    """``stop --json``."""

    socket: str
    was_running: bool
    pid: int | None = None
    killed: bool = False
    waited_s: float = 0.0


# -- the MCP tools -------------------------------------------------------------
# The tools' output schemas are these models' (a docstring becomes a schema's
# description, so the ones that had none have none).


class SessionsOut(Out):
    sessions: list[SessionOut]
    total: int


class CheckpointsOut(Out):
    run_id: str
    checkpoints: list[CheckpointOut]
    total: int = Field(description="How many the run has (more than listed when limited).")


class ShowOut(Out):
    checkpoint: CheckpointOut
    base: SideOut | None = Field(description="What the files are compared with (None: the "
                                 "first checkpoint of its worktree).")
    files: list[FileChangeOut]
    totals: TotalsOut


class DiffOut(ChangesOut):
    patch: str | None = Field(default=None, description="git's unified diff (undecodable bytes "
                              "escaped), when asked for.")
    patch_truncated: bool = False


class GapsOut(Out):
    run_id: str
    gaps: list[GapOut]
    total: int
    torn_spool_lines: int = 0


class AttemptsOut(Out):
    run_id: str
    attempts: list[AttemptOut]


class LogOut(Out):
    worktree: str
    entries: list[dict[str, Any]] = Field(description="Newest first: `kind` is checkpoint "
                                          "or gap; the fields of `durability log --json`.")


class SnapshotOut(Out):
    run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int | None
    commit_id: str | None
    deduped: bool
    skipped: list[dict[str, str]] = Field(description="Paths left out of the checkpoint "
                                          "(each also a gap), or still changing.")


class UndoOut(Out):
    """The call that puts the tree back as it was before the restore."""

    tool: Literal["restore"] = "restore"
    arguments: dict[str, Any]
    command: str


class RestoreOut(Out):
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

    @classmethod
    def of_preview(cls, seen: Preview) -> RestoreOut:
        """A dry run (in the plan's order, as the tool always answered)."""
        return cls(dry_run=True, worktree=seen.worktree, target=SideOut.from_record(seen.target),
                   paths=list(seen.paths) if seen.paths is not None else None,
                   written=[p for p, _ in seen.changes.write],
                   deleted=list(seen.changes.delete),
                   left=[{"path": p, "why": why} for p, why in seen.changes.left])

    @classmethod
    def of_restored(cls, done: Restored, undo: UndoOut) -> RestoreOut:
        return cls(dry_run=False, worktree=done.worktree,
                   target=SideOut.from_record(done.restored),
                   paths=list(done.paths) if done.paths is not None else None,
                   written=[p for p, _ in done.changes.write],
                   deleted=list(done.changes.delete), pre_restore=_pre_restore(done),
                   undo=undo)


class RunsOut(Out):
    runs: list[dict[str, Any]]


class RunStatusOut(Out):
    model_config = ConfigDict(frozen=True, extra="allow")

    run_id: str
    state: str | None
    tasks: list[dict[str, Any]]


class ServiceStatusOut(Out):
    model_config = ConfigDict(frozen=True, extra="allow")

    running: bool
    socket: str
    answering: bool | None = Field(default=None, description="A service listens but does "
                                   "not answer (stopped or flooded) when false.")


class DecisionOut(Out):
    run_id: str
    node_id: str
    decision: Literal["approved", "denied"]
    next: str


class LogsOut(Out):
    run_id: str
    events: list[EventOut] = Field(description="The newest `limit`, oldest first, as "
                                   "`durability logs --json` prints them.")
    total: int = Field(description="How many events the run has.")


class GcPreviewOut(Out):
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


class RemotesOut(Out):
    worktree: str
    checkpoints: int = Field(description="How many checkpoints the worktree has.")
    remotes: list[RemoteOut]


class WorkerOut(Out):
    """The detached process that drives the run (``durability resume RUN
    --claim-epoch E``, as a supervisor's child): it outlives the server."""

    pid: int
    epoch: int = Field(description="The claim it drives the run under.")
    owner: str
    log: str = Field(description="The file its output is appended to.")


class RunOutcomeOut(Out):
    """``run``, ``resume`` and ``fork``: the run handed to a worker, or
    (``existing``) a run id already started for the same workflow, as it is."""

    run_id: str
    state: str = Field(description="`running` when handed to a worker; an existing run's "
                       "state otherwise.")
    existing: bool = Field(default=False, description="The run id was already started for "
                           "this workflow: nothing was done.")
    worker: WorkerOut | None = Field(default=None, description="The process driving it (None: "
                                     "nothing was started).")
    error: dict[str, Any] | None = None
    waiting_on: str | None = None
    wake_at_ms: int | None = None
    next: str = Field(description="How to follow the run.")


class RequestOut(Out):
    """``pause`` and ``cancel``, as the commands say it."""

    run_id: str
    request: Literal["pause", "cancel"]
    outcome: str = Field(description="`requested`: the live owner was asked and acts on it "
                         "(within a heartbeat); else the state the run was put in at once "
                         "(nobody was working on it).")


class ErrorOut(Out):
    """What a failed call carries (``is_error`` results): a stable code of
    durability/ground/errors.py and one line of message."""

    code: str
    message: str
