"""The owner's heartbeat: a thread that refreshes the run's (and its running
attempts') heartbeat about once a second, and brings back what was asked of
the owner meanwhile (pause, cancel) or that the claim was lost."""

from __future__ import annotations

import logging
import threading

from durability.ground.store_errors import ClaimLost, StoreUnavailable
from durability.runs.fence import Claim
from durability.runs.run_rows import Runs

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


class Heartbeat:
    """A stoppable heartbeat thread; use as a context manager."""

    def __init__(self, runs: Runs, claim: Claim, *, interval_s: float) -> None:
        self._runs = runs
        self._claim = claim
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{claim.run_id}",
                                        daemon=True)
        #: 'pause' or 'cancel' once asked; sticky
        self.requested: str | None = None
        #: set when another process holds the run now
        self.lost = threading.Event()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def beat_now(self) -> None:
        """One heartbeat, on the caller's thread."""
        try:
            asked = self._runs.beat(self._claim)
        except ClaimLost:
            self.lost.set()
            return
        except StoreUnavailable as exc:
            # A busy or briefly unavailable database costs one beat; the stale
            # threshold is many beats long.
            log.warning("heartbeat of run %s skipped: %s", self._claim.run_id, exc)
            return
        if asked in ("pause", "cancel") and self.requested != "cancel":
            self.requested = asked

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s) and not self.lost.is_set():
            self.beat_now()
