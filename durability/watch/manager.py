"""The watches of one process (the service, or ``durability watch
--foreground``): one shared watchdog observer, a settle thread per watch, and
one housekeeping thread that ends watches whose worktree disappeared.

Degraded watching is never silent: when inotify cannot cover a worktree (watch
or instance limit reached, or the tree is too large for the limit) the watch
polls instead, and when the kernel's event queue overflows every watch takes a
capture of its whole tree; both file a ``watch-degraded`` gap.
"""

from __future__ import annotations

import errno
import logging
import threading
import uuid
import warnings
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from durability.capture.capturer import Outcome
from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.store import AttemptKey, Store
from durability.store.clock import SYSTEM_TIMER, Timer
from durability.watch.inotify import (
    OverflowListener,
    event_filter,
    internal_observer,
    too_big_for_inotify,
)
from durability.watch.watch import Capture, Watch, WatchSpec
from durability.watch.window import WindowMarker

__all__ = ["DEFAULT_POLL_S", "WatchManager"]

log = logging.getLogger("durability.watch")
#: How often a polling watch looks at its tree.
DEFAULT_POLL_S = 2.0
# How often the housekeeper checks that watched worktrees still exist (a
# renamed root sends no event).  One stat per watch: negligible.
_CHECK_S = 5.0
_LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)

ObserverFactory = Callable[[], Any]


