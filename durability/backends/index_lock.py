"""Writing a private index one process at a time, and clearing a dead writer's lock.

libgit2 writes an index through ``<index>.lock`` (created exclusively, then
renamed over the index); a process killed between the two leaves that file
behind and every later write fails "the index is locked".  Whether such a
file is stale cannot be told from the file itself, and the worktree lock does
not tell it either: that lock belongs to one state folder, while the private
index belongs to the repository, so toolkits of two state folders (a
container and its host, a test run with a temporary home) may write one
index.

So every write of a private index is made holding an ``flock`` on a file
beside it, ``writer-<hash>.lock`` in the same git folder, and ``<index>.lock``
is removed only while holding that flock.  The kernel releases an ``flock``
when its holder dies, however it dies: a lock file found under the flock was
left by a writer that is gone, never by one still writing.  (A writer that
does not take the flock, such as an older toolkit, is not protected.)
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durability.ground import git_prescan
from durability.ground.errors import GitFailed

__all__ = ["WAIT_S", "Identity", "held", "identity", "writer_lock_path", "writing"]

log = logging.getLogger("durability.backends")

#: How long a write waits for another process's write of the same index
#: (a write takes milliseconds; a writer stopped for longer is reported).
WAIT_S = 10.0
_POLL_S = 0.01


def writer_lock_path(index: Path) -> Path:
    """The file whose ``flock`` every writer of ``index`` holds while it writes
    (named in ``ground.git_prescan``, which takes it before pygit2 is loaded)."""
    return Path(git_prescan.writer_lock(str(index)))


#: What tells one write of an index file from another (``identity``).
Identity = tuple[int, int, int, int, int]


def identity(index: Path) -> Identity | None:
    """The identity of the index file at ``index`` now, from one ``stat``:
    its device, inode, size and modification and change times (ns); None
    when there is no file (or it cannot be read).

    Every writer of an index replaces it whole (libgit2 and git write
    ``<index>.lock`` and rename it over the index; ``git_prescan`` places
    its copy the same way), so a write makes a file with an inode of its
    own: the one it replaces still exists while it is written.  A process
    that keeps an index open compares this with the identity of what it
    last read or wrote (``WorktreeIndex.written_elsewhere``).  What it
    cannot tell: two writes by others within one tick of the file clock
    after its own, the second reusing its file's inode at the same size."""
    try:
        st = os.stat(index)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _libgit2_lock(index: Path) -> Path:
    return index.with_name(index.name + ".lock")


@contextmanager
def writing(index: Path, wait_s: float | None = None) -> Iterator[bool]:
    """Hold the writer flock of ``index`` (waiting up to ``WAIT_S``), with a
    dead writer's ``<index>.lock`` cleared first; yields whether one was."""
    try:
        fd = os.open(writer_lock_path(index),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise GitFailed(f"cannot open the private index's writer lock "
                        f"{writer_lock_path(index)}: {exc}") from exc
    try:
        deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise GitFailed(f"the private index {index} is being written by another "
                                    "process; try again") from None
                time.sleep(_POLL_S)
        yield _clear(_libgit2_lock(index))
    finally:
        os.close(fd)  # releases the flock


def held(index: Path) -> bool:
    """Whether a live process holds the writer flock of ``index`` now."""
    try:
        fd = os.open(writer_lock_path(index), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _clear(lock: Path) -> bool:
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return False
    log.warning("removed the stale private index lock %s (left by a writer that was "
                "killed while writing it)", lock)
    return True
