"""The service's lock and pid record: how a running service is found when
its socket is not (removed by a tmp cleaner, a cleared runtime folder).

A service holds an ``flock`` on ``<socket>.lock`` for as long as it lives (a
second service for the same socket cannot start), and writes its pid and
the kernel's start time of that pid into the same file.  A reader believes
the record only while that pid runs with that start time (a pid reused by
another program has another one), so a record left by a service killed with
SIGKILL names nobody.  The file is never truncated by anyone but its holder.

The same record is kept in the state folder too, ``service-<hash of the
socket path>.pid``: the socket's folder may go with everything in it and be
impossible to make again (a runtime folder removed at logout, or taken by a
file), and the service must still be found by ``status``, ``stop`` and
``doctor``.  It is written whole (a rename) and removed by its service when
it stops; a reader applies the same test to it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from durability.ground.errors import ServiceRunning
from durability.ground.fsutil import replace_file

__all__ = ["ServiceLock", "forget_state_record", "lock_path", "recorded_pid",
           "state_record_path", "write_state_record"]


def lock_path(socket_path: Path) -> Path:
    return socket_path.with_name(socket_path.name + ".lock")


def state_record_path(state_dir: Path, socket_path: Path) -> Path:
    """The pid record, in the state folder, of the service on ``socket_path``."""
    digest = hashlib.sha256(os.fsencode(socket_path)).hexdigest()[:16]
    return state_dir / f"service-{digest}.pid"


def _record_line() -> str:
    pid = os.getpid()
    return f"{pid} {_start_time(pid) or '-'}\n"


def write_state_record(state_dir: Path, socket_path: Path) -> None:
    """Record this process as the service on ``socket_path`` in the state
    folder (best effort: without it the socket and its lock still find it)."""
    path = state_record_path(state_dir, socket_path)
    try:
        replace_file(path, _record_line().encode(), mode=0o600)
    except OSError:
        pass

def forget_state_record(state_dir: Path, socket_path: Path) -> None:
    """Remove this process's record from the state folder (another
    service's, written since, stays)."""
    path = state_record_path(state_dir, socket_path)
    try:
        if _read_record(path) == _record_line().split():
            path.unlink()
    except OSError:
        pass


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
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _record_line().encode(), 0)
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


def recorded_pid(socket_path: Path, state_dir: Path | None = None) -> int | None:
    """The pid of this user's live service recorded for ``socket_path``, if
    any, in its lock file or else in ``state_dir`` (see the module's
    docstring for when a record is believed)."""
    pid = _believed(_read_record(lock_path(socket_path)))
    if pid is None and state_dir is not None:
        pid = _believed(_read_record(state_record_path(state_dir, socket_path)))
    return pid


def _read_record(path: Path) -> list[str] | None:
    """The words of the record at ``path``, if the file is this user's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return None
        return os.read(fd, 100).decode("ascii", "replace").split()
    except OSError:
        return None
    finally:
        os.close(fd)


def _believed(text: list[str] | None) -> int | None:
    if text is None or len(text) != 2 or not text[0].isdigit():
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