class WatchManager:
    """Add, end and list watches; take them up again from the store."""

    def __init__(self, *, capture: Capture, settings: Settings,
                 store: Callable[[], Store] | None = None, registry: Any = None,
                 observer_factory: ObserverFactory | None = None,
                 poll_interval_s: float = DEFAULT_POLL_S,
                 timer: Timer = SYSTEM_TIMER) -> None:
        self.capture = capture
        #: The settle windows' and the housekeeper's time (a test moves it).
        self.timer = timer
        self.settings = settings
        self._store = store
        self.registry = registry  # durability.store.watch_rows.Watches, or None (foreground)
        # Narrowed out of .git and .jj (decision 0048): an engine run's watch
        # stays armed across its attempts' captures (decision 0056), whose
        # own writes there would otherwise each wake the observer.
        self._observer_factory = observer_factory or internal_observer
        self._observer: Any = None
        self.poll_interval_s = poll_interval_s
        self._watches: dict[Path, Watch] = {}
        self._lock = threading.RLock()
        self._wake = timer.condition()
        self._missing: list[Watch] = []
        self._closed = False
        self._overflow = OverflowListener(self.on_overflow, self._events_lost)
        self._housekeeper = threading.Thread(target=self._housekeep, name="watch-housekeeper",
                                             daemon=True)
        self._housekeeper.start()

    # -- public ------------------------------------------------------------

    def add(self, spec: WatchSpec, *, record: bool = True, catch_up: bool = False,
            baseline: bool = True, reuse: bool = False) -> Watch:
        """Start watching; a worktree already watched is re-watched for ``spec``.
        ``catch_up``: a window of this worktree was missed (its gap is filed),
        and the first capture is labelled ``watch catch-up``.  ``baseline``
        False: no capture when watching starts (the caller has just taken
        one: an engine attempt's start capture).  ``reuse``: a watch of the
        worktree for the same run, with the same timings, is handed to
        ``spec``'s attempt in place (``Watch.rekey``) instead of being
        ended and armed again (decision 0056)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the watcher is shutting down")
            if reuse:
                kept = self._reusable(spec)
                if kept is not None:
                    # Under the manager's lock: the owner sweep's ``end_for``
                    # sees the watch before or after, never half re-keyed.
                    kept.rekey(spec.key)
            else:
                kept = None
            old = None if kept is not None else self._watches.pop(spec.worktree, None)
        if kept is not None:
            if record and self.registry is not None:
                self._record(spec)
            return kept
        if old is not None:
            self._teardown(old, final=True)
        window = WindowMarker(self.settings.window_dir, spec.worktree, spec.key)
        watch = Watch(spec, capture=self.capture, on_missing=self._report_missing,
                      window=window, timer=self.timer)
        watch.catch_up = catch_up
        watch.start()
        try:
            self._arm(watch)
        except BaseException:
            watch.end(final=False)
            raise
        # A baseline capture: records the tree as it is when watching starts,
        # and catches what changed while nothing watched (a service restart).
        if baseline or catch_up:
            watch.debouncer.touch()
        with self._lock:
            self._watches[spec.worktree] = watch
        if record and self.registry is not None:
            self._record(spec)
        return watch

    def _reusable(self, spec: WatchSpec) -> Watch | None:
        """Under the lock: the watch ``add(reuse=True)`` can hand to ``spec``."""
        watch = self._watches.get(spec.worktree)
        if watch is None or not watch.alive():
            return None
        held = watch.spec
        same = (held.key.run_id, held.settle_ms, held.max_delay_ms, held.poll) == (
            spec.key.run_id, spec.settle_ms, spec.max_delay_ms, spec.poll)
        return watch if same else None

    def _record(self, spec: WatchSpec) -> None:
        from durability.store.watch_rows import WatchRow

        self.registry.put(WatchRow(str(spec.worktree), spec.key, spec.settle_ms,
                                   spec.max_delay_ms, poll=spec.poll))

    def park(self, worktree: Path, key: AttemptKey | None = None) -> WatchSpec:
        """Stop the watch of ``worktree`` capturing for its attempt and keep
        it armed for the run's next one (``add(reuse=True)``); KeyError if
        none.  Returns once no capture for that attempt can still be taken;
        the caller's capture, next, answers its open window.  Its row stays
        (naming the attempt just ended: a service restarted meanwhile takes
        it up, and the owner sweep ends it, as any watch of an ended
        attempt).  With ``key``: KeyError unless the watch is ``key``'s."""
        with self._lock:
            watch = self._watches[worktree]
        if not watch.park(expect=key):
            raise KeyError(worktree)
        return watch.spec

    def remove(self, worktree: Path, *, final: bool = True,
               key: AttemptKey | None = None) -> tuple[WatchSpec, Outcome | None]:
        """End the watch of ``worktree`` with a final capture; KeyError if none
        (or, with ``key``, if it is not ``key``'s).  ``final`` False: none,
        because the caller captures the tree next (an engine attempt's end
        capture): that capture answers every event the watch heard, so its
        open window is not left on disk to be filed."""
        with self._lock:
            if key is not None and self._watches[worktree].spec.key != key:
                raise KeyError(worktree)
            watch = self._watches.pop(worktree)
        if self.registry is not None:
            self.registry.remove(str(worktree))
        return watch.spec, self._teardown(watch, final=final, handed_over=not final)

    def specs(self) -> list[WatchSpec]:
        with self._lock:
            return [w.spec for w in self._watches.values()]

    def attempts(self) -> list[tuple[Path, AttemptKey, bool, int]]:
        """Each watch's worktree, attempt, whether it is parked, and its
        generation (for ``end_for``), each read at once."""
        with self._lock:
            watches = list(self._watches.values())
        return [(w.spec.worktree, *w.attempt()) for w in watches]

    def end_for(self, worktree: Path, key: AttemptKey, generation: int | None = None) -> bool:
        """End the watch of ``worktree`` if it is still ``key``'s (and, with
        ``generation``, neither parked nor re-keyed since it was read), with
        no final capture and no open window left to file (its attempt's
        owner is gone: nothing more is recorded in its name); whether it did."""
        with self._lock:
            watch = self._watches.get(worktree)
            if watch is None or watch.spec.key != key:
                return False
            if generation is not None and watch.generation != generation:
                return False
            del self._watches[worktree]
        if self.registry is not None:
            self.registry.remove(str(worktree))
        self._unschedule(watch)
        watch.changed.lost()
        watch.end(final=False, answered_by_gap=True)
        return True

    def forget(self, worktree: Path) -> bool:
        """Remove a recorded watch this process does not run; whether there was one."""
        return self.registry is not None and self.registry.remove(str(worktree)) is not None

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            watches = list(self._watches.values())
        return [{**w.spec.to_dict(), "mode": w.mode, "captures": w.captures,
                 "events": w.debouncer.events, "parked": w.parked} for w in watches]

    def get(self, worktree: Path) -> Watch | None:
        with self._lock:
            return self._watches.get(worktree)

    def resume(self, missed: Collection[Path] = ()) -> int:
        """Take up the watches recorded in the store; returns how many.
        Those in ``missed`` (a window missed) start with a catch-up capture."""
        if self.registry is None:
            return 0
        resumed = 0
        for row in self.registry.all():
            spec = WatchSpec(Path(row.worktree), row.key, row.settle_ms, row.max_delay_ms,
                             row.poll)
            if not spec.worktree.is_dir():
                self._end_missing_row(spec)
                continue
            self.add(spec, record=False, catch_up=spec.worktree in missed)
            resumed += 1
        return resumed

    def close(self, *, final: bool = True) -> None:
        """Stop every watch (rows stay, so a restarted service resumes them)."""
        with self._lock:
            self._closed = True
            watches = list(self._watches.values())
            self._watches.clear()
        with self._wake:
            self._wake.notify_all()
        self._housekeeper.join(30)
        for watch in watches:
            self._teardown(watch, final=final)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(30)
            self._observer = None
        self._overflow.detach()

    def _events_lost(self) -> None:
        """No watch may name its changed paths until its next full scan."""
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            watch.changed.lost()

    def on_overflow(self) -> None:
        """The kernel dropped events: capture every inotify watch's whole tree."""
        self._events_lost()
        with self._lock:
            # A parked watch captures for nobody: its lost paths (above) make
            # its next capture scan fully, and the next attempt's start
            # capture takes the tree.
            watches = [w for w in self._watches.values() if w.mode == "inotify" and not w.parked]
        for watch in watches:
            self._degraded(watch, "inotify event queue overflowed; capturing the whole tree")
            watch.touch()  # a parked watch: the next attempt's start capture takes it

    # -- arming ------------------------------------------------------------

    def _arm(self, watch: Watch) -> None:
        if watch.spec.poll:
            watch.start_polling(self.poll_interval_s)
            return
        too_big = too_big_for_inotify(watch.spec.worktree)
        if too_big:
            self._degraded(watch, too_big)
            watch.start_polling(self.poll_interval_s)
            return
        try:
            watch.observed = self._schedule(watch)
        except OSError as exc:
            if exc.errno not in _LIMIT_ERRNOS:
                raise
            self._degraded(watch, f"inotify unavailable ({exc.strerror or exc}); polling every "
                                  f"{self.poll_interval_s:g}s")
            watch.start_polling(self.poll_interval_s)

    def _schedule(self, watch: Watch) -> Any:
        from watchdog.events import FileSystemEventHandler

        handler = FileSystemEventHandler()
        handler.dispatch = watch.on_event  # type: ignore[method-assign]
        # watchdog warns from its reader thread when a fast `mkdir -p` races
        # its own recursive registration (harmless); under `-W error` that
        # warning would kill the thread and every later event with it.
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        with self._lock:
            if self._observer is None:
                observer = self._observer_factory()
                observer.start()
                self._observer = observer
                self._overflow.attach()
            return self._observer.schedule(handler, str(watch.spec.worktree), recursive=True,
                                           event_filter=event_filter())

    def _teardown(self, watch: Watch, *, final: bool,
                  handed_over: bool = False) -> Outcome | None:
        self._unschedule(watch)
        # Unscheduled, the watch sees no more events, its final capture's
        # barrier included: that capture scans fully instead of waiting for
        # the barrier until it times out (5 s on every git unwatch).
        watch.changed.lost()
        return watch.end(final=final, answered_by_gap=handed_over)

    def _unschedule(self, watch: Watch) -> None:
        observed, watch.observed = watch.observed, None
        if observed is None or self._observer is None:
            return
        try:
            self._observer.unschedule(observed)
        except (KeyError, OSError):
            pass  # its emitter already stopped (the root was deleted)

    # -- gaps and missing worktrees ----------------------------------------

    def _degraded(self, watch: Watch, detail: str) -> None:
        log.warning("watch of %s degraded: %s", watch.spec.worktree, detail)
        self._gap(watch.spec, "watch-degraded", detail)

    def _gap(self, spec: WatchSpec, reason: str, detail: str) -> None:
        k = spec.key
        record = spool.gap_record(
            run_id=k.run_id, request_id=f"watch-{uuid.uuid4()}", reason=reason,
            node_id=k.node_id, iteration=k.iteration, attempt=k.attempt,
            worktree=str(spec.worktree), source="watch", detail=detail)
        write_gap(self.settings, record, self._store)

    def _report_missing(self, watch: Watch) -> None:
        with self._wake:
            self._missing.append(watch)
            self._wake.notify()

    def _end_missing_row(self, spec: WatchSpec, why: str | None = None) -> None:
        gone = f"is being deleted ({why})" if why else "is gone"
        self._gap(spec, "worktree-missing", f"watched worktree {spec.worktree} {gone}; "
                                            "the watch ended")
        if self.registry is not None:
            self.registry.remove(str(spec.worktree))

    def _housekeep(self) -> None:
        while True:
            with self._wake:
                if not self._missing and not self._closed:
                    self.timer.wait_on(self._wake, _CHECK_S)
                if self._closed:
                    return
                missing, self._missing = self._missing, []
            with self._lock:
                watches = list(self._watches.values())
            missing += [w for w in watches if not w.alive() and w not in missing]
            for watch in missing:
                self._end_missing(watch)

    def _end_missing(self, watch: Watch) -> None:
        with self._lock:
            if self._watches.get(watch.spec.worktree) is not watch:
                return
            del self._watches[watch.spec.worktree]
        self._unschedule(watch)
        if watch.parked:
            # Between two attempts (an isolated task's worktree removed after
            # its merge): nothing was due to be captured, so no gap.
            log.info("watched worktree %s is gone between attempts; the watch ends",
                     watch.spec.worktree)
            watch.end(final=False, answered_by_gap=True)
            if self.registry is not None:
                self.registry.remove(str(watch.spec.worktree))
            return
        log.warning("watched worktree %s is gone%s; the watch ends", watch.spec.worktree,
                    f" ({watch.missing_why})" if watch.missing_why else "")
        # Its worktree-missing gap, filed next, is the record of any open window.
        watch.end(final=False, answered_by_gap=True)
        self._end_missing_row(watch.spec, watch.missing_why)
