"""The service's scheduled ``durability gc`` (docs/how-to/retention.md).

Every ``interval`` (``DURABILITY_GC_INTERVAL_MS`` when set, else the config
file's ``service_interval_hours``, 24 h by default; 0 turns it off) the
service applies the retention policy as ``durability gc`` would.  The time of
the last run is kept in the state folder (``gc-last``), so a service that
restarts more often than the interval still runs gc on time; a service that
finds no such file counts the interval from its own start (a first install
is never greeted by a gc).  Several services on one state folder (one
``DURABILITY_HOME``, several sockets) share the marker and a lock
(``locks/gc-schedule.lock``): the one that takes the lock runs a due gc, the
others skip that tick.  gc takes each repository's worktree locks, so it
never runs during a capture of the same worktree: a capture that comes in
waits for it, and gc waits for a running capture.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import filelock

from durability.config import Settings
from durability.ground.errors import DurabilityError, InvalidInput
from durability.ground.fsutil import replace_file
from durability.ground.paths import ensure_private_dir
from durability.retention.gc import extra_keepers, run_gc
from durability.retention.policy import HOUR_MS, load_policy
from durability.store import EngineError, Store
from durability.store.clock import SYSTEM_TIMER, Timer

__all__ = ["ENV", "GcSchedule", "interval_ms"]

log = logging.getLogger("durability.service")
ENV = "DURABILITY_GC_INTERVAL_MS"
#: The schedule looks at the clock this often at most (a long interval is
#: still checked every few minutes, so a suspended laptop catches up).
_CHECK_S = 300.0


def interval_ms(env: Mapping[str, str], policy_hours: float) -> int:
    """The interval in ms (0: off); a bad variable is ``invalid-value``."""
    raw = env.get(ENV)
    if not raw:
        return int(policy_hours * HOUR_MS)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    # Not in envms's table: the hook never reads it, so a bad value must not
    # become a gap on every tool call; the service says so and runs no gc.
    if not 0 <= value < float("inf"):
        raise InvalidInput(f"{ENV}={raw[:40]!r} is not a number of milliseconds >= 0")
    return int(value)


class GcSchedule:
    """Runs gc when it is due, on its own thread, until ``stop`` is set."""

    def __init__(self, settings: Settings, store: Callable[[], Store],
                 env: Mapping[str, str], stop: threading.Event, *,
                 timer: Timer = SYSTEM_TIMER) -> None:
        self.settings = settings
        self._store = store
        self._env = env
        self._stop = stop
        #: When gc is due, and what the marker records (a test moves it).
        self._timer = timer
        self.runs = 0

    @property
    def marker(self) -> Path:
        return self.settings.state_dir / "gc-last"

    def loop(self) -> None:
        try:
            every = interval_ms(self._env, load_policy(self._env).service_interval_hours)
        except DurabilityError as exc:
            log.warning("scheduled gc off: %s", exc)
            return
        if every <= 0:
            log.info("scheduled gc off")
            return
        if self._last() is None:
            self._mark()
        log.info("scheduled gc every %.3g h", every / HOUR_MS)
        while not self._timer.wait(self._stop, min(_CHECK_S, every / 1000)):
            self.tick(every)

    def tick(self, every: int) -> bool:
        """Run gc if it is due and no other service on this state folder is
        running it; True when it ran.  Due is read again under the lock: a
        service that waited on another's gc must not run it a second time."""
        try:
            with filelock.FileLock(ensure_private_dir(self.settings.lock_dir)
                                   / "gc-schedule.lock", timeout=0):
                if self._timer.wall_ms() - (self._last() or 0) < every:
                    return False
                self.run_once()
                return True
        except filelock.Timeout:
            log.info("scheduled gc: another service on %s is running it",
                     self.settings.state_dir)
            return False
        except OSError as exc:
            log.warning("scheduled gc skipped: %s", exc)
            return False

    def run_once(self) -> None:
        """One gc with the policy as configured now (the file may have changed)."""
        started = time.monotonic()
        try:
            policy = load_policy(self._env)
            report = run_gc(self.settings, self._store(), policy, now_ms=self._timer.wall_ms(),
                            keepers=extra_keepers(self.settings), env=self._env).to_dict()
        except (DurabilityError, EngineError, OSError) as exc:
            log.warning("scheduled gc failed: %s", exc)
            self._mark()  # not again at once: the next interval tries again
            return
        self.runs += 1
        self._mark()
        c, size = report["checkpoints"], report["bytes"]
        log.info("scheduled gc: dropped %d of %d checkpoints, %s -> %s bytes, %.1fs",
                 c["dropped"], c["before"], size["before"], size["after"],
                 time.monotonic() - started)
        for repo in report["repositories"]:
            if repo["note"]:
                log.info("scheduled gc: %s: %s", repo["store"], repo["note"])

    def _last(self) -> int | None:
        try:
            return int(self.marker.read_text().strip())
        except (OSError, ValueError):
            return None

    def _mark(self) -> None:
        try:
            replace_file(self.marker, f"{self._timer.wall_ms()}\n".encode(), mode=0o600)
        except OSError as exc:
            log.warning("cannot write %s: %s", self.marker, exc)
