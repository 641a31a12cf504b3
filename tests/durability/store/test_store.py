from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from durability.store import AttemptKey, Gap, NewCheckpoint, NotFound, Store
from durability.store.db import migrations

KEY = AttemptKey("run-1", "node-a", 0, 1)


def new(commit: str, request_id: str, key: AttemptKey = KEY) -> NewCheckpoint:
    return NewCheckpoint(key=key, commit_id=commit, worktree="/w", source="manual",
                         request_id=request_id)


def test_first_capture_creates_run_attempt_and_seq_1(db_location: Path | str) -> None:
    store = Store(db_location)
    done = store.record_checkpoint(new("a" * 40, "r1"))
    assert (done.seq, done.deduped) == (1, False)
    assert store.run_exists("run-1")
    [attempt] = store.attempts("run-1")
    assert attempt.jj_pointer == "a" * 40
    assert attempt.worktree == "/w"


def test_same_commit_is_deduped_and_names_existing_seq(db_location: Path | str) -> None:
    store = Store(db_location)
    store.record_checkpoint(new("a" * 40, "r1"))
    again = store.record_checkpoint(new("a" * 40, "r2"))
    assert (again.seq, again.deduped) == (1, True)
    assert len(store.checkpoints("run-1")) == 1


def test_seq_follows_commits_and_pointer_moves(db_location: Path | str) -> None:
    store = Store(db_location)
    for i, c in enumerate("abcab"):
        store.record_checkpoint(new(c * 40, f"r{i}"))
    rows = store.checkpoints("run-1")
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    assert store.attempts("run-1")[0].jj_pointer == "b" * 40


def test_request_id_replay_returns_original_row(db_location: Path | str) -> None:
    store = Store(db_location)
    store.record_checkpoint(new("a" * 40, "r1"))
    store.record_checkpoint(new("b" * 40, "r2"))
    replay = store.record_checkpoint(new("c" * 40, "r1"))
    assert (replay.seq, replay.commit_id, replay.replayed) == (1, "a" * 40, True)
    assert len(store.checkpoints("run-1")) == 2


def test_seq_survives_reopen_and_other_connections(db_location: Path | str) -> None:
    path = db_location
    Store(path).record_checkpoint(new("a" * 40, "r1"))
    assert Store(path).record_checkpoint(new("b" * 40, "r2")).seq == 2


def test_concurrent_writers_get_contiguous_seqs(db_location: Path | str) -> None:
    path = db_location
    Store(path)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        store = Store(path)
        try:
            for i in range(20):
                store.record_checkpoint(new(f"{n:02d}{i:038d}", f"w{n}-{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    seqs = [r.seq for r in Store(path).checkpoints("run-1")]
    assert seqs == list(range(1, 121))


def test_attempts_are_separate_seq_spaces(db_location: Path | str) -> None:
    store = Store(db_location)
    other = AttemptKey("run-1", "node-a", 0, 2)
    store.record_checkpoint(new("a" * 40, "r1"))
    assert store.record_checkpoint(new("a" * 40, "r2", other)).seq == 1
    assert store.latest_attempt("run-1", "node-a") == other
    assert store.checkpoint(KEY).commit_id == "a" * 40


def test_missing_checkpoint_is_not_found(db_location: Path | str) -> None:
    store = Store(db_location)
    with pytest.raises(NotFound):
        store.checkpoint(KEY, 3)
    with pytest.raises(NotFound):
        store.latest_attempt("nope", "n")


def test_gaps_are_idempotent_by_request_id(db_location: Path | str) -> None:
    store = Store(db_location)
    gap = Gap(ts_ms=1, run_id="run-1", request_id="q1", reason="jj-failed", detail="boom")
    assert store.add_gaps([gap, gap]) == 1
    assert store.add_gaps([gap]) == 0
    assert [g.reason for g in store.gaps("run-1")] == ["jj-failed"]


def test_schema_pragmas_and_integrity(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    assert store.integrity_check() == "ok"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations()[-1][0]
    assert (path.stat().st_mode & 0o777) == 0o600
