"""The settle debouncer of a watch: one thread that sleeps on a condition
variable and fires a capture once the tree has been quiet for ``settle_s``,
or ``max_delay_s`` after the first unanswered event under continuous writes.

Memory is O(1) whatever the event rate: an event only updates two
timestamps.  Idle, the thread waits with no timeout, so it costs no CPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["Debouncer"]

log = logging.getLogger("durability.watch")

#: ``fire(reason)`` takes one capture and returns when it is answered.
Fire = Callable[[str], None]


class Debouncer:
    """Turns a stream of ``touch()`` calls into settle captures."""

    def __init__(self, fire: Fire, *, settle_s: float, max_delay_s: float, name: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fire = fire
        self.settle_s = settle_s
        self.max_delay_s = max(max_delay_s, settle_s)
        self._clock = clock
        self._cond = threading.Condition()
        self._first: float | None = None  # first event not yet covered by a capture
        self._last = 0.0
        self._stopping = False
        self._final = False
        self.events = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def touch(self) -> None:
        """An event that should end in a capture."""
        now = self._clock()
        with self._cond:
            self.events += 1
            self._last = now
            if self._first is None:
                self._first = now
                self._cond.notify()

    def stop(self, *, final: bool, timeout_s: float = 60.0) -> None:
        """End the thread; with ``final`` take one last capture first."""
        with self._cond:
            self._stopping = True
            self._final = final
            self._cond.notify()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            reason = self._wait()
            if reason is None:
                return
            try:
                self._fire(reason)
            except Exception:  # a failed capture files its own gap; keep watching
                log.exception("watch capture failed")
            if reason == "final":
                return

    def _wait(self) -> str | None:
        """Sleep until a capture is due; its reason, or None to exit."""
        with self._cond:
            while True:
                if self._stopping:
                    return "final" if self._final else None
                if self._first is None:
                    self._cond.wait()
                    continue
                now = self._clock()
                settle_at = self._last + self.settle_s
                cap_at = self._first + self.max_delay_s
                due = min(settle_at, cap_at)
                if now >= due:
                    self._first = None
                    return "settle" if settle_at <= cap_at else "max-delay"
                self._cond.wait(due - now)
