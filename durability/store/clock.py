"""The clock seams: wall time in milliseconds, and timers that decide.

Everything that compares times (stale heartbeats, a quota's reset time) takes
a ``Clock``, so tests move time forward instead of waiting for it.  Real
waiting (a heartbeat's interval, polling) stays on real time: it only paces
the work, it never decides anything.

A wait that decides something (a settle window, a push's back-off, a
scheduled gc, a periodic rescan) goes through a ``Timer`` instead: the real
one is ``time.monotonic`` and ``Event.wait``/``Condition.wait``; a
``ManualTimer`` moves only when a test says so, and tells the test when the
threads waiting on it have seen the time it set.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["SYSTEM_TIMER", "Clock", "ManualClock", "ManualTimer", "SystemTimer", "Timer",
           "system_clock"]


class Clock(Protocol):
    def __call__(self) -> int:
        """Milliseconds since the epoch."""
        ...


def system_clock() -> int:
    """The real wall clock."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (for tests and simulations)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = system_clock() if start_ms is None else start_ms
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` and return the new time."""
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms


class Timer(Protocol):
    """Monotonic time, wall time, and the waits a component decides by."""

    def monotonic(self) -> float:
        """Seconds, monotonic (only differences mean anything)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """``event.wait(timeout)``: whether the event was set."""
        ...

    def wait_on(self, cond: threading.Condition, timeout: float | None) -> bool:
        """``cond.wait(timeout)`` (the caller holds ``cond``): False on a timeout."""
        ...

    def condition(self) -> threading.Condition:
        """A condition for ``wait_on`` (a manual timer must see its notifies)."""
        ...


class SystemTimer:
    """The real timer: ``time.monotonic``, the wall clock, real waits."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return system_clock()

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)

    def wait_on(self, cond: threading.Condition, timeout: float | None) -> bool:
        return cond.wait(timeout)

    def condition(self) -> threading.Condition:
        return threading.Condition()


SYSTEM_TIMER = SystemTimer()


class _Waiter:
    __slots__ = ("deadline", "event", "looks")

    def __init__(self, deadline: float, event: threading.Event | None) -> None:
        self.deadline = deadline
        self.event = event
        self.looks = 0  # times it looked and found nothing to return for


class _Counted(threading.Condition):
    """A condition that counts its notifies: a notify that races a timed
    wait's timeout makes that wait return False, and is seen here."""

    def __init__(self) -> None:
        super().__init__()
        self.notifies = 0

    def notify(self, n: int = 1) -> None:
        self.notifies += 1  # under the lock, as notify requires
        super().notify(n)


class ManualTimer:
    """A timer that moves only when told to (tests).

    A wait ends when its event is set (or its condition notified) or once
    ``advance`` has moved the time past its deadline, counted from the time
    the waiting thread last read (``due - monotonic()`` is waited until
    ``due``, however late the thread got to the wait).  ``until_waiting``
    tells a test when every thread it expects is back in a wait that has not
    come due: everything the time it set decides has been decided.
    """

    #: How often a waiting thread looks at the time (real seconds).
    LOOK_S = 0.002

    def __init__(self, *, wall_ms: int | None = None) -> None:
        self._now = 0.0
        self._wall0 = system_clock() if wall_ms is None else wall_ms
        self._cv = threading.Condition()
        self._waiters: set[_Waiter] = set()
        self._read = threading.local()

    def monotonic(self) -> float:
        with self._cv:
            self._read.at = self._now
            return self._now

    def wall_ms(self) -> int:
        with self._cv:
            return self._wall0 + round(self._now * 1000)

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds``; the new time."""
        with self._cv:
            self._now += seconds
            self._cv.notify_all()
            return self._now

    def waiting(self) -> int:
        """How many threads are in a wait that has not come due."""
        with self._cv:
            return sum(1 for w in self._waiters if not self._ends(w))

    def deadlines(self) -> list[float]:
        """When the waits not yet due end (``inf``: no timeout), soonest first."""
        with self._cv:
            return sorted(w.deadline for w in self._waiters if not self._ends(w))

    def until_waiting(self, n: int = 1, timeout_s: float = 30.0) -> None:
        """Block until ``n`` threads wait, each having looked at the time as
        it is now and found nothing to do; AssertionError after ``timeout_s``
        (real seconds)."""
        with self._cv:
            seen = {w: w.looks for w in self._waiters}
            ok = self._cv.wait_for(
                lambda: sum(1 for w in self._waiters
                            if w.looks > seen.get(w, 0) and not self._ends(w)) >= n,
                timeout_s)
        if not ok:
            raise AssertionError(f"fewer than {n} thread(s) came back to wait on the timer "
                                 f"within {timeout_s}s")

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        waiter = self._enter(timeout, event)
        try:
            while True:
                if event.wait(self.LOOK_S):
                    return True
                if self._looked(waiter):
                    return event.is_set()
        finally:
            self._leave(waiter)

    def condition(self) -> threading.Condition:
        return _Counted()

    def wait_on(self, cond: threading.Condition, timeout: float | None) -> bool:
        if not isinstance(cond, _Counted):
            raise TypeError("wait_on needs a condition from this timer's condition()")
        waiter = self._enter(timeout, None)
        notifies = cond.notifies
        try:
            while True:
                if cond.wait(self.LOOK_S) or cond.notifies != notifies:
                    return True
                if self._looked(waiter):
                    return False
        finally:
            self._leave(waiter)

    def _enter(self, timeout: float | None, event: threading.Event | None) -> _Waiter:
        with self._cv:
            start = getattr(self._read, "at", self._now)
            deadline = float("inf") if timeout is None else start + max(timeout, 0.0)
            waiter = _Waiter(deadline, event)
            self._waiters.add(waiter)
            return waiter

    def _looked(self, waiter: _Waiter) -> bool:
        """One look at the time: whether the wait came due."""
        with self._cv:
            if self._now >= waiter.deadline:
                return True
            waiter.looks += 1
            self._cv.notify_all()
            return False

    def _leave(self, waiter: _Waiter) -> None:
        with self._cv:
            self._waiters.discard(waiter)
            self._read.at = self._now
            self._cv.notify_all()

    def _ends(self, w: _Waiter) -> bool:
        return self._now >= w.deadline or (w.event is not None and w.event.is_set())
