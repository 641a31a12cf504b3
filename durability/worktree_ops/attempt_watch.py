"""The engine's own checkpoints of an attempt's worktree (docs/how-to/runs.md,
"Attempts checkpoint themselves").

Around each attempt: a capture of the starting tree (source ``attempt``,
label ``attempt start``), a watch of the worktree with the attempt's
identity while it runs (through the snapshot service when one answers, in
this process otherwise), and a final capture (``attempt end``) however the
attempt ended.  A worktree has one watch: when parallel attempts share it,
the watch is for the newest of them, and passes to the one still running
when its attempt ends.  A capture that fails is a gap, never a failure of
the task.

The watch is armed once per worktree and run (decision 0056): when the last
attempt on the worktree ends it is *parked* (armed, capturing for nobody)
before that attempt's end capture, the next attempt of the run takes it
over after its start capture, and it ends with the run
(``AttemptWatches.close_run``).  A change between two attempts is in the
next attempt's start checkpoint, never in a capture of either attempt's watch.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from durability.backends import resolve_worktree
from durability.capture.capturer import Capturer
from durability.capture.coalesce import Coalescer, coalesced_capture
from durability.capture.inprocess import lazy_store
from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.ground.errors import DurabilityError, ServiceUnreachable
from durability.runs.attempt_checkpoints import ATTEMPT_SOURCE, END_LABEL, START_LABEL
from durability.store import AttemptKey, EngineError
from durability.watch.foreground import request_unwatch, request_watch
from durability.watch.manager import WatchManager
from durability.watch.watch import WatchSpec

__all__ = ["AttemptWatches"]

log = logging.getLogger("durability.engine")


class _TeardownRace(logging.Filter):
    """watchdog logs an *error* when a watch is unscheduled while its reader
    holds an event (its own teardown race; the event is dropped, nothing is
    lost to us: the final capture reads the tree).  A run's stderr is read
    as its error, so this one line is kept out of it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


logging.getLogger("watchdog.observers.inotify").addFilter(_TeardownRace())
_FAILURES = (DurabilityError, EngineError, OSError, RuntimeError)


class _Watcher(Protocol):
    key: AttemptKey | None

    def watch(self, key: AttemptKey) -> None: ...

    def park(self) -> bool: ...

    def stop(self) -> None: ...


class _ServiceWatcher:
    """The service watches (and records the watch, so a restarted service
    takes it up again)."""

    def __init__(self, settings: Settings, root: Path, env: Mapping[str, str]) -> None:
        self.settings, self.root, self.env = settings, root, env
        self.key: AttemptKey | None = None
        #: The service did the watch's last step with the attempt's capture
        #: (it knows ``CaptureReq.watch``): the park can go the same way.
        self.carried = False

    def watch(self, key: AttemptKey) -> None:
        # The run's parked watch passes to ``key`` in place (or a new one is
        # armed, replacing any other); no baseline capture: the attempt's
        # start capture was taken just before.
        request_watch(self.settings, WatchSpec(self.root, key), baseline=False, reuse=True)
        self.key = key

    def park(self) -> bool:
        # No final capture: the attempt's end capture, taken next, is it.
        # Only this attempt's watch (not one another owner took over).
        answer = request_unwatch(self.settings, self.root, self.env, final=False, keep=True,
                                 key=self.key)
        return bool(answer.get("parked"))  # an older service ended it

    def stop(self) -> None:
        # The last attempt's end capture was taken: nothing more to capture;
        # a watch another owner of the run took over since is left to it.
        request_unwatch(self.settings, self.root, self.env, final=False, key=self.key)


class _LocalWatcher:
    """No service: a watch manager of this process, for this worktree only."""

    def __init__(self, settings: Settings, root: Path, env: Mapping[str, str]) -> None:
        store = lazy_store(settings)
        capturer = Capturer(settings=settings, store=store, env=env)
        timeout = settings.jj_timeout_s + 30
        self.root = root
        self.coalescer = Coalescer(lambda reqs: capturer.capture(reqs, lock_timeout_s=timeout))
        self.manager = WatchManager(capture=coalesced_capture(self.coalescer),
                                    settings=settings, store=store)
        self.key: AttemptKey | None = None

    def watch(self, key: AttemptKey) -> None:
        # Takes over the parked watch, or arms one; no baseline capture (as
        # the service's, above).
        self.manager.add(WatchSpec(self.root, key), record=False, baseline=False, reuse=True)
        self.key = key

    def park(self) -> bool:
        try:
            self.manager.park(self.root)  # the end capture follows
        except KeyError:
            return False  # the worktree went away: the watch ended with its gap
        return True

    def stop(self) -> None:
        try:
            self.manager.remove(self.root, final=False)  # the end capture was taken
        except KeyError:
            pass  # the worktree went away: the watch ended with its gap
        finally:
            self.manager.close(final=False)
            self.coalescer.close()


