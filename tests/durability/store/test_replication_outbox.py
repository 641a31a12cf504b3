"""The replication outbox as a table (durability/store/outbox.py, migration 0011): its
rows follow checkpoints, remotes and pushes in their own transactions, the
migration and ``repair`` rebuild it from the history, and the replicator's
look at it does not grow with the history (issue 15)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable
from durability.store.database import Location, migrate, open_database
from durability.store.db import write_transaction
from durability.store.gc_rows import apply
from durability.store.host import host_id
from durability.store.remote_rows import _PENDING_SQL, FAILED, PUSHED, Remotes

KEY = AttemptKey("run-1", "node-a", 0, 1)


def _record(store: Store, n: int, worktree: str = "/w") -> str:
    request_id = f"r{n}"
    store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=f"{n:040x}", worktree=worktree,
                                          source="manual", request_id=request_id))
    return request_id


def _outbox(location: Location) -> set[tuple[str, str]]:
    conn = open_database(location)
    try:
        return {(str(r[0]), str(r[1])) for r in conn.execute(
            "SELECT request_id, remote FROM replication_outbox").fetchall()}
    finally:
        conn.close()


def _due(remotes: Remotes) -> list[tuple[str, str]]:
    return [(p.checkpoint.request_id, p.remote.name) for p in remotes.pending()]


def test_rows_follow_checkpoints_remotes_and_pushes(db_location: Location) -> None:
    store, remotes = Store(db_location), Remotes(db_location)
    with store:
        _record(store, 1)
        assert _outbox(db_location) == set()  # no remote: a capture queues nothing
        remotes.add("/w", "a", "file:///a.git")  # the earlier checkpoint is due on it
        _record(store, 2)
        _record(store, 3, worktree="/elsewhere")
        remotes.add("/w", "b", "file:///b.git")
        assert _due(remotes) == [("r1", "a"), ("r2", "a"), ("r1", "b"), ("r2", "b")]
        remotes.mark(remotes.pending()[:1], PUSHED)
        remotes.mark(remotes.pending()[:1], FAILED, "unreachable")
        assert _outbox(db_location) == {("r2", "a"), ("r1", "b"), ("r2", "b")}
        [failed] = [p for p in remotes.pending() if p.state == FAILED]
        assert (failed.checkpoint.request_id, failed.remote.name) == ("r2", "a")
        remotes.remove("/w", "b")
        assert _outbox(db_location) == {("r2", "a")}
        remotes.mark(remotes.pending(), PUSHED)  # a failed one pushed at last
        assert _outbox(db_location) == set()
        assert remotes.states(store.checkpoints("run-1"))["r2"] == {"a": "pushed"}


def test_a_replayed_or_unchanged_capture_queues_nothing_twice(db_location: Location) -> None:
    with Store(db_location) as store:
        remotes = Remotes(db_location)
        remotes.add("/w", "a", "file:///a.git")
        _record(store, 1)
        _record(store, 1)  # the same request again: its row, not a second one
        store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=f"{1:040x}", worktree="/w",
                                              source="manual", request_id="same-commit"))
        assert _due(remotes) == [("r1", "a")]


def test_imported_checkpoints_are_due_on_the_other_remotes_only(
        db_location: Location, tmp_path: Path) -> None:
    with Store(tmp_path / "source.db") as source:
        for n in (1, 2):
            _record(source, n)
        rows = source.checkpoints("run-1")
    remotes = Remotes(db_location)
    remotes.add("/w", "from", "file:///from.git")
    remotes.add("/w", "other", "file:///other.git")
    assert remotes.import_checkpoints(rows, pushed_to="from") == 2
    assert _due(remotes) == [("r1", "other"), ("r2", "other")]


def test_gc_dropping_a_checkpoint_drops_its_rows(db_location: Location) -> None:
    with Store(db_location) as store:
        remotes = Remotes(db_location)
        for n in (1, 2):
            _record(store, n)
        remotes.add("/w", "a", "file:///a.git")  # after gc planned: both are due
        first = store.checkpoints("run-1")[0]
        assert apply(store, [first]).dropped == 1
        assert _outbox(db_location) == {("r2", "a")}
        assert _due(remotes) == [("r2", "a")]


def _as_before_the_outbox(location: Location) -> None:
    """The store as a toolkit older than migration 0011 left it: remotes a
    and b of /w, checkpoints r1..r5 of /w and r9 of /no-remote, r1..r3
    pushed to a, r1 failed on b."""
    conn = open_database(location)
    try:
        migrate(conn, upto=10)
        with write_transaction(conn):
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ('run-1', 1)")
            conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, "
                         "started_at_ms) VALUES ('run-1', 'node-a', 0, 1, 1)")
            for name in ("a", "b"):
                conn.execute("INSERT INTO remotes (worktree, name, url, created_at_ms) "
                             "VALUES ('/w', $1, $2, 1)", (name, f"file:///{name}.git"))
            for n, worktree in [(1, "/w"), (2, "/w"), (3, "/w"), (4, "/w"), (5, "/w"),
                                (6, "/no-remote")]:
                conn.execute("INSERT INTO workspace_checkpoints (run_id, node_id, iteration, "
                             "attempt, seq, commit_id, worktree, source, request_id, "
                             "created_at_ms) VALUES ('run-1', 'node-a', 0, 1, $1, $2, $3, "
                             "'manual', $4, $5)", (n, f"{n:040x}", worktree,
                                                 f"r{9 if n == 6 else n}", n))
            rows = [(f"r{n}", "a", "pushed", None) for n in (1, 2, 3)] + [("r1", "b", "failed",
                                                                          "x")]
            for req, remote, state, error in rows:
                conn.execute("INSERT INTO replication (request_id, worktree, remote, state, "
                             "updated_at_ms, error) VALUES ($1, '/w', $2, $3, 1, $4)",
                             (req, remote, state, error))
    finally:
        conn.close()


def test_the_migration_rebuilds_the_outbox_from_the_history(db_location: Location) -> None:
    _as_before_the_outbox(db_location)
    again = Remotes(db_location)  # migrates
    due = [(p.checkpoint.request_id, p.remote.name, p.state) for p in again.pending()]
    assert due == [("r4", "a", None), ("r5", "a", None), ("r1", "b", "failed"),
                   ("r2", "b", None), ("r3", "b", None), ("r4", "b", None), ("r5", "b", None)]
    assert again.repair() is False


def test_repair_queues_what_an_older_toolkit_recorded_without_rows(
        db_location: Location) -> None:
    with Store(db_location) as store:
        remotes = Remotes(db_location)
        remotes.add("/w", "a", "file:///a.git")
        for n in (1, 2, 3):
            _record(store, n)
        remotes.mark(remotes.pending()[:1], PUSHED)
    conn = open_database(db_location)
    try:
        with write_transaction(conn):  # what an older toolkit's captures left
            conn.execute("DELETE FROM replication_outbox")
    finally:
        conn.close()
    assert remotes.pending() == []
    assert remotes.repair() is True
    assert _due(remotes) == [("r2", "a"), ("r3", "a")]  # never the pushed one
    assert remotes.repair() is False


def _steps(path: Path) -> int:
    """SQLite virtual-machine steps of the replicator's look at the outbox: a
    count of the work the query does, not a clock."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = sqlite3.connect(path)
    try:
        conn.set_progress_handler(count, 1)
        rows = conn.execute(_PENDING_SQL, {"1": host_id()}).fetchall()
    finally:
        conn.close()
    assert len(rows) == 1  # the one checkpoint still to push
    return steps


