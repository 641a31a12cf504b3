"""The gc schedule's clock on a manual timer (``durability.store.clock.ManualTimer``):
when gc is due is decided by the timer's wall time and the ``gc-last``
marker, looked at every ``min(_CHECK_S, interval)``; the test moves time
through whole hours without waiting for them."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from durability.config import Settings
from durability.service import gc_schedule
from durability.service.gc_schedule import GcSchedule
from durability.store import Store
from durability.store.clock import ManualTimer

HOUR_S = 3600.0
CHECK_S = gc_schedule._CHECK_S


@contextmanager
def _schedule(settings: Settings, timer: ManualTimer, interval_ms: int
              ) -> Iterator[GcSchedule]:
    env = {**os.environ, "DURABILITY_GC_INTERVAL_MS": str(interval_ms)}
    stop = threading.Event()
    with Store(settings.database) as store:
        schedule = GcSchedule(settings, lambda: store, env, stop, timer=timer)
        thread = threading.Thread(target=schedule.loop, daemon=True)
        thread.start()
        try:
            timer.until_waiting(timeout_s=60)
            yield schedule
        finally:
            stop.set()
            thread.join(60)
    assert not thread.is_alive()


def _step(timer: ManualTimer, seconds: float) -> None:
    timer.advance(seconds)
    timer.until_waiting(timeout_s=60)


def _marker(settings: Settings) -> int:
    return int((settings.state_dir / "gc-last").read_text())


def test_a_first_service_counts_the_interval_from_its_start(settings: Settings) -> None:
    """No marker: the start is marked (a first install is never greeted by
    a gc), and gc runs at the first look one interval later, not before."""
    timer = ManualTimer(wall_ms=1_000_000_000)
    with _schedule(settings, timer, int(HOUR_S * 1000)) as schedule:
        assert _marker(settings) == 1_000_000_000
        assert timer.deadlines() == [CHECK_S]  # a long interval is looked at every CHECK_S
        for _ in range(round(HOUR_S / CHECK_S) - 1):
            _step(timer, CHECK_S)
        assert schedule.runs == 0
        _step(timer, CHECK_S)
        assert schedule.runs == 1
        assert _marker(settings) == 1_000_000_000 + HOUR_S * 1000
        _step(timer, CHECK_S)  # the interval counts again from that run
        assert schedule.runs == 1


def test_a_restarted_service_runs_gc_on_time_from_the_marker(settings: Settings) -> None:
    """The marker outlives the service: one restarted 50 minutes into the
    interval runs gc 10 minutes later, not an hour later."""
    start = 2_000_000_000
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "gc-last").write_text(f"{start - 50 * 60_000}\n")
    timer = ManualTimer(wall_ms=start)
    with _schedule(settings, timer, int(HOUR_S * 1000)) as schedule:
        _step(timer, CHECK_S)
        assert schedule.runs == 0
        _step(timer, CHECK_S)
        assert schedule.runs == 1
        assert _marker(settings) == start + 2 * CHECK_S * 1000


def test_a_short_interval_is_looked_at_every_interval(settings: Settings) -> None:
    timer = ManualTimer()
    with _schedule(settings, timer, 50) as schedule:
        assert timer.deadlines() == [0.05]
        for expected in (1, 2, 3):
            _step(timer, 0.0625)  # past 50 ms: due at each look
            assert schedule.runs == expected


def test_interval_zero_starts_no_schedule(settings: Settings, tmp_path: Path) -> None:
    timer = ManualTimer()
    env = {**os.environ, "DURABILITY_GC_INTERVAL_MS": "0"}
    with Store(settings.database) as store:
        schedule = GcSchedule(settings, lambda: store, env, threading.Event(), timer=timer)
        schedule.loop()  # returns at once: off
    assert timer.waiting() == 0 and schedule.runs == 0
    assert not (settings.state_dir / "gc-last").exists()