class AttemptWatches:
    """The attempts of one process that are watched, by worktree."""

    def __init__(self, settings: Settings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env
        self._lock = threading.Lock()
        self._active: dict[Path, list[AttemptKey]] = {}
        self._watchers: dict[Path, _Watcher] = {}

    @contextmanager
    def around(self, key: AttemptKey, worktree: str) -> Iterator[None]:
        """Start capture and watch; on exit, hand the watch on or park it,
        then the final capture (before the engine closes the attempt row).

        Through a service that knows it, each watch step rides on its
        capture (``CaptureReq.watch``): the take-over after the start
        capture, the park before the end capture, in the same order and
        with two round trips fewer."""
        root = Path(os.path.abspath(worktree))
        took = self.capture(key, root, START_LABEL, watch="take" if self._carries(root) else None)
        self._begin(key, root, took)
        try:
            yield
        finally:
            # The watch is parked (or passed on) first, with no final capture
            # of its own (a settle capture under way finishes before): the
            # end capture then answers everything the watch heard, and is
            # the attempt's last checkpoint.
            carried = self._end(key, root)
            parked = self.capture(key, root, END_LABEL, watch="park" if carried else None)
            if carried:
                self._after_park(key, root, parked)

    def capture(self, key: AttemptKey, root: Path, label: str, *,
                watch: str | None = None) -> dict[str, Any] | None:
        """One of the attempt's own captures; with ``watch``, the service's
        answer to the watch step it carried (None: it carried none)."""
        request_id = f"attempt-{uuid.uuid4()}"
        answered: dict[str, Any] = {}
        try:
            snapshot_now(self.settings, key=key, path=root, request_id=request_id, label=label,
                         source=ATTEMPT_SOURCE, env=self.env,
                         wire_fields={"watch": watch} if watch else None, answered=answered)
        except Exception as exc:  # never let a capture break the task
            code = str(getattr(exc, "code", "internal-error"))
            log.warning("%s capture of %s not taken (%s): %s", label, root, code, exc)
            if code in ("timeout", "internal-error", "service-unreachable"):
                # The capture path files a gap for the failures it knows;
                # these it could not, so it is filed here.
                write_gap(self.settings, spool.gap_record(
                    run_id=key.run_id, request_id=request_id, reason=code,
                    node_id=key.node_id, iteration=key.iteration, attempt=key.attempt,
                    worktree=str(root), source=ATTEMPT_SOURCE, detail=str(exc)))
        step = answered.get("watch") if watch else None
        return step if isinstance(step, dict) else None

    def _carries(self, root: Path) -> bool:
        """Whether the start capture should carry the watch's take-over: not
        while this process watches ``root`` itself (no service answered)."""
        with self._lock:
            watcher = self._watchers.get(root)
        return watcher is None or isinstance(watcher, _ServiceWatcher)

    def _begin(self, key: AttemptKey, root: Path, took: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._active.setdefault(root, []).append(key)
            watcher = self._watchers.get(root)
            if took is not None and took.get("ok"):  # the service took it over, or armed it
                if not isinstance(watcher, _ServiceWatcher):
                    watcher = _ServiceWatcher(self.settings, root, self.env)
                    self._watchers[root] = watcher
                watcher.key, watcher.carried = key, True
                return
            if took is not None:
                log.info("watch of %s not taken by %s with its capture: %s", root, key, took)
            if watcher is not None:
                try:
                    watcher.watch(key)  # the run's watch, parked or another attempt's
                    return
                except _FAILURES as exc:  # its service went away: arm one afresh
                    log.info("watch of %s not passed to %s: %s", root, key, exc)
                    del self._watchers[root]
                    self._stop_quietly(watcher)
            try:
                self._watchers[root] = self._start(root, key)
            except _FAILURES as exc:
                log.warning("no watch of %s for %s: %s", root, key, exc)

    def _start(self, root: Path, key: AttemptKey) -> _Watcher:
        resolve_worktree(root)  # a worktree neither backend takes: no watch, said once
        service = _ServiceWatcher(self.settings, root, self.env)
        try:
            service.watch(key)
        except ServiceUnreachable:
            local = _LocalWatcher(self.settings, root, self.env)
            try:
                local.watch(key)
            except BaseException:
                local.stop()
                raise
            return local
        return service

    def _end(self, key: AttemptKey, root: Path) -> bool:
        """Pass the watch on, or park it; True when the park is left to the
        end capture (``_after_park``)."""
        with self._lock:
            keys = self._active.get(root, [])
            if key in keys:
                keys.remove(key)
            watcher = self._watchers.get(root)
            if watcher is None:
                return False
            if not keys and isinstance(watcher, _ServiceWatcher) and watcher.carried \
                    and watcher.key == key:
                return True
            try:
                if not keys:
                    # Parked, not ended: the run's next attempt here takes
                    # it over (``_begin``); ``close_run`` ends it.
                    if not watcher.park():  # gone, or not this attempt's any more
                        del self._watchers[root]
                        self._stop_quietly(watcher)
                elif watcher.key == key:
                    watcher.watch(keys[-1])  # the watch passes to one still running
            except _FAILURES as exc:
                log.warning("watch of %s for %s did not end cleanly: %s", root, key, exc)
                self._watchers.pop(root, None)
                self._stop_quietly(watcher)
            return False

    def _after_park(self, key: AttemptKey, root: Path, parked: dict[str, Any] | None) -> None:
        """After the end capture that carried the park: if the service did
        not park (it carried no step: it went away, or an older one answers
        now), park or end the watch here and capture again, so the end
        capture is still the attempt's last checkpoint."""
        if parked is not None and parked.get("ok"):
            if not parked.get("parked"):  # another attempt's now: it is theirs to end
                with self._lock:
                    watcher = self._watchers.get(root)
                    if watcher is not None and not self._active.get(root) \
                            and watcher.key == key:
                        del self._watchers[root]
            return
        with self._lock:
            watcher = self._watchers.get(root)
            if watcher is None or self._active.get(root) or watcher.key != key:
                return  # another attempt of this process holds it now
            if isinstance(watcher, _ServiceWatcher):
                watcher.carried = False
            try:
                kept = watcher.park()
            except _FAILURES as exc:
                log.info("watch of %s for %s not parked: %s", root, key, exc)
                kept = False
            if not kept:
                del self._watchers[root]
                self._stop_quietly(watcher)
        self.capture(key, root, END_LABEL)  # unchanged since: adds no row

    def close_run(self, run_id: str) -> None:
        """End the watches ``run_id``'s attempts parked (the run's drive is
        over); a watch an attempt of another run holds is left to it."""
        with self._lock:
            for root in [r for r, w in self._watchers.items()
                         if not self._active.get(r) and w.key is not None
                         and w.key.run_id == run_id]:
                self._active.pop(root, None)
                self._stop_quietly(self._watchers.pop(root))

    def _stop_quietly(self, watcher: _Watcher) -> None:
        try:
            watcher.stop()
        except _FAILURES as exc:
            if getattr(exc, "code", None) != "not-found":  # already ended by the service
                log.warning("watch of %s did not end cleanly: %s",
                            getattr(watcher, "root", "?"), exc)

    def release_stale(self, run_id: str, worktree: str) -> None:
        """End a recorded watch of ``worktree`` left by an attempt of
        ``run_id`` whose process died (a service keeps watching for it), so
        it does not capture the restore and the re-run as the dead attempt."""
        from durability.store.watch_rows import Watches

        root = Path(os.path.abspath(worktree))
        with self._lock:
            if root in self._watchers:
                return  # this process watches it now
            try:
                stale = [w for w in Watches(self.settings.database).all()
                         if Path(w.worktree) == root and w.key.run_id == run_id]
                if stale:
                    request_unwatch(self.settings, root, self.env)
            except _FAILURES as exc:
                log.warning("could not end the stale watch of %s: %s", root, exc)
