"""A writer that strikes exactly while a capture reads a file.

A fanotify permission event (``FAN_OPEN_PERM``) holds every ``open`` of a
file in the watched folder until this process answers.  The racer changes
the file (truncates it, deletes it, puts a folder or a symlink in its place)
and only then lets the open go on: the reader has already listed and stat'ed
the path, so it sees the change in the middle of its read, every time.  That
turns the race a busy agent causes now and then into a deterministic one.

The racer changes files only by path (truncate, unlink, rename, mkdir,
symlink) and never opens them, since an open of its own would wait on itself.
fanotify needs CAP_SYS_ADMIN: tests that use it skip without it.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["racing"]

_FAN_CLASS_CONTENT = 0x4
_FAN_CLOEXEC = 0x1
_FAN_MARK_ADD = 0x1
_FAN_OPEN_PERM = 0x10000
_FAN_EVENT_ON_CHILD = 0x08000000
_FAN_ALLOW = 0x1
_AT_FDCWD = -100
# struct fanotify_event_metadata: event_len, vers, reserved, metadata_len,
# mask, fd, pid.
_META = struct.Struct("=IBBHQii")
_RESPONSE = struct.Struct("=iI")

_libc = ctypes.CDLL(None, use_errno=True)


@contextmanager
def racing(folder: Path, strike: Callable[[Path], bool]) -> Iterator[list[Path]]:
    """While the block runs, call ``strike(path)`` before each open of a
    file directly in ``folder`` is let through; it returns whether it
    changed something.  Yields the list of paths struck, in order."""
    fan = _libc.fanotify_init(_FAN_CLASS_CONTENT | _FAN_CLOEXEC, os.O_RDONLY)
    if fan < 0:
        pytest.skip(f"fanotify unavailable: {os.strerror(ctypes.get_errno())}")
    struck: list[Path] = []
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(fan, strike, struck, stop), daemon=True)
    try:
        rc = _libc.fanotify_mark(fan, _FAN_MARK_ADD,
                                 ctypes.c_uint64(_FAN_OPEN_PERM | _FAN_EVENT_ON_CHILD),
                                 _AT_FDCWD, os.fsencode(folder))
        if rc < 0:
            pytest.skip(f"fanotify_mark failed: {os.strerror(ctypes.get_errno())}")
        thread.start()
        yield struck
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(10)
        os.close(fan)


def _serve(fan: int, strike: Callable[[Path], bool], struck: list[Path],
           stop: threading.Event) -> None:
    while not stop.is_set():
        # A short poll so the thread notices ``stop`` (no thread outlives a test).
        ready, _, _ = select.select([fan], [], [], 0.05)
        if not ready:
            continue
        buf = os.read(fan, 4096)
        for offset in range(0, len(buf), _META.size):
            _len, _vers, _res, _mlen, _mask, fd, _pid = _META.unpack_from(buf, offset)
            try:
                path = Path(os.readlink(f"/proc/self/fd/{fd}"))
                if strike(path):
                    struck.append(path)
            finally:
                # Always let the open go on, or the reader hangs.
                os.write(fan, _RESPONSE.pack(fd, _FAN_ALLOW))
                os.close(fd)
