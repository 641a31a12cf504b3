"""Errors of the durability layer, each with a stable string code.

Codes cross the socket, the hook, the gap spool and the CLI's JSON output, so
they never change once released.  Hierarchy::

    DurabilityError (code varies)
    ├── InvalidInput            invalid-value     a run id, node id, path or option
    ├── CaptureError            a capture could not be taken; its code is the gap reason
    │   ├── JjMissing           jj-missing
    │   ├── JjTooOld            jj-too-old
    │   ├── NotAJjRepo          not-a-jj-repo     DURABILITY_BACKEND=jj, and no jj working copy
    │   ├── NotARepo            not-a-repo        neither a jj working copy nor a git working tree
    │   ├── InvalidBackend      invalid-backend   DURABILITY_BACKEND is neither jj nor git
    │   ├── GitFailed           git-failed        the git backend (pygit2) failed
    │   ├── WorktreeMissing     worktree-missing
    │   ├── JjFailed            jj-failed
    │   ├── JjTimeout           jj-timeout
    │   └── LockTimeout         timeout           the worktree lock was not free in time
    ├── ServiceError
    │   ├── ServiceRunning      service-running   a live service already owns the socket
    │   ├── ServiceUnreachable  service-unreachable
    │   ├── InsecurePath        insecure-path     socket or spool folder not private
    │   └── ProtocolError       bad-request / request-too-large / peer-refused
    └── RestoreError            restore-verify-failed / restore-conflict (a file no
                                checkpoint holds in the way: nothing was changed; or a
                                symlink met where a folder goes: stopped, never followed)

``engine`` errors (``store-unavailable``, ``not-found``) pass through unchanged;
``exit_code`` maps every code to the CLI's exit status in one place.
"""

from __future__ import annotations

__all__ = [
    "GAP_REASONS",
    "CaptureError",
    "DurabilityError",
    "GitFailed",
    "InsecurePath",
    "InvalidBackend",
    "InvalidInput",
    "JjFailed",
    "JjMissing",
    "JjTimeout",
    "JjTooOld",
    "LockTimeout",
    "NotAJjRepo",
    "NotARepo",
    "ProtocolError",
    "RestoreError",
    "ServiceError",
    "ServiceRunning",
    "ServiceUnreachable",
    "WorktreeMissing",
    "exit_code",
]

#: Stable reasons a gap may carry.
GAP_REASONS = frozenset({
    "jj-missing", "jj-too-old", "not-a-jj-repo", "worktree-missing", "jj-failed",
    "jj-timeout", "timeout", "service-unreachable", "bad-hook-input", "store-unavailable",
    # The watcher could not rely on inotify (limit reached, queue overflow) and
    # polled or captured the whole tree instead.
    "watch-degraded",
    "internal-error", "not-a-repo", "invalid-backend", "git-failed",
})


class DurabilityError(Exception):
    """Base of every error raised by ``durability``."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class InvalidInput(DurabilityError):
    code = "invalid-value"


class CaptureError(DurabilityError):
    code = "jj-failed"


class JjMissing(CaptureError):
    code = "jj-missing"


class JjTooOld(CaptureError):
    code = "jj-too-old"


class NotAJjRepo(CaptureError):
    code = "not-a-jj-repo"


class NotARepo(CaptureError):
    code = "not-a-repo"


class InvalidBackend(CaptureError):
    code = "invalid-backend"


class GitFailed(CaptureError):
    code = "git-failed"


class WorktreeMissing(CaptureError):
    code = "worktree-missing"


class JjFailed(CaptureError):
    code = "jj-failed"


class JjTimeout(CaptureError):
    code = "jj-timeout"


class LockTimeout(CaptureError):
    code = "timeout"


class ServiceError(DurabilityError):
    code = "service-error"


class ServiceRunning(ServiceError):
    code = "service-running"


class ServiceUnreachable(ServiceError):
    code = "service-unreachable"


class InsecurePath(ServiceError):
    code = "insecure-path"


class ProtocolError(ServiceError):
    code = "bad-request"


class RestoreError(DurabilityError):
    code = "restore-verify-failed"


_EXIT_CODES = {
    "invalid-value": 2,
    "not-found": 3,
    "service-running": 4,
    "service-unreachable": 4,
    "insecure-path": 4,
    "bad-request": 4,
    "request-too-large": 4,
    "peer-refused": 4,
    "store-unavailable": 6,
    "restore-verify-failed": 7,
    "restore-conflict": 7,
    # Layer 1 runs (engine codes).
    "RUN_OWNER_ALIVE": 10,
    "RUN_STILL_RUNNING": 11,
    "RESUME_METADATA_MISMATCH": 12,
    "WORKFLOW_INVALID": 13,
    "RUN_NOT_ACTIVE": 14,
    "BUDGET_TURNS_EXCEEDED": 15,
    "BUDGET_TOKENS_EXCEEDED": 15,
    "BUDGET_COST_EXCEEDED": 15,
    # Lost a race for a run: contention, not failure (EX_TEMPFAIL, said quietly).
    "RUN_RESUME_CLAIM_FAILED": 75,
    "RUN_RESUME_CLAIM_LOST": 75,
}


def exit_code(error: BaseException) -> int:
    """The CLI's exit status for an error: one table for every command."""
    from engine.errors import EngineError  # lazily: the hook imports this module

    code = getattr(error, "code", None)
    if isinstance(error, CaptureError):
        return 5
    if isinstance(error, DurabilityError | EngineError) and code in _EXIT_CODES:
        return _EXIT_CODES[code]
    return 1
