"""What each database spells its own way (durability/store/dialect.py): the
writers' lock, the snapshot reads, the integrity check, the SQLite the
store's SQL needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable, db
from durability.store.database import Location, is_url, open_database
from durability.store.dialect import POSTGRESQL, SQLITE, dialect_of
from durability.store.postgres import PgConnection
from tests import pg

KEY = AttemptKey("r", "n", 0, 1)


def _checkpoint(request_id: str, commit: str) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id=commit * 40, worktree="/w", source="manual",
                         request_id=request_id)


def test_each_connection_knows_its_dialect(db_location: Location) -> None:
    with Store(db_location) as store:
        assert store.dialect is (POSTGRESQL if is_url(db_location) else SQLITE)
        assert store.integrity_check() == "ok"
        store.record_checkpoint(_checkpoint("q1", "a"))
        [session] = store.sessions()
        assert (session.run_id, session.sources) == ("r", "manual")
    conn = open_database(db_location)
    try:
        assert dialect_of(conn) is store.dialect
    finally:
        conn.close()


def test_a_write_that_timed_out_on_the_lock_leaves_the_store_usable(
        pg_server: pg.PgServer) -> None:
    # A long-lived store (the service's) that once waited too long for the
    # writers' lock must write again once the lock is free: the failed
    # start of the transaction is rolled back, not left aborted.
    url = pg_server.fresh_url()
    Store(url).close()
    holder = open_database(url)
    try:
        with Store(url, busy_timeout_ms=200) as store:
            assert isinstance(holder, PgConnection)
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock($1)", (holder.lock_key,))
            with pytest.raises(StoreUnavailable, match="locked"):
                store.record_checkpoint(_checkpoint("q1", "a"))
            holder.execute("ROLLBACK")
            assert store.record_checkpoint(_checkpoint("q2", "b")).seq == 1
    finally:
        holder.close()


def test_a_sqlite_too_old_for_the_stores_sql_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db, "SQLITE_VERSION", (3, 23, 1))
    with pytest.raises(StoreUnavailable) as err:
        Store(tmp_path / "s.db")
    assert str(err.value).startswith("SQLite 3.23.1 is too old for the state database "
                                     "(needs 3.24.0 or later)")
    assert not (tmp_path / "s.db").exists()


def _commit_mode(conn: db.Connection) -> str:
    """What a commit on ``conn`` now waits for: SQLite's ``synchronous``
    (2: FULL, 1: NORMAL), PostgreSQL's ``synchronous_commit``."""
    if isinstance(conn, PgConnection):
        return str(conn.execute("SHOW synchronous_commit").fetchone()[0])
    return str(conn.execute("PRAGMA synchronous").fetchone()[0])


def test_a_write_that_need_not_wait_for_the_disk_leaves_its_connection_as_it_was(
        db_location: Location) -> None:
    # Decision 0066: a watch row commits without waiting for the disk; the
    # connection's next write (a checkpoint's, on a shared connection) waits
    # as before, whether the lazy write committed or failed.  (The tests'
    # PostgreSQL server runs with synchronous_commit off: this session
    # turns it on, as a production server has it, so the lazy mode shows.)
    from durability.store.watch_rows import Watches, WatchRow

    Store(db_location).close()
    conn = open_database(db_location)
    lazy = "off" if isinstance(conn, PgConnection) else "1"
    if isinstance(conn, PgConnection):
        conn.execute("SET synchronous_commit TO on")
        assert _commit_mode(conn) == "on"
    try:
        durable = _commit_mode(conn)
        if not isinstance(conn, PgConnection):
            assert durable == "2"  # FULL: every other write waits for the disk
        with db.write_transaction(conn, durable=False):
            assert _commit_mode(conn) == lazy
            conn.execute("DELETE FROM watches")
        assert _commit_mode(conn) == durable
        with pytest.raises(RuntimeError), db.write_transaction(conn, durable=False):
            assert _commit_mode(conn) == lazy
            raise RuntimeError("a bug inside the write")
        assert _commit_mode(conn) == durable
        with db.write_transaction(conn):
            assert _commit_mode(conn) == durable
    finally:
        conn.close()
    # The watch rows are written that way, and read back by a new connection.
    watches = Watches(db_location)
    watches.put(WatchRow("/w", KEY, 5, 100))
    assert [r.worktree for r in Watches(db_location).all()] == ["/w"]
    assert watches.remove("/w") is not None
    assert Watches(db_location).all() == []


def test_the_watch_rows_follow_a_replaced_state_database(tmp_path: Path) -> None:
    # The registry keeps one connection; a state database moved away and
    # created anew (what a user does with a damaged one) is the record
    # from then on, as the service's store reopens it.
    from durability.store.watch_rows import Watches, WatchRow

    path = tmp_path / "state.db"
    watches = Watches(path)
    watches.put(WatchRow("/old", KEY, 5, 100))
    path.rename(tmp_path / "moved.db")
    for extra in ("-wal", "-shm"):
        (tmp_path / f"state.db{extra}").unlink(missing_ok=True)
    Store(path).close()
    watches.put(WatchRow("/new", KEY, 5, 100))
    assert [r.worktree for r in Watches(path).all()] == ["/new"]
    assert [r.worktree for r in watches.all()] == ["/new"]
    watches.close()


def test_the_watch_rows_reach_a_state_database_made_anew_first(tmp_path: Path) -> None:
    # The state database deleted while the registry keeps its connection,
    # and the registry the first to reach the path: the file it makes there
    # is migrated, as the service's store migrates the one it reopens, so
    # the watch row is written instead of "no such table" on every call.
    from durability.store.watch_rows import Watches, WatchRow

    path = tmp_path / "state.db"
    watches = Watches(path)
    watches.put(WatchRow("/old", KEY, 5, 100))
    for extra in ("", "-wal", "-shm"):
        (tmp_path / f"state.db{extra}").unlink()
    watches.put(WatchRow("/new", KEY, 5, 100))
    assert [r.worktree for r in watches.all()] == ["/new"]
    watches.close()
    with Store(path) as store:  # the record from then on, with every table
        assert store.integrity_check() == "ok"
    assert [r.worktree for r in Watches(path).all()] == ["/new"]
