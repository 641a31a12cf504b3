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
    │   ├── UnreadablePath      unreadable-path   jj could not snapshot around a path it cannot read
    │   └── LockTimeout         timeout           the worktree lock was not free in time
    ├── ServiceError            service-error
    │   ├── ServiceRunning      service-running   a live service already owns the socket
    │   ├── ServiceUnreachable  service-unreachable  no service answers on the socket
    │   │   ├── ConnectionLost  service-unreachable  it took the request and went away
    │   │   └── ServiceBusy     service-busy      over its connection limits: capture here
    │   ├── ServiceTimeout      timeout           it did not answer in the time allowed
    │   ├── InsecurePath        insecure-path     socket or spool folder not private
    │   └── ProtocolError       bad-request / request-too-large / peer-refused
    └── RestoreError            restore-verify-failed / restore-conflict (a file no
                                checkpoint holds in the way: nothing was changed; or a
                                symlink met where a folder goes: stopped, never followed)
                                / restore-would-unignore (its .gitignore files would
                                stop ignoring files no checkpoint holds: nothing changed)

The store's errors (``durability.store``: ``store-unavailable``, ``not-found``)
pass through unchanged.
The service's client (``durability.ground.client``) raises these classes too, and
``from_code`` turns a code that crossed the socket back into one of them.

