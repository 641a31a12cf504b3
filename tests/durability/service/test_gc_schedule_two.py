"""Two services on one state folder (two sockets, one DURABILITY_HOME) each
run the gc schedule: when gc is due, only one of them runs it.  Each used to
read the ``gc-last`` marker, find gc due and run it, so every interval ran
gc twice, the second right after the first."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from durability.config import Settings
from durability.service.gc_schedule import GcSchedule
from durability.store import Store, now_ms
from durability.store.clock import ManualTimer
from tests.durability.retention.gckit import Recorder, make_repo
from tests.helpers import wait_for

EXPIRE_ALL = ("[retention]\nkeep_all_days = 0\nhourly_days = 0\ndaily_days = 0\n"
              "pre_restore_days = 0\nprune_grace_s = 0\n")


def test_two_services_run_a_due_gc_once(tmp_path: Path, settings: Settings,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """The race of two schedules that find gc due at one instant (one timer
    moves both): exactly one runs it, whichever takes the lock; the other
    skips that tick, and finds it no longer due afterwards."""
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(3):
        rec.capture()
    config = tmp_path / "config.toml"
    config.write_text(EXPIRE_ALL)
    env = {**os.environ, "DURABILITY_CONFIG": str(config), "DURABILITY_GC_INTERVAL_MS": "1000"}
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "gc-last").write_text(f"{now_ms() - 60_000}\n")  # gc is due
    caplog.set_level(logging.INFO, logger="durability")
    stop = threading.Event()
    timer = ManualTimer()
    services = [GcSchedule(settings, lambda: Store(settings.database), env, stop, timer=timer)
                for _ in range(2)]
    lock = rec.capturer.lock(wt, 5)
    lock.acquire()  # a capture holds the worktree: a gc that starts waits for it
    threads = [threading.Thread(target=s.loop, daemon=True) for s in services]
    try:
        for t in threads:
            t.start()
        timer.until_waiting(2)
        timer.advance(1.0)  # both find gc due at once
        timer.until_waiting(1)  # one skipped the tick: the other runs gc
        assert "another service on" in caplog.text
        assert sum(s.runs for s in services) == 0  # the winner waits for the capture
        lock.release()
        wait_for(lambda: sum(s.runs for s in services) >= 1, timeout=60)
        timer.until_waiting(2)
        timer.advance(0.5)  # both look again: not due, the marker is fresh
        timer.until_waiting(2)
    finally:
        if lock.is_locked:
            lock.release()
        stop.set()
        for t in threads:
            t.join(60)
    assert sum(s.runs for s in services) == 1
    rec.close()
