"""The service's scheduled gc: it runs on its interval, waits for a capture
holding the worktree lock, logs what it did, and can be turned off."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import filelock
import pytest

from durability.config import Settings
from durability.ground.errors import InvalidInput
from durability.service.gc_schedule import interval_ms
from durability.service.server import Service
from durability.store import Store
from tests.durability.retention.gckit import KEY, Recorder, make_repo
from tests.helpers import wait_for

EXPIRE_ALL = ("[retention]\nkeep_all_days = 0\nhourly_days = 0\ndaily_days = 0\n"
              "pre_restore_days = 0\nprune_grace_s = 0\n")


def _env(tmp_path: Path, interval: str) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text(EXPIRE_ALL)
    return {**os.environ, "DURABILITY_CONFIG": str(config), "DURABILITY_GC_INTERVAL_MS": interval}


def _seqs(settings: Settings) -> list[int]:
    with Store(settings.database) as store:
        return [c.seq for c in store.checkpoints(KEY.run_id)]


def _schedule_busy(settings: Settings) -> bool:
    """Whether a scheduled gc holds the schedule's lock now (taken and let
    go at once when free: the schedule's tick that finds it taken only
    skips, and the next one runs)."""
    lock = filelock.FileLock(settings.lock_dir / "gc-schedule.lock", timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return True
    except OSError:
        return False  # no lock folder yet: no tick so far
    lock.release()
    return False


def test_scheduled_gc_waits_for_the_worktree_lock_then_runs(
        tmp_path: Path, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(3):
        rec.capture()
    lock = rec.capturer.lock(wt, 5)
    lock.acquire()  # a capture of this worktree is running
    caplog.set_level(logging.INFO, logger="durability")
    with Service(settings, env=_env(tmp_path, "50")) as svc:
        assert svc.gc is not None
        wait_for(lambda: (tmp_path / "state" / "gc-last").exists())
        # A due gc is under way (it holds the schedule's lock), waiting for
        # the capture's worktree lock: nothing is dropped meanwhile.
        wait_for(lambda: _schedule_busy(settings), timeout=60)
        assert _seqs(settings) == [1, 2, 3]
        assert svc.gc.runs == 0
        lock.release()
        wait_for(lambda: _seqs(settings) == [3], timeout=60)
        wait_for(lambda: svc.gc is not None and svc.gc.runs >= 1)
    rec.close()
    assert "scheduled gc: dropped 2 of 3 checkpoints" in caplog.text


def test_interval_zero_turns_the_schedule_off(tmp_path: Path, settings: Settings,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="durability")
    with Service(settings, env=_env(tmp_path, "0")):
        wait_for(lambda: "scheduled gc off" in caplog.text)
    assert not (tmp_path / "state" / "gc-last").exists()


def test_interval_comes_from_the_variable_else_the_config() -> None:
    assert interval_ms({}, 24) == 86_400_000
    assert interval_ms({"DURABILITY_GC_INTERVAL_MS": "1000"}, 24) == 1000
    assert interval_ms({"DURABILITY_GC_INTERVAL_MS": "0"}, 24) == 0
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(InvalidInput, match="DURABILITY_GC_INTERVAL_MS"):
            interval_ms({"DURABILITY_GC_INTERVAL_MS": bad}, 24)
