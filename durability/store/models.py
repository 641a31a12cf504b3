"""Plain records of the state layer."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Attempt", "AttemptKey", "Checkpoint", "Gap", "NewCheckpoint", "Recorded"]


@dataclass(frozen=True, order=True)
class AttemptKey:
    """One try of one task."""

    run_id: str
    node_id: str
    iteration: int = 0
    attempt: int = 1


@dataclass(frozen=True)
class NewCheckpoint:
    """What a capture hands the store to record."""

    key: AttemptKey
    commit_id: str
    worktree: str
    source: str
    request_id: str
    change_id: str | None = None
    operation_id: str | None = None
    tool_use_id: str | None = None
    label: str | None = None
    #: The harness that reported the call and, for a sub-agent, its identity.
    harness: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    #: The agent session the call belongs to, where the harness says.
    session_id: str | None = None


@dataclass(frozen=True)
class Recorded:
    """The store's answer: the seq that now names the captured state.

    ``deduped`` when the attempt's latest checkpoint already had this commit
    (no row added); ``replayed`` when the request id had been recorded before.
    """

    seq: int
    commit_id: str
    deduped: bool
    replayed: bool = False


@dataclass(frozen=True)
class _Row:
    """A row read back from the store; ``to_dict`` is JSON-ready."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _OfAttempt(_Row):
    """The key columns every attempt-level row starts with."""

    run_id: str
    node_id: str
    iteration: int
    attempt: int

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.run_id, self.node_id, self.iteration, self.attempt)


@dataclass(frozen=True)
class Checkpoint(_OfAttempt):
    seq: int
    commit_id: str
    change_id: str | None
    operation_id: str | None
    worktree: str
    source: str
    tool_use_id: str | None
    label: str | None
    request_id: str
    created_at_ms: int
    harness: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class Attempt(_OfAttempt):
    state: str
    started_at_ms: int
    finished_at_ms: int | None
    heartbeat_at_ms: int | None
    worktree: str | None
    jj_pointer: str | None
    error_json: str | None


@dataclass(frozen=True)
class Gap(_Row):
    """A capture that was asked for and could not be taken."""

    ts_ms: int
    run_id: str
    request_id: str
    reason: str
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    worktree: str | None = None
    source: str | None = None
    tool_use_id: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Session(_Row):
    """Everything recorded under one run id, whoever reported it (a harness
    hook's session, an engine run, a wrapper): what ``durability sessions``
    lists, so a user finds the run id to restore from."""

    run_id: str
    worktree: str | None
    first_ms: int
    last_ms: int
    checkpoints: int
    gaps: int
    #: The sources that captured (``hook``, ``watch``, ``wrap``...), comma-separated.
    sources: str
    #: The harnesses that reported its tool calls (``claude``, ``codex``, ``gemini``).
    harnesses: str = ""
