"""Two services on one state folder (two sockets, one DURABILITY_HOME) each
run the gc schedule: when gc is due, only one of them runs it.  Each used to
read the ``gc-last`` marker, find gc due and run it, so every interval ran
gc twice, the second right after the first."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from durability.config import Settings
from durability.service.gc_schedule import GcSchedule
from durability.store import Store, now_ms
from tests.durability.retention.gckit import Recorder, make_repo
from tests.helpers import wait_for

EXPIRE_ALL = ("[retention]\nkeep_all_days = 0\nhourly_days = 0\ndaily_days = 0\n"
              "pre_restore_days = 0\nprune_grace_s = 0\n")


def test_two_services_run_a_due_gc_once(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(3):
        rec.capture()
    config = tmp_path / "config.toml"
    config.write_text(EXPIRE_ALL)
    env = {**os.environ, "DURABILITY_CONFIG": str(config), "DURABILITY_GC_INTERVAL_MS": "1000"}
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "gc-last").write_text(f"{now_ms() - 60_000}\n")  # gc is due
    stop = threading.Event()
    services = [GcSchedule(settings, lambda: Store(settings.database), env, stop)
                for _ in range(2)]
    lock = rec.capturer.lock(wt, 5)
    lock.acquire()  # a capture holds the worktree: a gc that starts waits for it
    threads = [threading.Thread(target=s.loop, daemon=True) for s in services]
    for t in threads:
        t.start()
    stop.wait(1.5)  # both schedules have found gc due by now
    lock.release()
    wait_for(lambda: sum(s.runs for s in services) >= 1, timeout=60)
    stop.set()
    for t in threads:
        t.join(60)
    assert sum(s.runs for s in services) == 1
    rec.close()
