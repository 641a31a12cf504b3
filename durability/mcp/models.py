"""The typed inputs and outputs of the MCP tools (docs/how-to/mcp.md).

Inputs are strict about what comes from outside: unknown fields are refused
(a misspelt ``seq`` must not silently restore the latest checkpoint), ids are
checked as ``ids.validate_id`` checks every id, and numbers are never taken
from strings or floats.  The outputs are the shared models of
``durability.output`` (re-exported here), the ones the CLI's ``--json``
prints, so a person and an agent read the same fields.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from durability.ground import ids
from durability.output import (
    AttemptOut,
    AttemptsOut,
    CheckpointOut,
    CheckpointsOut,
    DecisionOut,
    DiffOut,
    ErrorOut,
    EventOut,
    FileChangeOut,
    GapOut,
    GapsOut,
    GcPreviewOut,
    LogOut,
    LogsOut,
    RemoteOut,
    RemotesOut,
    RequestOut,
    RestoreOut,
    RewoundOut,
    RunOutcomeOut,
    RunsOut,
    RunStatusOut,
    ServiceStatusOut,
    SessionOut,
    SessionsOut,
    ShowOut,
    SideOut,
    SnapshotOut,
    TotalsOut,
    UndoOut,
    WorkerOut,
)

__all__ = [
    "AgentRunIn",
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
    "ForkIn",
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
    "RequestOut",
    "RestoreIn",
    "RestoreOut",
    "ResumeIn",
    "RewindIn",
    "RewoundOut",
    "RunIdIn",
    "RunIn",
    "RunOutcomeOut",
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
    "WorkerOut",
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


class RewindIn(RunIdIn):
    """A boundary of the session (every tool call a hook reported): by seq or by call id."""

    seq: int | None = Field(default=None, ge=1, le=INT_MAX,
                            description="The session's boundary seq (log and show list them).")
    call: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="The tool call id (tool_use_id) to go back to.")
    code_only: bool = Field(default=False, description="Only the files.")
    conversation_only: bool = Field(default=False, description="Only the conversation (a new "
                                    "session); the files stay.")
    dry_run: bool = Field(default=False, description="Only list the files and the conversation "
                          "turns a rewind would change.")


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


# -- the engine's runs ---------------------------------------------------------

_RUN_ID = "The engine run's id (the runs tool lists them)."


class RunIn(_In):
    workflow: PathText = Field(description="The workflow file (a Python file defining one "
                               "Workflow): absolute, or relative to the folder the server was "
                               "started in; it must be inside the served worktree.")
    run_id: Id | None = Field(default=None, description="Your own run id (default: a new one). "
                              "A run id already started for the same workflow is answered "
                              "with that run (`existing`), nothing done.")
    worktree: PathText | None = Field(default=None, description="The worktree the tasks work "
                                      "in; default: the served one.")
    max_turns: int | None = Field(default=None, ge=0, le=INT_MAX,
                                  description="Abort past this many turns.")
    max_tokens: int | None = Field(default=None, ge=0, le=INT_MAX,
                                   description="Abort past this many tokens.")
    max_cost: float | None = Field(default=None, ge=0, le=1e12,
                                   description="Abort past this cost.")


class AgentRunIn(_In):
    prompt: Annotated[str, Field(min_length=1, max_length=100_000)] = Field(
        description="What the agent is asked to do.")
    worktree: PathText | None = Field(default=None, description="The worktree the agent works "
                                      "in; default: the served one.")
    harness: Annotated[list[Annotated[str, Field(pattern="^(claude|codex|gemini)$")]],
                       Field(min_length=1, max_length=3)] = Field(
        default_factory=lambda: ["claude"], description="The harness chain: the next one "
        "takes over on a quota (claude, codex, gemini).")
    run_id: Id | None = Field(default=None, description="Your own run id (default: a new one). "
                              "A run id already started as this agent run is answered with "
                              "that run (`existing`), nothing done.")
    model: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="The model to ask the harness for.")
    max_turns: int | None = Field(default=None, ge=0, le=INT_MAX,
                                  description="Abort past this many turns.")
    max_tokens: int | None = Field(default=None, ge=0, le=INT_MAX,
                                   description="Abort past this many tokens.")
    max_cost: float | None = Field(default=None, ge=0, le=1e12,
                                   description="Abort past this cost (USD).")
    output_schema: dict[str, Any] | None = Field(default=None, description="A JSON schema the "
                                                 "final answer must satisfy.")


class ResumeIn(_In):
    run_id: Id = Field(description=_RUN_ID)
    force: bool = Field(default=False, description="Take the run over even if its owner "
                        "looks alive.")
    accept_workflow_change: bool = Field(default=False, description="Resume although the "
                                         "workflow's files changed (paths must not).")
    stale_after_ms: int = Field(default=15 * 60 * 1000, ge=0, le=INT_MAX,
                                description="A heartbeat older than this means the owner "
                                "is gone (as `resume --stale-after`, default 15 minutes).")


class ForkIn(_In):
    run_id: Id = Field(description="The run to fork (it is not changed).")
    node_id: Id = Field(description="The task whose checkpoint the new run starts from (it "
                        "runs again).")
    iteration: int | None = Field(default=None, ge=0, le=INT_MAX, description="Its iteration "
                                  "(default: the newest with checkpoints).")
    seq: int | None = Field(default=None, ge=1, le=INT_MAX, description="The checkpoint of its "
                            "newest attempt (default: the last; a pre-restore checkpoint is "
                            "never a fork's point).")
    new_run_id: Id | None = Field(default=None, description="The new run's id (default: a new "
                                  "one).")

