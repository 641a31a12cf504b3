"""Tier 2: one watched worktree.

A ``Watch`` turns filesystem events (inotify through watchdog, or the polling
fallback) into settle captures of its worktree for one attempt, through the
same capture path as the hook (``capture``: in the service, the per-worktree
``Coalescer``), so a burst costs one capture and an unchanged tree adds no row.
``durability.watch.manager`` owns the watches of a process.

An engine run keeps one watch of a worktree across its attempts (decision
0056): between two attempts the watch is *parked* (armed, hearing events,
capturing for nobody) and ``rekey`` hands it to the next attempt at once.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.capture.capturer import CaptureRequest, Outcome
from durability.ground.ids import missing_repository_part
from durability.store import AttemptKey
from durability.store.clock import SYSTEM_TIMER, Timer
from durability.watch.changed import ChangedPaths
from durability.watch.debounce import Debouncer
from durability.watch.ignore import IgnoreRules
from durability.watch.poll import Poller
from durability.watch.window import WindowMarker

__all__ = ["DEFAULT_MAX_DELAY_MS", "DEFAULT_SETTLE_MS", "Capture", "Watch", "WatchSpec",
           "change_ends"]

DEFAULT_SETTLE_MS = 300
DEFAULT_MAX_DELAY_MS = 5000

#: Takes one capture and returns its outcome (blocking).
Capture = Callable[[CaptureRequest], Outcome]

# Events that say a file or folder changed ("attrib": a chmod +x, which jj
# records).  Opens and reads are left out: a capture reads changed files, and
# must not trigger the next one.
_CHANGES = frozenset({"created", "deleted", "modified", "moved", "closed", "attrib"})


@dataclass(frozen=True)
class WatchSpec:
    """What to watch and whose captures they are."""

    worktree: Path
    key: AttemptKey
    settle_ms: int = DEFAULT_SETTLE_MS
    max_delay_ms: int = DEFAULT_MAX_DELAY_MS
    poll: bool = False

    def to_dict(self) -> dict[str, Any]:
        k = self.key
        return {"worktree": str(self.worktree), "run_id": k.run_id, "node_id": k.node_id,
                "iteration": k.iteration, "attempt": k.attempt, "settle_ms": self.settle_ms,
                "max_delay_ms": self.max_delay_ms}


class Watch:
    """Events in, settle captures out, until ``end()``."""

    def __init__(self, spec: WatchSpec, *, capture: Capture,
                 on_missing: Callable[[Watch], None],
                 window: WindowMarker | None = None, timer: Timer = SYSTEM_TIMER) -> None:
        self.spec = spec
        #: The next capture catches up a window a dead watcher missed (its label says so).
        self.catch_up = False
        self.window = window
        self.rules = IgnoreRules(spec.worktree)
        self.changed = ChangedPaths(spec.worktree, self.rules)
        self.mode = "inotify"
        self.captures = 0
        self.last_outcome: Outcome | None = None
        self._capture = capture
        self._on_missing = on_missing
        self._missing_reported = threading.Event()
        #: What was found gone, when the watch itself found its worktree
        #: unfit to capture (None: the worktree folder itself).
        self.missing_why: str | None = None
        self._inode = _inode(spec.worktree)
        self.debouncer = Debouncer(self._fire, settle_s=spec.settle_ms / 1000,
                                   max_delay_s=spec.max_delay_ms / 1000,
                                   name=f"watch-settle:{spec.worktree}", window=window,
                                   timer=timer)
        self.poller: Poller | None = None
        self.observed: Any = None  # the watchdog ObservedWatch, in inotify mode
        #: Between two attempts of a run: armed, but capturing for nobody.
        self.parked = False
        #: Bumped by each park and re-key: who read the watch's attempt
        #: (the owner sweep) can tell it still has the one it read.
        self.generation = 0
        # Guards spec, parked and generation, and orders an event's touch
        # against a park (held by on_event across the touch).
        self._state = threading.Lock()
        # Held while a capture is taken: a park waits for the one under way.
        self._firing = threading.Lock()

    def start(self) -> None:
        self.debouncer.start()

    def attempt(self) -> tuple[AttemptKey, bool, int]:
        """The attempt the watch captures for, whether it is parked, and
        its generation, read together."""
        with self._state:
            return self.spec.key, self.parked, self.generation

    def park(self, expect: AttemptKey | None = None) -> bool:
        """Stop capturing for the current attempt, and stay armed; False (and
        nothing done) when ``expect`` is given and is not that attempt.

        Returns once no capture for it can still be taken: one under way
        finishes first.  The pending settle capture is dropped and the open
        window cleared, as ``end(final=False)`` does: the caller captures
        the tree next (the attempt's end capture), which answers them.
        Events heard while parked start no capture; their paths are kept,
        so the next capture's changed paths stay a superset of what changed.
        """
        with self._state:
            if expect is not None and self.spec.key != expect:
                return False
            self.parked = True
            self.generation += 1
        with self._firing:
            pass  # a settle capture under way is the attempt's; it finishes
        self.debouncer.cancel()
        return True

    def rekey(self, key: AttemptKey) -> None:
        """Capture for ``key`` from now on (parked or not: the watch passes
        to another attempt).  A capture under way finishes for the attempt
        it began for; the next one is ``key``'s."""
        with self._state:
            self.spec = dataclasses.replace(self.spec, key=key)
            self.parked = False
            self.generation += 1
            if self.window is not None:
                self.window.rekey(key)

    def start_polling(self, interval_s: float) -> None:
        """Fall back to polling (watch limits reached, or asked for)."""
        self.mode = "poll"
        self.changed.enabled = False  # a poll cannot say what changed
        self.poller = Poller(self.spec.worktree, self.rules, interval_s=interval_s,
                             on_change=self.touch, on_missing=self.report_missing,
                             name=f"watch-poll:{self.spec.worktree}")
        self.poller.start()

    def on_event(self, event: Any) -> None:
        """A watchdog event (called on the observer thread: must stay cheap)."""
        ends = change_ends(event, self.rules, self.changed)
        if ends is None:
            return
        if event.event_type == "deleted" and ends[0] == str(self.spec.worktree):
            self.report_missing()
            return
        self.changed.add(ends)  # both ends of a move, even an ignored one
        self.touch()

    def touch(self) -> None:
        """A change that should end in a capture, unless the watch is parked."""
        with self._state:
            if not self.parked:
                self.debouncer.touch()

    def alive(self) -> bool:
        """Whether the worktree folder is still the one being watched."""
        return self._inode is not None and _inode(self.spec.worktree) == self._inode

    def report_missing(self) -> None:
        """The worktree is gone: tell the manager once."""
        if not self._missing_reported.is_set():
            self._missing_reported.set()
            self._on_missing(self)

    def end(self, *, final: bool, answered_by_gap: bool = False) -> Outcome | None:
        """Stop; with ``final``, take the last capture first and return it.

        An open window no capture answered stays on disk for the next start
        to file, unless ``answered_by_gap`` (the caller filed a gap for it,
        or takes the capture that answers it).
        """
        if self.poller is not None:
            self.poller.stop()
        self.debouncer.stop(final=final)
        if self.window is not None:
            if answered_by_gap:
                self.window.clear()
            self.window.release()
        return self.last_outcome if final else None

    def _fire(self, reason: str) -> bool:
        with self._firing:
            with self._state:
                key, parked = self.spec.key, self.parked
            if parked:
                # Due before the park and started after it: the capture the
                # park's caller takes next answers it.
                return True
            if reason != "final":
                gone = missing_repository_part(self.spec.worktree)
                if gone is not None:
                    # Being deleted (an rm -rf takes the tree's files and
                    # the repository's in its own order): a capture now
                    # would write into the folders it is emptying.  The
                    # watch ends, its worktree-missing gap answers the window.
                    self.missing_why = f"{gone} is gone"
                    self.report_missing()
                    return False
            return self._take(key, reason)

    def _take(self, key: AttemptKey, reason: str) -> bool:
        if self.catch_up and reason != "final":
            self.catch_up, reason = False, "catch-up"
        request = CaptureRequest(key=key, worktree=self.spec.worktree, source="watch",
                                 request_id=f"watch-{uuid.uuid4()}", label=f"watch {reason}",
                                 changed_paths=self.changed.take())
        outcome = self._capture(request)
        self.captures += 1
        self.last_outcome = outcome
        if not outcome.ok:
            self.changed.lost()  # what it would have captured is unknown again
        if outcome.error_code == "worktree-missing" and reason != "final":
            self.report_missing()
        return outcome.ok or outcome.gap_recorded


def change_ends(event: Any, rules: IgnoreRules, changed: ChangedPaths) -> tuple[str, str] | None:
    """Both ends of a watchdog event that may change what a capture sees (a
    move's two paths, an ignored end included), or None: not a change, the
    barrier, or only ignored paths and the ``.jj``/``.git`` folders."""
    if event.event_type not in _CHANGES:
        return None
    if event.is_directory and event.event_type in ("modified", "closed", "attrib"):
        return None  # a folder's own mtime: its child's event says what changed
    src = _text(event.src_path)
    if changed.is_barrier(src):
        return None
    ends = (src, _text(getattr(event, "dest_path", "")))
    triggering = [p for p in ends if p and rules.triggers(p, is_dir=event.is_directory)]
    if not triggering:
        return None
    if any(os.path.basename(p) == ".gitignore" for p in triggering):
        rules.forget()
    return ends


def _inode(path: Path) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino if os.path.isdir(path) else None


def _text(path: str | bytes) -> str:
    return os.fsdecode(path) if isinstance(path, bytes) else path
