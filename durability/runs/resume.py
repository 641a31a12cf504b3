"""Claiming a run for resume: the owner and heartbeat checks, and the
compare-and-swap that makes two racing claimants end with one winner.

A claimant may say when it was asked to resume (``since_ms``); a claim
somebody else took after that moment means it lost a race, which is
contention, not failure (``ClaimFailed``: quiet).
"""

from __future__ import annotations

import os

from durability.ground.store_errors import ClaimFailed, RunOwnerAlive, RunStillRunning
from durability.runs.fence import Claim, Owner, host_id
from durability.runs.run_rows import RunRow, Runs

__all__ = ["DEFAULT_STALE_AFTER_MS", "check_claimable", "claim_run", "pid_alive"]

#: An owner whose heartbeat is older than this is presumed gone (15 minutes:
#: longer than any pause of a healthy process, short enough to matter).
DEFAULT_STALE_AFTER_MS = 15 * 60 * 1000


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists on this machine."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; it belongs to someone else
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process nobody has reaped yet: gone, though ``kill(pid, 0)``
    still finds it (containers whose init never reaps keep these forever)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False  # no /proc (macOS): trust kill()
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("Z", "X")


def check_claimable(row: RunRow, *, now: int, stale_after_ms: int, force: bool,
                    since_ms: int | None = None, owner: Owner | None = None) -> None:
    """Raise unless ``row`` may be claimed now.

    A parked run always may.  A running one may when its heartbeat is stale,
    or its owner was on this machine and its process is gone; otherwise
    ``RunOwnerAlive`` (the process is alive) or ``RunStillRunning`` (a fresh
    heartbeat from elsewhere), unless ``force``.
    """
    raced = (since_ms is not None and row.claimed_at_ms is not None
             and row.claimed_at_ms >= since_ms
             and (owner is None or row.owner != owner.name or row.owner_pid != owner.pid))
    if raced:
        raise ClaimFailed(f"run {row.run_id} was claimed by {row.owner or 'another process'} "
                          "after this resume began")
    if force or row.state != "running" or row.owner is None:
        return
    if row.heartbeat_at_ms is None or now - row.heartbeat_at_ms >= stale_after_ms:
        return
    if row.owner_host == host_id() and row.owner_pid:
        if pid_alive(row.owner_pid):
            raise RunOwnerAlive(f"run {row.run_id} is owned by {row.owner} (pid "
                                f"{row.owner_pid}, alive); pass --force to take it over")
        return
    raise RunStillRunning(f"run {row.run_id} is owned by {row.owner}, whose heartbeat is "
                          f"{(now - row.heartbeat_at_ms) / 1000:.0f}s old; pass --force to "
                          "take it over")


def claim_run(runs: Runs, row: RunRow, *, owner: Owner, now: int, stale_after_ms: int,
              force: bool = False, since_ms: int | None = None) -> Claim:
    """Check ``row`` (as read) may be claimed, then take it with a
    compare-and-swap on the epoch read; ``ClaimFailed`` if it moved since."""
    check_claimable(row, now=now, stale_after_ms=stale_after_ms, force=force,
                    since_ms=since_ms, owner=owner)
    claim = runs.claim(row.run_id, expected_epoch=row.claim_epoch, owner=owner)
    if claim is None:
        raise ClaimFailed(f"run {row.run_id} was claimed by another process first")
    return claim
