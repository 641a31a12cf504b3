"""Writing a file whole: a temporary file beside it, renamed over it.

Used by ``install-hook``: never through a symlink at the temporary name,
never leaving half a file for a reader to see.  (Restores write through
``backends.confined``, relative to folder descriptors.)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(path: Path, data: bytes, *, mode: int, exact_mode: bool = False,
                 sync: bool = False) -> None:
    """Write ``data`` to ``path`` whole, so a reader sees the old file or the new.

    ``mode`` is the creation mode, which the umask trims (as for a file git
    checks out); with ``exact_mode`` it is set as given instead (to keep the
    mode of the file replaced).  ``sync`` flushes the data before the rename,
    so a crash cannot leave an empty file where a good one was.
    """
    # A random part: a temporary left by a killed process with a recycled pid
    # must not block the next write (the open is O_EXCL).
    tmp = path.with_name(f".{path.name}.durability-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode)
    try:
        try:
            _write_all(fd, data)
            if exact_mode:
                os.fchmod(fd, mode)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
