"""Errors of the state store and the workflow runner (``EngineError``).

Standard library only, in the ground: the hook's error path
(``errors.from_code``) turns a code that crossed the socket back into one of
these without importing the store.

Hierarchy::

    EngineError                 base; every error carries a stable ``code``
    ├── StoreUnavailable        "store-unavailable": the database cannot be
    │                           opened or written (disk full, locked too long,
    │                           permissions, corruption)
    ├── NotFound                "not-found": a run, attempt or checkpoint that
    │                           does not exist
    ├── RecordRefused           "record-refused": a checkpoint whose request is
    │                           already on record as a gap
    ├── InvalidValue            "invalid-value": a value that fails validation
    │   └── CredentialInURL     "remote-credential": a remote URL holding a credential
    ├── CopyMismatch            "copy-mismatch": a store copied into another does
    │                           not hold the same rows (``durability migrate``)
    ├── WorkflowInvalid         "WORKFLOW_INVALID": a workflow file that cannot be
    │                           loaded or declares a bad graph
    ├── RunNotActive            "RUN_NOT_ACTIVE": pause/cancel of a run that is over
    ├── WorktreeConflict        "WORKTREE_CONFLICT": an isolated task's tree does
    │                           not merge into the shared worktree
    ├── ResumeRefused           a resume that must not go ahead
    │   ├── RunOwnerAlive       "RUN_OWNER_ALIVE": the owner's process is alive
    │   ├── RunStillRunning     "RUN_STILL_RUNNING": its heartbeat is fresh
    │   └── ResumeMetadataMismatch  "RESUME_METADATA_MISMATCH": the workflow,
    │                           its modules, its path or the repository changed
    ├── ClaimContention         lost a race for a run; ``quiet``: not a failure
    │   ├── ClaimFailed         "RUN_RESUME_CLAIM_FAILED": another claimed first
    │   └── ClaimLost           "RUN_RESUME_CLAIM_LOST": another took it over
    ├── RunFailed               the run ended failed; its code is the cause
    │                           (TASK_FAILED, OUTPUT_INVALID, APPROVAL_DENIED,
    │                           LOOP_LIMIT, BUDGET_<LIMIT>_EXCEEDED, ...)
    └── TaskSignal              raised inside a task to end its attempt
        ├── TaskStopped         "RUN_CANCELLED" / "RUN_CLAIM_LOST": told to stop
        ├── BudgetExceeded      "BUDGET_TURNS_EXCEEDED", "BUDGET_TOKENS_EXCEEDED",
        │                       "BUDGET_COST_EXCEEDED": the first limit crossed
        └── QuotaExhausted      "QUOTA_EXHAUSTED": the provider's quota ran out
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "ClaimContention",
    "ClaimFailed",
    "ClaimLost",
    "CopyMismatch",
    "EngineError",
    "InvalidValue",
    "NotFound",
    "QuotaExhausted",
    "RecordRefused",
    "ResumeMetadataMismatch",
    "ResumeRefused",
    "RunFailed",
    "RunNotActive",
    "RunOwnerAlive",
    "RunStillRunning",
    "StoreUnavailable",
    "TaskSignal",
    "TaskStopped",
    "WorkflowInvalid",
    "WorktreeConflict",
]


class EngineError(Exception):
    """Base of every error raised by ``engine``."""

    code = "engine-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StoreUnavailable(EngineError):
    code = "store-unavailable"


class NotFound(EngineError):
    code = "not-found"


class RecordRefused(EngineError):
    """A checkpoint the store will not record, so that each request is on
    record once: its request id is already a gap, with reason ``gap_reason``."""

    code = "record-refused"

    def __init__(self, message: str, *, gap_reason: str) -> None:
        super().__init__(message)
        self.gap_reason = gap_reason


class InvalidValue(EngineError):
    code = "invalid-value"


class CredentialInURL(InvalidValue):
    """A remote URL holding a credential: never stored (docs/how-to/remote.md)."""

    code = "remote-credential"


class CopyMismatch(EngineError):
    code = "copy-mismatch"


class WorkflowInvalid(EngineError):
    code = "WORKFLOW_INVALID"


class RunNotActive(EngineError):
    code = "RUN_NOT_ACTIVE"


class WorktreeConflict(EngineError):
    """An isolated task's tree and the shared worktree changed the same
    paths differently since the task began: nothing was merged."""

    code = "WORKTREE_CONFLICT"


class ResumeRefused(EngineError):
    code = "RESUME_REFUSED"
    #: set by ``resume --quiet`` (and under ``supervise``): exit with the
    #: status, print nothing
    quiet = False


class RunOwnerAlive(ResumeRefused):
    code = "RUN_OWNER_ALIVE"


class RunStillRunning(ResumeRefused):
    code = "RUN_STILL_RUNNING"


class ResumeMetadataMismatch(ResumeRefused):
    code = "RESUME_METADATA_MISMATCH"


class ClaimContention(EngineError):
    """Another process won the run.  Contention is not failure: the CLI exits
    with its own status and says nothing."""

    code = "RUN_RESUME_CLAIM_FAILED"
    quiet = True


class ClaimFailed(ClaimContention):
    code = "RUN_RESUME_CLAIM_FAILED"


class ClaimLost(ClaimContention):
    code = "RUN_RESUME_CLAIM_LOST"


class RunFailed(EngineError):
    """The run ended ``failed``; ``code`` names the cause."""

    def __init__(self, message: str, *, code: str, node_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.node_id = node_id


class TaskSignal(EngineError):
    """Raised inside a task to end its attempt for a reason the engine knows."""


class TaskStopped(TaskSignal):
    code = "RUN_CANCELLED"

    def __init__(self, message: str, *, code: str = "RUN_CANCELLED") -> None:
        super().__init__(message)
        self.code = code


class BudgetExceeded(TaskSignal):
    def __init__(self, limit: str, used: float, allowed: float) -> None:
        super().__init__(f"budget exceeded: {limit} used {used:g} of {allowed:g}")
        self.code = f"BUDGET_{limit.upper()}_EXCEEDED"
        self.limit = limit


class QuotaExhausted(TaskSignal):
    """A provider's quota ran out; ``reset_at_ms`` is when it comes back
    (None when unknown: the run then waits for a person)."""

    code = "QUOTA_EXHAUSTED"

    def __init__(self, message: str = "provider quota exhausted", *,
                 reset_at_ms: int | None = None) -> None:
        super().__init__(message)
        self.reset_at_ms = reset_at_ms
