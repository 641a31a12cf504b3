"""The PostgreSQL backend's own parts (durability/store/postgres.py): statements
run as written, the migrations on both databases, and the writers' lock.  The store's
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
from durability.store.postgres import PgConnection
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


def test_the_driver_receives_each_statement_as_the_store_wrote_it(
        pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # No placeholder (or any other) rewriting between the store and psycopg:
    # what PostgreSQL is sent is the text in the store's source.
    import psycopg
    written: list[str] = []
    received: list[str] = []
    ours, theirs = PgConnection.execute, psycopg.Connection.execute

    def write(self: PgConnection, sql: str, params: object = (), /) -> object:
        written.append(sql)
        return ours(self, sql, params)  # type: ignore[arg-type]

    def receive(self: psycopg.Connection[object], sql: object, *args: object,
                **kwargs: object) -> object:
        received.append(str(sql))
        return theirs(self, sql, *args, **kwargs)  # type: ignore[arg-type]

    with Store(pg_server.fresh_url()) as store:
        monkeypatch.setattr(PgConnection, "execute", write)
        monkeypatch.setattr(psycopg.Connection, "execute", receive)
        key = AttemptKey("r", "n", 0, 1)
        store.record_checkpoint(NewCheckpoint(key=key, commit_id="a" * 40, worktree="/w",
                                              source="manual", request_id="q"))
        assert store.checkpoint(key, 1).commit_id == "a" * 40
        assert [c.seq for c in store.checkpoints("r", "n")] == [1]
    assert len(written) >= 4
    assert received == written


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_numbered_placeholders_bind_by_number_on_both(
        database: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # Out of order, reused, beside a literal ? and % and a LIKE pattern: each
    # $N is the Nth value on both databases, and the literals stay literal.
    location: Path | str = (tmp_path / "s.db" if database == "sqlite"
                            else request.getfixturevalue("pg_server").fresh_url())
    conn = open_database(location)
    try:
        row = conn.execute("SELECT CAST($2 AS TEXT), CAST($1 AS TEXT), CAST($2 AS TEXT), '?', "
                           "'a%b', CAST($1 AS TEXT) LIKE 'x%', 'x?%' LIKE CAST($3 AS TEXT)",
                           ("x1", "two", "x?%")).fetchone()
        assert tuple(row) == ("two", "x1", "two", "?", "a%b", True, True)
        # $10 is the tenth value, not $1 followed by a 0.
        ten = " || ".join(f"CAST(${n} AS TEXT)" for n in range(10, 0, -1))
        many = conn.execute(f"SELECT {ten}", tuple(str(i) for i in range(1, 11))).fetchone()
        assert many[0] == "10987654321"
    finally:
        conn.close()


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
