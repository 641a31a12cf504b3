"""The settle debouncer of a watch: one thread that sleeps on a condition
variable and fires a capture once the tree has been quiet for ``settle_s``,
or ``max_delay_s`` after the first unanswered event under continuous writes.

Memory is O(1) whatever the event rate: an event only updates two
timestamps.  Idle, the thread waits with no timeout, so it costs no CPU.

With a ``Window`` (``durability.watch.window.WindowMarker``) the open settle
window is kept on disk: marked when its first unanswered event arrives (one
write per window, not per event) and cleared once a capture that covers every
event so far is answered, so a watcher killed inside it leaves it on record.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from durability.store.clock import SYSTEM_TIMER, Timer

__all__ = ["Debouncer", "Window"]

log = logging.getLogger("durability.watch")

#: ``fire(reason)`` takes one capture and returns when it is answered:
#: whether it is on record (a checkpoint, or a gap for its failure).
Fire = Callable[[str], bool]


class Window(Protocol):
    """Where the open settle window is kept while no capture answered it."""

    def mark(self, opened_at_ms: int) -> None: ...

    def clear(self) -> None: ...


class Debouncer:
    """Turns a stream of ``touch()`` calls into settle captures."""

    def __init__(self, fire: Fire, *, settle_s: float, max_delay_s: float, name: str,
                 timer: Timer = SYSTEM_TIMER, window: Window | None = None) -> None:
        self._fire = fire
        self._window = window
        self.settle_s = settle_s
        self.max_delay_s = max(max_delay_s, settle_s)
        self._timer = timer
        self._cond = timer.condition()
        self._first: float | None = None  # first event not yet covered by a capture
        self._last = 0.0
        # Wall time of the first event since the last capture began, and of
        # the first event no recorded capture has answered yet (the marker's).
        self._first_ms = 0
        self._unanswered_ms: int | None = None
        self._stopping = False
        self._final = False
        self.events = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def touch(self) -> None:
        """An event that should end in a capture."""
        now = self._timer.monotonic()
        with self._cond:
            self.events += 1
            self._last = now
            if self._first is None:
                self._first = now
                self._first_ms = self._timer.wall_ms()
                self._cond.notify()
            if self._unanswered_ms is None and not self._stopping:
                self._open_window(self._first_ms)

    def cancel(self) -> None:
        """Drop the events no capture has taken yet, and their window: the
        caller captures the tree itself, which answers them (a watch parked
        between two attempts, ``Watch.park``)."""
        with self._cond:
            self._first = None
            self._unanswered_ms = None
            if self._window is not None:
                self._window.clear()

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
            answered = False
            try:
                answered = self._fire(reason)
            except Exception:  # a failed capture files its own gap; keep watching
                log.exception("watch capture failed")
            if answered:
                self._answered(final=reason == "final")
            if reason == "final":
                return

    def _open_window(self, at_ms: int) -> None:
        """Under the lock: a capture cannot answer the window before its
        marker is written (once per window, so the wait is rare and short)."""
        self._unanswered_ms = at_ms
        if self._window is not None:
            self._window.mark(at_ms)

    def _answered(self, *, final: bool) -> None:
        """A capture is on record: it answered every event that came before
        it began; events during it opened the next window, unless it was the
        final one (the watch ends by request: later events are not its)."""
        with self._cond:
            if self._first is None or final:
                self._unanswered_ms = None
                if self._window is not None:
                    self._window.clear()
            elif self._unanswered_ms != self._first_ms:
                self._open_window(self._first_ms)

    def _wait(self) -> str | None:
        """Sleep until a capture is due; its reason, or None to exit."""
        with self._cond:
            while True:
                if self._stopping:
                    return "final" if self._final else None
                if self._first is None:
                    self._timer.wait_on(self._cond, None)
                    continue
                now = self._timer.monotonic()
                settle_at = self._last + self.settle_s
                cap_at = self._first + self.max_delay_s
                due = min(settle_at, cap_at)
                if now >= due:
                    self._first = None
                    return "settle" if settle_at <= cap_at else "max-delay"
                self._timer.wait_on(self._cond, due - now)
