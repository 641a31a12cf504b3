"""The PostgreSQL backend's own parts (durability/store/postgres.py): placeholder
binding, the migrations on both databases, and the writers' lock.  The store's
behaviour on both databases is tested by the parametrised store and lifecycle
tests (``db_location``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable, db
from durability.store.database import open_database
from durability.store.dialect import POSTGRESQL
from durability.store.postgres import PgConnection, bind_placeholders
from tests import pg


def _columns_sqlite(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})"))
                for t in tables}
    finally:
        conn.close()


def _columns_pg(url: str) -> dict[str, list[str]]:
    conn = open_database(url)
    try:
        rows = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = current_schema() AND table_name <> "
                            "'durability_schema'").fetchall()
    finally:
        conn.close()
    found: dict[str, list[str]] = {}
    for table, column in rows:
        found.setdefault(table, []).append(column)
    return {t: sorted(c) for t, c in sorted(found.items())}


def test_every_migration_applies_on_both_to_the_same_tables_and_columns(
        tmp_path: Path, pg_server: pg.PgServer) -> None:
    # Whatever migration files exist (later ones too): each applies on both,
    # and both end with the same tables holding the same columns.
    url = pg_server.fresh_url()
    Store(tmp_path / "s.db").close()
    with Store(url):
        pass
    last = db.migrations()[-1][0]
    conn = open_database(url)
    try:
        applied = [r[0] for r in conn.execute(
            "SELECT version FROM durability_schema ORDER BY version").fetchall()]
    finally:
        conn.close()
    assert applied == [v for v, _, _ in db.migrations("postgresql")]
    assert applied[-1] == last
    assert _columns_pg(url) == _columns_sqlite(tmp_path / "s.db")


def test_migrating_twice_and_racing_is_harmless(pg_server: pg.PgServer) -> None:
    url = pg_server.fresh_url()
    failed: list[BaseException] = []

    def open_close() -> None:
        try:
            Store(url).close()
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)

    racers = [threading.Thread(target=open_close) for _ in range(4)]
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    assert not failed
    with Store(url) as store:
        store.record_checkpoint(NewCheckpoint(key=AttemptKey("r", "n", 0, 1), commit_id="a" * 40,
                                              worktree="/w", source="manual", request_id="q"))
        assert store.checkpoint(AttemptKey("r", "n", 0, 1)).seq == 1


def test_placeholders_are_bound_and_nothing_else_changes() -> None:
    assert (bind_placeholders("SELECT a FROM t WHERE b=? AND c LIKE 'x?%'")
            == "SELECT a FROM t WHERE b=%s AND c LIKE 'x?%%'")
    upsert = ("INSERT INTO approvals (run_id, node_id) VALUES (?, ?) ON CONFLICT "
              "(run_id, node_id) DO UPDATE SET node_id=excluded.node_id")
    assert bind_placeholders(upsert) == upsert.replace("?", "%s")


def test_the_migrations_are_written_in_postgresqls_types() -> None:
    # No SQLite type is left for a translation to widen: times are BIGINT
    # milliseconds, text sorts by bytes as SQLite sorts.
    for _, name, sql in db.migrations("postgresql"):
        body = "\n".join(ln for ln in sql.splitlines() if not ln.strip().startswith("--"))
        assert " INTEGER" not in body.upper(), name
        assert " REAL" not in body.upper(), name
        assert "INSERT OR" not in body.upper(), name
        for line in body.splitlines():
            if " TEXT" in line.upper():
                assert 'TEXT COLLATE "C"' in line, (name, line)


def test_a_write_waits_for_the_writers_lock_then_fails_one_line(
        pg_server: pg.PgServer) -> None:
    url = pg_server.fresh_url()
    Store(url).close()
    holder = open_database(url)
    assert isinstance(holder, PgConnection)
    POSTGRESQL.begin_write(holder)
    try:
        with Store(url, busy_timeout_ms=200) as store, pytest.raises(StoreUnavailable) as err:
            store.record_checkpoint(NewCheckpoint(
                key=AttemptKey("r", "n", 0, 1), commit_id="a" * 40, worktree="/w",
                source="manual", request_id="q"))
        assert "database is locked" in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_path_that_is_not_utf8_is_found_again_but_reads_back_escaped(
        db_location: Path | str) -> None:
    # PostgreSQL text must be UTF-8: such a path is stored escaped (docs/how-to/runs.md).
    odd = "/w/caf\udce9"
    with Store(db_location) as store:
        store.record_checkpoint(NewCheckpoint(key=AttemptKey("r", "n", 0, 1), commit_id="a" * 40,
                                              worktree=odd, source="manual", request_id="q"))
        [row] = store.worktree_checkpoints(odd)
    assert row.worktree == (odd if isinstance(db_location, Path) else "/w/caf\\xe9")


def test_a_store_whose_connection_was_dropped_fails_once_then_works(
        pg_server: pg.PgServer) -> None:
    # A long-lived service must not need a restart after the server dropped
    # its connection (the server restarted, a network blip).
    url = pg_server.fresh_url()
    key = AttemptKey("r", "n", 0, 1)
    with Store(url) as store:
        store.record_checkpoint(NewCheckpoint(key=key, commit_id="a" * 40, worktree="/w",
                                              source="manual", request_id="q1"))
        killer = open_database(url)
        try:
            killer.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                           "pid <> pg_backend_pid() AND query NOT LIKE '%pg_stat_activity%' "
                           "AND datname = current_database() AND backend_type = "
                           "'client backend' AND state = 'idle'")
        finally:
            killer.close()
        with pytest.raises(StoreUnavailable):
            store.checkpoints("r")
        again = store.record_checkpoint(NewCheckpoint(key=key, commit_id="b" * 40,
                                                      worktree="/w", source="manual",
                                                      request_id="q2"))
        assert again.seq == 2
