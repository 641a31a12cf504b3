"""The SQLite busy timeout, a ``Store`` parameter: how long a write waits for
another connection's lock before it fails with ``StoreUnavailable``."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable
from durability.store.db import BUSY_TIMEOUT_MS

KEY = AttemptKey("run-1", "node-a", 0, 1)


def _checkpoint(commit: str, request_id: str) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id=commit, change_id="c", operation_id="o",
                         worktree="/w", source="manual", request_id=request_id)


def _busy_timeout(store: Store) -> int:
    with store._conn() as conn:
        value: int = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    return value


def test_the_default_is_ten_seconds(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        assert BUSY_TIMEOUT_MS == 10_000
        assert store.busy_timeout_ms == _busy_timeout(store) == 10_000


def test_a_write_behind_a_held_lock_fails_with_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path, busy_timeout_ms=200) as store:
        assert _busy_timeout(store) == 200
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN EXCLUSIVE")
            with pytest.raises(StoreUnavailable, match="locked"):
                store.record_checkpoint(_checkpoint("a" * 40, "r1"))
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        # The failed write left nothing behind and the store still works.
        assert store.checkpoints("run-1") == []
        assert store.record_checkpoint(_checkpoint("a" * 40, "r1")).seq == 1


def test_a_write_waits_for_a_lock_released_within_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path, busy_timeout_ms=BUSY_TIMEOUT_MS) as store:
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.3, blocker.execute, args=("ROLLBACK",))
        release.start()
        try:
            assert store.record_checkpoint(_checkpoint("b" * 40, "r2")).seq == 1
        finally:
            release.join()
            blocker.close()
