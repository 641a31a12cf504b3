"""The engine's clock seam: wall time in milliseconds.

Everything that compares times (stale heartbeats, a quota's reset time) takes
a ``Clock``, so tests move time forward instead of waiting for it.  Real
waiting (a heartbeat's interval, polling) stays on real time: it only paces
the work, it never decides anything.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "system_clock"]


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
