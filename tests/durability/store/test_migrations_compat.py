"""A database made by the code before the per-dialect migrations migrates on.

Until commit 797b596 the migrations were one folder of SQLite files, which
``durability.store.postgres`` translated for PostgreSQL at run time.  These
tests run that code itself (``git archive 797b596 durability``, in a
subprocess) to make a database, then open it with today's code: the version
bookkeeping (``PRAGMA user_version``; ``durability_schema``) carries on, the
rows stay, and the schema is the one today's files make from nothing.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, db
from durability.store.database import Location, is_url, open_database
from durability.store.dialect import dialect_of
from tests import pg

ROOT = Path(__file__).resolve().parents[3]
#: The last commit whose migrations were translated at run time.
OLD = "797b596"
KEY = AttemptKey("old-run", "n", 0, 1)

_OLD_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import durability
assert durability.__file__.startswith(sys.argv[1]), durability.__file__
from durability.store import database
conn = database.open_database(sys.argv[2])
upto = int(sys.argv[3])
database.migrate(conn, host="old-host", upto=upto or None)
if upto:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES (?, ?)", ("old-run", 1))
    conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, state, "
                 "started_at_ms) VALUES (?, ?, ?, ?, 'running', ?)", ("old-run", "n", 0, 1, 1))
    conn.execute("INSERT INTO workspace_checkpoints (run_id, node_id, iteration, attempt, seq, "
                 "commit_id, worktree, source, request_id, created_at_ms) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 ("old-run", "n", 0, 1, 1, "a" * 40, "/w", "pre-restore", "q-old", 5))
    conn.execute("COMMIT")
conn.close()
"""


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``durability`` package as it was at ``OLD``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD, "durability"],
                             capture_output=True, check=True).stdout
    top = tmp_path_factory.mktemp("old-code")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(top, filter="data")
    assert (top / "durability" / "store" / "migrations" / "0001_core.sql").is_file()
    return top


def _old_store(old_code: Path, location: Location, upto: int) -> None:
    """A database made by the old code, at ``upto`` with a few rows (0: the
    newest version, empty)."""
    subprocess.run([sys.executable, "-c", _OLD_SCRIPT, str(old_code), str(location), str(upto)],
                   check=True, cwd=old_code)


def _another(location: Location, tmp_path: Path, name: str,
             request: pytest.FixtureRequest) -> Location:
    if is_url(location):
        server: pg.PgServer = request.getfixturevalue("pg_server")
        return server.fresh_url()
    return tmp_path / name


def _catalogue(location: Location) -> dict[str, object]:
    """Tables, columns with their types, indexes, constraints and the applied
    versions, as the database describes them."""
    conn = open_database(location)
    try:
        if dialect_of(conn).name == "sqlite":
            return {
                "objects": sorted(conn.execute(
                    "SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()),
                "version": conn.execute("PRAGMA user_version").fetchone()[0],
            }
        return {
            "columns": sorted(conn.execute(
                "SELECT table_name, column_name, data_type, collation_name, is_nullable, "
                "column_default FROM information_schema.columns "
                "WHERE table_schema = current_schema()").fetchall()),
            "indexes": sorted(conn.execute(
                "SELECT tablename, indexname, regexp_replace(indexdef, ' ON \\S+\\.', ' ON ') "
                "FROM pg_indexes WHERE schemaname = current_schema()").fetchall()),
            "constraints": sorted(conn.execute(
                "SELECT c.conrelid::regclass::text, c.contype, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                "WHERE n.nspname = current_schema()").fetchall()),
            "versions": conn.execute(
                "SELECT version, name FROM durability_schema ORDER BY version").fetchall(),
        }
    finally:
        conn.close()


def test_an_old_database_migrates_on_and_keeps_its_rows(
        db_location: Location, old_code: Path, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    # Made by the old code at 0011 (before the machine became part of a
    # worktree's key, 0012, and before the undo points, 0014).
    _old_store(old_code, db_location, 11)
    with Store(db_location, host="new-host") as store:
        [old] = store.checkpoints("old-run")
        assert (old.seq, old.commit_id, old.worktree) == (1, "a" * 40, "/w")
        # 0012 gave the rows already there to the migrating machine.
        assert store.worktree_checkpoints("/w") == [old]
        # 0014 named the pre-restore checkpoint an undo point.
        with store._conn() as conn:
            assert conn.execute("SELECT seq FROM undo_points").fetchall() == [(1,)]
        new = store.record_checkpoint(NewCheckpoint(key=KEY, commit_id="b" * 40, worktree="/w",
                                                    source="manual", request_id="q-new"))
        assert new.seq == 2
    fresh = _another(db_location, tmp_path, "fresh.db", request)
    Store(fresh).close()
    assert _catalogue(db_location) == _catalogue(fresh)


def test_an_old_database_at_the_newest_version_is_the_schema_of_today(
        db_location: Location, old_code: Path, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    # Every migration as the old code applied it (translated, for
    # PostgreSQL) makes what today's per-dialect files make.
    # The old code's newest version, then today's migrations after it (0016
    # on: written per dialect from the start) make what a fresh store makes.
    _old_store(old_code, db_location, 0)
    Store(db_location).close()
    fresh = _another(db_location, tmp_path, "fresh.db", request)
    Store(fresh).close()
    assert _catalogue(db_location) == _catalogue(fresh)


def test_both_databases_have_the_same_migrations() -> None:
    # The same versions under the same file names: PostgreSQL's
    # durability_schema rows name the files.
    sqlite = [(v, n) for v, n, _ in db.migrations("sqlite")]
    assert sqlite == [(v, n) for v, n, _ in db.migrations("postgresql")]
    assert sqlite[0] == (1, "0001_core.sql")
