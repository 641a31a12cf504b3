"""Running external programs: an argument list, never a shell, and a timeout
that kills the whole process group.

The hook's watchdog calls ``kill_all`` before it gives up, so no jj it started
outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Finished", "TimedOut", "kill_all", "kill_started_by", "last_words", "run"]

#: Each program running from ``run``, with the thread that started it.
_active: dict[subprocess.Popen[bytes], int] = {}
_active_lock = threading.Lock()


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str


class TimedOut(Exception):
    """The program ran past its timeout and was killed."""


def run(
    argv: Sequence[str],
    *,
    cwd: str | None = None,
    timeout: float,
    env: Mapping[str, str] | None = None,
    hold: Sequence[int] = (),
) -> Finished:
    """Run ``argv`` to completion; raise ``TimedOut`` after ``timeout`` seconds.

    ``hold``: descriptors of ``flock``-ed locks the program inherits (and
    its own children after it), so that the lock stays taken while it runs
    even if this process is killed first: a program started in a session
    of its own outlives a ``kill -9`` of its parent."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, so a timeout kills its children too
        pass_fds=tuple(hold),
    )
    with _active_lock:
        _active[proc] = threading.get_ident()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.communicate()
        raise TimedOut(f"{argv[0]} ran past {timeout:g}s and was killed") from None
    finally:
        with _active_lock:
            _active.pop(proc, None)
    return Finished(
        proc.returncode,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def last_words(stderr: str, lines: int = 3, limit: int = 500) -> str:
    """A program's last ``lines`` non-blank lines of ``stderr``, on one line:
    what a one-line error message can carry of why it failed."""
    kept = [" ".join(ln.split()) for ln in stderr.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)[:limit]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every program still running from ``run`` (used before exiting)."""
    with _active_lock:
        procs = list(_active)
    for proc in procs:
        _kill(proc)


def kill_started_by(thread_id: int) -> int:
    """Kill the process group of every program still running from a ``run``
    that thread ``thread_id`` called (a stopping replicator's push); how many."""
    with _active_lock:
        procs = [p for p, t in _active.items() if t == thread_id]
    for proc in procs:
        _kill(proc)
    return len(procs)
