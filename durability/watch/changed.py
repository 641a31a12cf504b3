"""What a watch tells the git backend: the paths changed since its previous
capture request, so a capture of a plain git worktree costs what changed, not
the size of the tree (the "watcher-informed" contract, docs/explanation/git-backend.md).

The promise is only made when no event can have been lost: never for the first
request of a watch, after an event-queue overflow, after a failed capture, in
polling mode, or when more than ``MAX_PATHS`` paths piled up; then the request
carries None and the backend scans the whole tree.  Before each request an
*event barrier* (a file created and removed in the ``.git`` folder, which the
watch itself observes) proves that every event up to that moment has been
delivered, since inotify delivers one watch's events in order.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from durability.watch.ignore import IgnoreRules

__all__ = ["MAX_PATHS", "ChangedPaths", "Informed"]

#: Past this many paths a full scan is cheaper than naming them (and memory
#: stays bounded in a flood).
MAX_PATHS = 5000
# How long a capture waits for its barrier event before falling back to a
# full scan; the event normally arrives within milliseconds.
BARRIER_TIMEOUT_S = 5.0
_counter = itertools.count()


@dataclass(frozen=True)
class Informed:
    """What a watch can say before a capture, behind a passed barrier."""

    #: The paths changed since the previous take, or None (scan everything).
    paths: frozenset[str] | None
    #: No event at all since the previous take, and none lost: the tree is
    #: the one the capture after that take saw.
    quiet: bool


class ChangedPaths:
    """The paths changed since the last request, or "unknown"."""

    def __init__(self, worktree: Path, rules: IgnoreRules) -> None:
        self._rules = rules
        self._git = worktree / ".git"
        # Only plain git worktrees use the paths; jj always snapshots fully.
        self.enabled = self._git.is_dir() and not (worktree / ".jj").exists()
        # The barrier goes where captures write anyway and the ignore rules
        # never look: the git folder, or jj's for a jj-only worktree.
        self._barrier_dir: Path | None = next(
            (d for d in (self._git, worktree / ".jj") if d.is_dir()), None)
        self._lock = threading.Lock()
        self._paths: set[str] = set()
        self._unknown = True
        #: An event (or a loss) since the last take: the tree may differ from
        #: what the capture after that take saw.
        self._stirred = True
        #: Barriers that never arrived (or could not be made).
        self.barrier_misses = 0
        self._barrier: str | None = None
        self._barrier_seen = threading.Event()

    @property
    def stirred(self) -> bool:
        """Whether an event (or a loss) came since the last take, as far as
        delivered (no barrier: a hint, never a proof)."""
        with self._lock:
            return self._stirred or self._unknown

    def is_barrier(self, path: str) -> bool:
        """Whether ``path`` is the pending barrier (and note that it arrived)."""
        if self._barrier is not None and path == self._barrier:
            self._barrier_seen.set()
            return True
        return False

    def add(self, paths: Iterable[str]) -> None:
        """Paths named by one event (both ends of a move)."""
        with self._lock:
            # Under the lock: a take between reading and clearing the flag
            # would otherwise swallow this event.
            self._stirred = True
            if self._unknown or not self.enabled:
                return  # the next request scans everything anyway
            for path in paths:
                rel = self._rules.relative(path) if path else None
                if rel:
                    self._paths.add(rel.replace(os.sep, "/"))
            if len(self._paths) > MAX_PATHS:
                self._lose()

    def lost(self) -> None:
        """Events were lost, or a capture failed: the next request scans fully."""
        with self._lock:
            self._lose()

    def _lose(self) -> None:
        self._stirred = True
        self._unknown = True
        self._paths = set()

    def take(self, timeout_s: float = BARRIER_TIMEOUT_S) -> frozenset[str] | None:
        """For the next request: the paths, or None (scan the whole tree)."""
        if not self.enabled:
            return None
        with self._lock:
            unknown = self._unknown
        # A full scan needs no proof that every event arrived (and a watch
        # that is being torn down would never see its barrier).
        if not unknown and not self._wait_barrier(timeout_s):
            self.lost()
        with self._lock:
            taken = None if self._unknown else frozenset(self._paths)
            self._paths, self._unknown, self._stirred = set(), False, False
        return taken

    def take_informed(self, timeout_s: float = BARRIER_TIMEOUT_S, *,
                      barrier: bool = True) -> Informed:
        """As ``take``, and whether nothing happened at all since the last
        take; on either backend (jj names no paths, but can be quiet).

        ``barrier=False``: what arrived so far, without waiting for the
        events still on their way; those then count for the next take (a
        snapshot taken ahead of the hook starts from such a take: an event
        late for it can only make the next take less quiet)."""
        if barrier and not self._wait_barrier(timeout_s):
            self.barrier_misses += 1
            self.lost()
        with self._lock:
            quiet = not (self._stirred or self._unknown)
            taken = None if self._unknown or not self.enabled else frozenset(self._paths)
            self._paths, self._unknown, self._stirred = set(), False, False
        return Informed(taken, quiet)

    def _wait_barrier(self, timeout_s: float) -> bool:
        if self._barrier_dir is None:
            return False
        path = self._barrier_dir / f"durability-barrier-{os.getpid()}-{next(_counter)}"
        self._barrier_seen.clear()
        self._barrier = str(path)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
            os.close(fd)
            os.unlink(path)
        except OSError:
            self._barrier = None
            return False
        seen = self._barrier_seen.wait(timeout_s)
        self._barrier = None
        return seen
