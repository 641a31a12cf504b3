"""A full disk, said as such.

libgit2 reports a failed write by what it could not find next ("index does
not contain fill.bin", "object not found", or an older message left in its
error slot), never by ``ENOSPC``; jj says "No space left on device (os error
28)" deep in its chain.  When a capture or restore fails, the file systems of
the worktree and its git store are looked at: one with (almost) no space left
is a ``disk-full`` error naming its mount point and what is free, whatever
the message said.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path

from durability.ground.errors import DiskFull

__all__ = ["LOW_SPACE", "disk_full"]

#: Below this many free bytes a failed write is taken as the disk being full.
LOW_SPACE = 1 << 20


def disk_full(exc: BaseException, paths: Iterable[Path | str]) -> DiskFull | None:
    """The ``disk-full`` error for ``exc`` when a file system under ``paths``
    is full (or ``exc`` is ``ENOSPC``/``EDQUOT`` itself), else None."""
    said = _says_full(exc)
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        free = st.f_bavail * st.f_frsize
        if free < LOW_SPACE or said:
            where = _mount_point(Path(path))
            # libgit2's message names what it could not find after the failed
            # write (or an older error): only the system's own words are kept.
            why = f" ({' '.join(str(exc).split())[:200]})" if isinstance(exc, OSError) else ""
            return DiskFull(f"no space left on device: {where} has {free} bytes free{why}")
    return None


def _says_full(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(seen) or "(os error 28)" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _mount_point(path: Path) -> str:
    """The mount point holding ``path`` (the device's top folder)."""
    try:
        path = path.resolve()
        dev = os.stat(path).st_dev
        while path.parent != path and os.stat(path.parent).st_dev == dev:
            path = path.parent
    except OSError:
        pass
    return str(path)