Exit statuses come from one table, ``_EXIT_CODES``, looked up by code: the
code decides, not the class that carried it (a ``store-unavailable`` is 6
whether the store refused a read or a capture).  Codes not in the table fall
back by family (capture 5, service 4) and then to 1.
"""

from __future__ import annotations

__all__ = [
    "GAP_REASONS",
    "CaptureError",
    "ConnectionLost",
    "CredentialRefused",
    "DiskFull",
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
    "PathSwapped",
    "PathTooLong",
    "ProtocolError",
    "RestoreError",
    "ServiceBusy",
    "ServiceError",
    "ServiceRunning",
    "ServiceTimeout",
    "ServiceUnreachable",
    "UnreadablePath",
    "WorktreeMissing",
    "exit_code",
    "from_code",
]

#: Stable reasons a gap may carry.
GAP_REASONS = frozenset({
    "jj-missing", "jj-too-old", "not-a-jj-repo", "worktree-missing", "jj-failed",
    "jj-timeout", "timeout", "service-unreachable", "bad-hook-input", "store-unavailable",
    # The watcher could not rely on inotify (limit reached, queue overflow) and
    # polled or captured the whole tree instead.
    "watch-degraded",
    # A settle window was open (events seen, not yet captured) when its
    # watcher died; found and filed when a service or foreground watch starts.
    "watch-window-missed",
    "internal-error", "not-a-repo", "invalid-backend", "git-failed",
    # A DURABILITY_*_MS setting is not a usable number (the hook names it).
    "invalid-value",
    # A capture left a path out (its checkpoint, if any, holds the rest):
    # the path cannot be read, or jj refused a new file over its size limit.
    "unreadable-path", "file-too-large",
    # A checkpoint was not on a remote of its worktree within
    # DURABILITY_REPLICATION_BOUND_MS of its capture (docs/how-to/remote.md).
    "replication-failed",
    # A checkpoint holding a file that matches the secret patterns (or with
    # one in the history its push carries) is not pushed (docs/how-to/remote.md).
    "secret-withheld",
    # A tool call was announced (the harness's pre-call hook) and no post-call
    # hook ever came for it: killed mid-call (durability/gaps/calls.py).
    "call-unfinished",
    # A path longer than the system lets a path string be (PATH_MAX), which
    # jj cannot snapshot (its capture fails, naming the path).
    "path-too-long",
    # jj's snapshot read below a folder that was a symlink by its end (a
    # folder swapped during the capture): nothing is recorded.
    "path-swapped",
    # A write of a capture or restore failed on a file system with no space
    # left (libgit2 and jj report it by what they could not find next).
    "disk-full",
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


class CredentialRefused(InvalidInput):
    """A remote URL holding a credential (docs/how-to/remote.md): refused, never stored."""

    code = "remote-credential"


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


class UnreadablePath(CaptureError):
    code = "unreadable-path"


class PathTooLong(CaptureError):
    """A path past the system's limit for a path string (PATH_MAX): jj
    cannot snapshot it, so its capture fails and a restore refuses to write
    one into a jj worktree."""

    code = "path-too-long"


class PathSwapped(CaptureError):
    """A folder jj's snapshot read was swapped for a symlink (or a file)
    during it: what jj took from there may be a state no path had."""

    code = "path-swapped"


class DiskFull(CaptureError):
    """The worktree's or its git store's file system has no space left."""

    code = "disk-full"


class LockTimeout(CaptureError):
    code = "timeout"


class ServiceError(DurabilityError):
    code = "service-error"


class ServiceRunning(ServiceError):
    code = "service-running"


class ServiceUnreachable(ServiceError):
    code = "service-unreachable"


class ConnectionLost(ServiceUnreachable):
    """The service accepted the request and went away before answering."""


class ServiceBusy(ServiceUnreachable):
    """The service is over its connection limits and refused this one: for a
    caller, as good as no service (capture in process)."""

    code = "service-busy"


class ServiceTimeout(ServiceError):
    """The service did not answer within the time allowed.  Its code is the
    ``timeout`` gap reason, and it exits as a capture that timed out."""

    code = "timeout"


class InsecurePath(ServiceError):
    code = "insecure-path"


class ProtocolError(ServiceError):
    code = "bad-request"


class RestoreError(DurabilityError):
    code = "restore-verify-failed"


#: The CLI's exit status of every code: the only place exit statuses come from.
_EXIT_CODES = {
    "error": 1,
    "internal-error": 1,
    "invalid-value": 2,
    "not-found": 3,
    # `durability rewind`: the boundary's checkpoint was dropped by gc (its
    # conversation half still runs, docs/decisions/0057-boundaries-under-gc-and-forget.md).
    "checkpoint-collected": 3,
    # An optional extra the command needs is not installed (`browse`: tui;
    # `mcp`: mcp).
    "missing-extra": 8,
    # The service and its protocol.
    "service-error": 4,
    "service-running": 4,
    "service-unreachable": 4,
    "insecure-path": 4,
    "bad-request": 4,
    "request-too-large": 4,
    "peer-refused": 4,
    "service-busy": 4,
    # A capture that could not be taken (each is also a gap reason).
    "jj-missing": 5,
    "jj-too-old": 5,
    "not-a-jj-repo": 5,
    "not-a-repo": 5,
    "invalid-backend": 5,
    "git-failed": 5,
    "worktree-missing": 5,
    "jj-failed": 5,
    "jj-timeout": 5,
    "timeout": 5,
    "unreadable-path": 5,
    "file-too-large": 5,
    "path-too-long": 5,
    "path-swapped": 5,
    "disk-full": 5,
    "store-unavailable": 6,
    # `durability migrate`: the copy does not hold the source's rows (a store
    # failure, as the one above).
    "copy-mismatch": 6,
    "restore-verify-failed": 7,
    "restore-conflict": 7,
    # A restore whose .gitignore files would let captures record ignored files.
    "restore-would-unignore": 7,
    # A push to or fetch from a checkpoint remote failed (docs/how-to/remote.md).
    "remote-failed": 9,
    "replication-failed": 9,
    "secret-withheld": 9,
    # A remote URL holding a password or token (use git's credential helpers).
    "remote-credential": 2,
    # Layer 1 runs (engine codes).
    "RUN_OWNER_ALIVE": 10,
    "RUN_STILL_RUNNING": 11,
    "RESUME_METADATA_MISMATCH": 12,
    "WORKFLOW_INVALID": 13,
    "RUN_NOT_ACTIVE": 14,
    "BUDGET_TURNS_EXCEEDED": 15,
    "BUDGET_TOKENS_EXCEEDED": 15,
    "BUDGET_COST_EXCEEDED": 15,
    # An isolated task's tree did not merge into the shared worktree.
    "WORKTREE_CONFLICT": 16,
    "WORKTREE_MERGE_FAILED": 16,
    # `durability rewind`: a conversation in a format not tested (its code
    # half still runs, docs/how-to/rewind.md).
    "conversation-unsupported": 17,
    # Lost a race for a run: contention, not failure (EX_TEMPFAIL, said quietly).
    "RUN_RESUME_CLAIM_FAILED": 75,
    "RUN_RESUME_CLAIM_LOST": 75,
}

#: Exit status of ``durability doctor`` when a check failed (no error is raised).
CHECK_FAILED_EXIT = 1


def exit_code(error: BaseException) -> int:
    """The CLI's exit status for an error: the table by code, then by family."""
    code = getattr(error, "code", None)
    # The code decides before the class: a capture whose record could not be
    # written is store-unavailable (6), as documented, not a capture error (5).
    if isinstance(code, str) and code in _EXIT_CODES:
        return _EXIT_CODES[code]
    if isinstance(error, CaptureError):
        return 5
    if isinstance(error, ServiceError):
        return 4
    return 1


_SERVICE_CODES = {"service-running": ServiceRunning, "service-unreachable": ServiceUnreachable,
                  "service-busy": ServiceBusy,
                  "insecure-path": InsecurePath, "bad-request": ProtocolError,
                  "request-too-large": ProtocolError, "peer-refused": ProtocolError}


def from_code(code: str, message: str) -> Exception:
    """The error a code names, for a code that crossed the socket or a file:
    a capture code is a ``CaptureError``, a service code its ``ServiceError``,
    ``not-found`` and ``store-unavailable`` the engine's, a restore code a
    ``RestoreError``, anything else a ``DurabilityError`` with that code."""
    if code in ("not-found", "store-unavailable"):
        from durability.ground.store_errors import (  # lazily: the hook imports us
            NotFound,
            StoreUnavailable,
        )

        return NotFound(message) if code == "not-found" else StoreUnavailable(message)
    if code in _SERVICE_CODES:
        return _SERVICE_CODES[code](message, code=code)
    if code.startswith("restore-"):
        return RestoreError(message, code=code)
    if code in GAP_REASONS:
        return CaptureError(message, code=code)
    return DurabilityError(message, code=code)