def _history(path: Path, pushed: int) -> None:
    """``pushed`` more checkpoints of /w, each on its remote already (rows
    as the store writes them, inserted at once: thousands of captures
    would take minutes)."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany(
                "INSERT INTO workspace_checkpoints (run_id, node_id, iteration, attempt, seq, "
                "commit_id, worktree, source, request_id, created_at_ms, harness, host) "
                "VALUES ('run-h', 'n', 0, 1, ?, ?, '/w', 'hook', ?, ?, 'claude', ?)",
                [(n, f"{n:040x}", f"h{n}", n, host_id()) for n in range(1, pushed + 1)])
            conn.executemany(
                "INSERT INTO replication (request_id, worktree, host, remote, state, "
                "updated_at_ms) VALUES (?, '/w', ?, 'a', 'pushed', 1)",
                [(f"h{n}", host_id()) for n in range(1, pushed + 1)])
    finally:
        conn.close()


@pytest.mark.sqlite_file
def test_the_idle_look_does_not_grow_with_the_history(tmp_path: Path) -> None:
    looks = {}
    for pushed in (100, 5000):
        path = tmp_path / f"{pushed}.db"
        with Store(path) as store:
            Remotes(path).add("/w", "a", "file:///a.git")
            _record(store, 1)  # the one checkpoint left to push
        _history(path, pushed)
        looks[pushed] = _steps(path)
    # The derived outbox of 0010 took about 50 times the steps at 50 times
    # the history; the table's look is the same (a little slack for the
    # indexes' depth).
    assert looks[5000] <= looks[100] * 1.2, looks


def test_a_kept_connection_serves_every_look_and_recovers_from_a_break(
        db_location: Location, monkeypatch: pytest.MonkeyPatch) -> None:
    import durability.store.remote_rows

    opened = []

    def counting(location: Location) -> object:
        opened.append(location)
        return open_database(location)

    monkeypatch.setattr(durability.store.remote_rows, "open_database", counting)
    remotes = Remotes(db_location, keep_open=True)
    try:
        remotes.add("/w", "a", "file:///a.git")
        for _ in range(5):
            assert remotes.pending() == []
        assert len(opened) == 1  # one connection for every look (the replicator's 2 s poll)
        kept = remotes._kept
        assert kept is not None
        kept.close()  # broken under it
        with pytest.raises(StoreUnavailable):
            remotes.pending()
        assert remotes.pending() == []  # the next look opens another
        assert len(opened) == 2
    finally:
        remotes.close()
    assert remotes._kept is None
    assert len(Remotes(db_location).all()) == 1


@pytest.mark.sqlite_file
def test_the_state_of_one_checkpoint_does_not_read_the_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`show` asks for one checkpoint's replication state: the store reads
    that checkpoint's rows, not every row of its worktree."""
    import durability.store.remote_rows

    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    def counting(location: Location) -> object:
        conn = open_database(location)
        assert isinstance(conn, sqlite3.Connection)
        conn.set_progress_handler(count, 1)
        return conn

    looks = {}
    for pushed in (100, 5000):
        path = tmp_path / f"{pushed}.db"
        with Store(path) as store:
            Remotes(path).add("/w", "a", "file:///a.git")
            _record(store, 1)
            shown = store.checkpoints("run-1")
        _history(path, pushed)
        remotes = Remotes(path)
        with monkeypatch.context() as patch:
            patch.setattr(durability.store.remote_rows, "open_database", counting)
            steps = 0
            assert remotes.states(shown) == {"r1": {"a": "pending"}}
            looks[pushed] = steps
    assert looks[5000] <= looks[100] * 1.2, looks
