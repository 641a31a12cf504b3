"""Paths that change while a capture reads them.

Agents, builds and editors keep writing while a capture runs: a file grows,
shrinks, vanishes, becomes a folder or a symlink, or is replaced by a rename
between the moment a backend lists it and the moment it reads it.  That is
the agent being busy, not a path we could not look at, so it must never fail
a capture nor become a gap.  Both backends retry such a path (git) or such a
snapshot (jj) up to ``MAX_TRIES`` times, taking what is on disk each time;
when the tree is still moving after that, the capture keeps what it last
read consistently and the next capture (the watcher's next settle, the next
hook) takes the rest.  See docs/RELIABILITY.md, "Writers during a capture".
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

__all__ = [
    "MAX_RETRIES_PER_CAPTURE", "MAX_TRIES", "StatKey", "is_git_read_race", "is_snapshot_race",
    "pause", "stat_key",
]

#: Tries per path (git) or per jj command: enough for a writer that touches
#: a file a few times in a row, bounded so a path rewritten in a loop cannot
#: hold a capture (and the worktree lock) for long.
MAX_TRIES = 5
#: Retries (git: of all paths together) one capture may spend: a build
#: rewriting hundreds of files at once must not hold the capture for
#: hundreds of times 30 ms.  Past it, a moving path gets one read only.
MAX_RETRIES_PER_CAPTURE = 24
# The pause before try n (n >= 2) is _PAUSE_S * 2**(n-2): 2, 4, 8, 16 ms,
# 30 ms in all; a burst of writes (a formatter, a checkout) is usually over
# by then, and the whole wait stays far below any capture timeout.
_PAUSE_S = 0.002

StatKey = tuple[int, int, int, int, int, int]


def stat_key(path: Path) -> StatKey | None:
    """What identifies one version of ``path`` (not followed if a symlink):
    None when it is gone.  Any write, truncate, chmod, rename over it or
    change of kind changes the key (ctime moves on each of them)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def pause(attempt: int) -> None:
    """Sleep before retry number ``attempt`` (1 for the first retry)."""
    time.sleep(_PAUSE_S * 2 ** (attempt - 1))


# jj 0.46 reports a path that changed under its snapshot as, for example,
# "Failed to snapshot the working copy ... Failed to stat file <p>: No such
# file or directory (os error 2)"; also "Failed to read directory", "Failed
# to read symlink", "Failed to open file" and "Error accessing ignore
# patterns file <dir>/.gitignore" with ENOENT (2), ENOTDIR (20), EISDIR (21),
# EINVAL (22, readlink of what is now a file) or ELOOP (40, a folder swapped
# for a symlink).  A file that became a folder while jj hashed it can also
# make jj panic ("panicked at lib/src/git_backend.rs ... Os { code: 21, kind:
# IsADirectory ...").  Permission denied (13) is not a race: that is the
# unreadable-path handling in ``jj``.
_RACE_ERRNO = re.compile(r"\(os error (2|20|21|22|40)\)|Os \{ code: (2|20|21|22|40),")
_RACE_CONTEXT = ("Failed to snapshot the working copy", "panicked at")


def is_snapshot_race(stderr: str) -> bool:
    """Whether jj failed its snapshot because a path changed while it read."""
    return (any(context in stderr for context in _RACE_CONTEXT)
            and _RACE_ERRNO.search(stderr) is not None
            and "os error 13" not in stderr and "Permission denied" not in stderr)


# What libgit2 says when a path changed between its listing and its read:
# gone (ENOENT: "could not find '<p>' to stat"), a folder or file in the way
# (ENOTDIR, EISDIR, "it is a directory"), a symlink swapped in (ELOOP), or a
# file that grew or shrank while it was hashed.  A corrupt repository or a
# full disk says something else and still fails the capture.
_GIT_RACES = ("No such file or directory", "Not a directory", "Is a directory",
              "it is a directory", "Too many levels of symbolic links",
              "failed to read file into stream", "error reading file for hashing")


def is_git_read_race(exc: BaseException) -> bool:
    """Whether a libgit2 failure is a path changing while it was read."""
    text = str(exc)
    return any(race in text for race in _GIT_RACES)
