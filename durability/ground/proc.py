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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Finished", "StreamFailed", "TimedOut", "kill_all", "kill_started_by", "last_words",
           "run", "stream"]

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


class StreamFailed(Exception):
    """A program whose output was streamed exited non-zero."""


def stream(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
           chunk: int = 1 << 20) -> Iterator[bytes]:
    """``argv``'s standard output, ``chunk`` bytes at a time as it comes, in
    bounded memory (a blob larger than memory can be written out); raises
    ``StreamFailed`` with its last words when it exits non-zero.  A caller
    that stops early (or ``kill_all``) kills it."""
    proc = subprocess.Popen(
        list(argv), env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    with _active_lock:
        _active[proc] = threading.get_ident()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        while True:
            data = os.read(proc.stdout.fileno(), chunk)
            if not data:
                break
            yield data
        err = proc.stderr.read().decode("utf-8", "replace")
        if proc.wait() != 0:
            raise StreamFailed(last_words(err) or f"exit {proc.returncode}")
    finally:
        if proc.poll() is None:
            _kill(proc)
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        with _active_lock:
            _active.pop(proc, None)


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
