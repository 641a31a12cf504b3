"""The PostgreSQL backend's own parts (durability/store/postgres.py): the translation of
the store's SQL, the migrations on both databases, the per-dialect override
files, and the writers' lock.  The store's behaviour on both databases is
tested by the parametrised store and lifecycle tests (``db_location``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable, db
from durability.store.database import open_database
from durability.store.postgres import PgConnection, translate, translate_ddl
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


def test_a_postgresql_override_file_replaces_its_migration_there_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "0001_a.sql").write_text("CREATE TABLE a (x INTEGER PRIMARY KEY);\n")
    (tmp_path / "0001_a.postgresql.sql").write_text("CREATE TABLE a (x BIGINT PRIMARY KEY);\n")
    (tmp_path / "0002_b.sql").write_text("CREATE TABLE b (y TEXT PRIMARY KEY);\n")
    monkeypatch.setattr(db.resources, "files", lambda _pkg: tmp_path)
    assert [n for _, n, _ in db.migrations()] == ["0001_a.sql", "0002_b.sql"]
    assert [n for _, n, _ in db.migrations("postgresql")] == ["0001_a.postgresql.sql",
                                                                "0002_b.sql"]


@pytest.mark.parametrize(("sqlite_sql", "postgresql"), [
    ("SELECT a FROM t WHERE b=? AND c LIKE 'x?%'",
     "SELECT a FROM t WHERE b=%s AND c LIKE 'x?%%'"),
    ("INSERT OR IGNORE INTO runs (run_id) VALUES (?)",
     "INSERT INTO runs (run_id) VALUES (%s) ON CONFLICT DO NOTHING"),
    ("SELECT GROUP_CONCAT(DISTINCT source), IFNULL(x, 0) FROM t",
     "SELECT STRING_AGG(DISTINCT source, ','), COALESCE(x, 0) FROM t"),
])
def test_translation_of_the_stores_sqlite_spellings(sqlite_sql: str, postgresql: str) -> None:
    assert translate(sqlite_sql) == postgresql


def test_insert_or_replace_becomes_an_upsert_on_the_primary_key() -> None:
    got = translate("INSERT OR REPLACE INTO approvals (run_id, node_id, decision) "
                    "VALUES (?,?,?)", primary_key=lambda table: ["run_id", "node_id"])
    assert got == ("INSERT INTO approvals (run_id, node_id, decision) VALUES (%s,%s,%s) "
                   "ON CONFLICT (run_id, node_id) DO UPDATE SET decision=EXCLUDED.decision")


def test_migration_types_are_widened_and_sorted_as_sqlite_sorts() -> None:
    got = translate_ddl("CREATE TABLE t (\n  -- a comment\n  at_ms INTEGER NOT NULL,\n"
                        "  cost REAL,\n  name TEXT PRIMARY KEY\n)")
    assert "at_ms BIGINT NOT NULL" in got
    assert "cost DOUBLE PRECISION" in got
    assert 'name TEXT COLLATE "C" PRIMARY KEY' in got
    assert translate_ddl("CREATE INDEX i ON t(name)") == "CREATE INDEX i ON t(name)"


def test_a_write_waits_for_the_writers_lock_then_fails_one_line(
        pg_server: pg.PgServer) -> None:
    url = pg_server.fresh_url()
    Store(url).close()
    holder = open_database(url)
    assert isinstance(holder, PgConnection)
    holder.execute("BEGIN IMMEDIATE")
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
