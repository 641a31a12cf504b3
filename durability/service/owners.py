"""A watch lives only as long as its owner: the service's watch of an engine
attempt ends when nobody works on that attempt any more.

An attempt asks the service to watch its worktree while it runs
(``integrations.attempt_watch``) and ends the watch when it ends.  An owner
killed with SIGKILL never does, and every later edit in that worktree, by
any session, would become a checkpoint of the dead attempt.  So the service
checks, before each capture of such a watch and every ``CHECK_S``, the rule
the engine already uses to let a run be claimed again
(``durability.runs.resume.check_claimable``): the run's owner is gone when it was on
this machine and its process is not alive, or, on another machine, when its
heartbeat is older than the stale threshold (on this machine a live process
is trusted over an old heartbeat: a suspended laptop's owner still works).
An attempt that is no longer running (finished, failed, abandoned by a
resume) or a run nobody holds has no owner either.
A watch of a run the engine does not know (``durability watch --run``) is
the user's and is never ended here.

A watch *parked* between two attempts of a run (decision 0056) captures for
nobody; its owner is the run: it ends when the run's owner is gone, or
nobody holds the run, never because the attempt it last served is over.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from durability.capture.capturer import CaptureRequest, Outcome
from durability.runs.fence import host_id
from durability.runs.resume import DEFAULT_STALE_AFTER_MS, pid_alive
from durability.runs.run_rows import Runs
from durability.store import AttemptKey, EngineError, NotFound, now_ms
from durability.watch.manager import WatchManager
from durability.watch.watch import Capture

__all__ = ["CHECK_S", "Owners", "WatchOwners"]

log = logging.getLogger("durability.watch")

#: How often the service looks at the owners of the attempts it watches.
CHECK_S = 1.0


class Owners:
    """Whether an attempt's owner still works on it, from the state store."""

    def __init__(self, location: object, *, clock: Callable[[], int] = now_ms,
                 stale_after_ms: int = DEFAULT_STALE_AFTER_MS) -> None:
        self._location = location
        self._clock = clock
        self.stale_after_ms = stale_after_ms
        self._runs: Runs | None = None
        self._lock = threading.Lock()
        self._failing = ""

    def gone(self, key: AttemptKey, *, parked: bool = False) -> str | None:
        """Why nobody works on ``key`` any more, or None while someone does
        (or when it cannot be told: a store that does not answer ends nothing).
        ``parked``: the watch waits between two attempts of ``key``'s run;
        only the run's owner counts, not the state of ``key``'s attempt."""
        try:
            with self._lock:
                if self._runs is None:
                    self._runs = Runs(self._location)  # type: ignore[arg-type]
                try:
                    run = self._runs.get_run(key.run_id)
                except NotFound:
                    return None  # not an engine run: a watch of the user's own
                attempt = next((a for a in self._runs.attempts(key.run_id)
                                if (a.node_id, a.iteration, a.attempt)
                                == (key.node_id, key.iteration, key.attempt)), None)
        except EngineError as exc:
            if str(exc) != self._failing:
                self._failing = str(exc)
                log.warning("cannot tell whether watched attempts are alive: %s", exc)
            return None
        self._failing = ""
        if attempt is not None and attempt.state != "running" and not parked:
            return f"the attempt is {attempt.state}"
        if run.owner is None:
            return f"nobody works on the run (it is {run.state})"
        if run.owner_host == host_id() and run.owner_pid:
            # On this machine the process answers: a heartbeat goes stale
            # while its owner lives through a suspend or a long busy wait.
            if pid_alive(run.owner_pid):
                return None
            return f"its owner {run.owner} (pid {run.owner_pid}) is gone"
        beat = run.heartbeat_at_ms
        if beat is not None and self._clock() - beat >= self.stale_after_ms:
            return (f"its owner {run.owner} stopped beating "
                    f"{(self._clock() - beat) / 1000:.0f}s ago")
        return None

    def note_ended(self, key: AttemptKey, worktree: str, why: str) -> None:
        """The ``watch-ended`` event in the run's log."""
        try:
            with self._lock:
                if self._runs is None:
                    self._runs = Runs(self._location)  # type: ignore[arg-type]
                self._runs.note(key.run_id, "watch-ended", node_id=key.node_id,
                                detail={"iteration": key.iteration, "attempt": key.attempt,
                                        "worktree": worktree, "reason": why})
        except EngineError as exc:
            log.warning("watch-ended event of %s not recorded: %s", key.run_id, exc)

    def close(self) -> None:
        with self._lock:
            if self._runs is not None:
                self._runs.close()
                self._runs = None


class WatchOwners:
    """The service's watches of engine attempts, ended with their owners.

    ``capture`` wraps the watches' capture: a capture for an attempt whose
    owner is gone is not taken (no checkpoint, no gap: nothing more is
    recorded in a dead attempt's name) and wakes ``loop``, which ends such
    watches (no final capture) with a ``watch-ended`` event in the run's log.
    """

    def __init__(self, owners: Owners, stop: threading.Event) -> None:
        self.owners = owners
        self.manager: WatchManager | None = None
        self._stop = stop
        self.wake = threading.Event()

    def capture(self, inner: Capture) -> Capture:
        def capture(request: CaptureRequest) -> Outcome:
            why = self.owners.gone(request.key)
            if why is None:
                return inner(request)
            self.wake.set()
            # "Answered", so no settle window stays open to be filed later
            # as a missed one in the dead attempt's name.
            return Outcome(request.request_id, error_code="owner-gone",
                           error_message=f"not captured: {why}", gap_recorded=True)
        return capture

    def loop(self) -> None:
        while not self._stop.is_set():
            self.wake.wait(CHECK_S)
            self.wake.clear()
            if self._stop.is_set():
                return
            self.sweep()

    def sweep(self) -> int:
        """End the watches whose attempt's owner is gone; how many."""
        if self.manager is None:
            return 0
        ended = 0
        for worktree, key, parked, generation in self.manager.attempts():
            why = self.owners.gone(key, parked=parked)
            # Not if it was parked or passed to another attempt since it was
            # read: the answer was about an attempt it no longer serves.
            if why is None or not self.manager.end_for(worktree, key, generation):
                continue
            if parked:
                why = f"{why} (parked between attempts)"
            ended += 1
            log.warning("watch of %s for %s ended: %s", worktree, key, why)
            self.owners.note_ended(key, str(worktree), why)
        return ended
