"""The service's lock and pid record: how a running service is found when
its socket is not (removed by a tmp cleaner, a cleared runtime folder).

A service holds an ``flock`` on ``<socket>.lock`` for as long as it lives (a
second service for the same socket cannot start), and writes its pid and
the kernel's start time of that pid into the same file.  A reader believes
the record only while that pid runs with that start time (a pid reused by
another program has another one), so a record left by a service killed with
SIGKILL names nobody.  The file is never truncated by anyone but its holder.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from durability.errors import ServiceRunning

__all__ = ["ServiceLock", "lock_path", "recorded_pid"]


def lock_path(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".lock")


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    return fields[19].decode()


class ServiceLock:
    """The lock a service holds on its socket, with its pid record."""

    def __init__(self, socket_path: Path) -> None:
        self.path = lock_path(socket_path)
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServiceRunning(f"a service is already running on "
                                 f"{self.path.with_suffix('')}") from None
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        pid = os.getpid()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{pid} {_start_time(pid) or '-'}\n".encode(), 0)
        except OSError:
            pass  # no record: the socket and the kernel still find it

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def still_ours(self) -> bool:
        """Whether the lock file at the path is the one this lock holds (not
        deleted, nor replaced by another service's)."""
        if self._fd is None:
            return False
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except OSError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)  # the flock goes with the last descriptor


def recorded_pid(socket_path: Path) -> int | None:
    """The pid of this user's live service recorded for ``socket_path``, if
    any (see the module's docstring for when a record is believed)."""
    try:
        fd = os.open(lock_path(socket_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return None
        text = os.read(fd, 100).decode("ascii", "replace").split()
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(text) != 2 or not text[0].isdigit():
        return None
    pid = int(text[0])
    if pid <= 1:
        return None
    started = _start_time(pid)
    if started is not None:
        return pid if started == text[1] else None
    if os.path.isdir("/proc"):
        return None  # Linux, and no such pid (or a zombie)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return None  # another user's process: never ours
    return pid
