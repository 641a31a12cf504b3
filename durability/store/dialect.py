"""The two databases the store speaks to, each with its own SQL where they differ.

The store's queries are written once where SQLite and PostgreSQL read the
same text: upserts are ``INSERT ... ON CONFLICT (...) DO UPDATE`` / ``DO
NOTHING`` (SQLite >= 3.24), ``COALESCE``, ``RETURNING``.  What differs is
written here, per database, and chosen by the connection's ``dialect``:

- how a write transaction starts: SQLite's ``BEGIN IMMEDIATE`` takes the
  write lock up front; PostgreSQL's takes the writers' advisory lock (one
  per schema) before its first read, so a write reads, decides and writes
  exactly as under SQLite's lock;
- how a consistent read of several tables starts (SQLite's deferred
  ``BEGIN`` reads one snapshot; PostgreSQL: REPEATABLE READ);
- the integrity check (``PRAGMA integrity_check``; PostgreSQL checks its
  own pages, so the check is that the server answers);
- a comma-separated list of distinct values (``GROUP_CONCAT`` /
  ``STRING_AGG``), in the statements that use it (``store._SESSIONS_SQL``);
- the migrations: ``migrations/sqlite/NNNN_*.sql`` and
  ``migrations/postgresql/NNNN_*.sql``, the same versions meaning the same
  schema, each in its database's types (``db.migrations``).

Placeholders are numbered, ``$1``, ``$2``, ..., which both databases read:
PostgreSQL binds them natively (psycopg's ``RawCursor``), SQLite binds them
by number (``db.NumberedConnection``).  No statement's text is changed at run
time; a statement composed of fragments numbers its placeholders itself
(``db.marks`` for an ``IN`` list).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from durability.store.db import Connection

__all__ = ["POSTGRESQL", "SQLITE", "Dialect", "PostgreSQLDialect", "SQLiteDialect",
           "dialect_of"]


class Dialect:
    """What one database spells its own way."""

    #: ``sqlite`` or ``postgresql``: also the folder of its migrations.
    name: ClassVar[str]

    def begin_write(self, conn: Connection) -> None:
        """Start a write transaction holding the writers' lock."""
        raise NotImplementedError

    def begin_read(self, conn: Connection) -> None:
        """Start a transaction whose reads see one snapshot."""
        raise NotImplementedError

    def integrity_check(self, conn: Connection) -> str:
        """``ok``, or what the database found damaged."""
        raise NotImplementedError


class SQLiteDialect(Dialect):
    name = "sqlite"

    def begin_write(self, conn: Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def begin_read(self, conn: Connection) -> None:
        conn.execute("BEGIN")

    def integrity_check(self, conn: Connection) -> str:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


class PostgreSQLDialect(Dialect):
    name = "postgresql"

    def begin_write(self, conn: Connection) -> None:
        conn.execute("BEGIN")
        # The key is the schema's (``PgConnection.lock_key``): stores that
        # share a server do not wait for each other.
        conn.execute("SELECT pg_advisory_xact_lock($1)", (_lock_key(conn),))

    def begin_read(self, conn: Connection) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")

    def integrity_check(self, conn: Connection) -> str:
        conn.execute("SELECT 1").fetchone()
        return "ok"


def _lock_key(conn: Connection) -> int:
    key = getattr(conn, "lock_key", None)
    if not isinstance(key, int):
        raise TypeError("a PostgreSQL connection names its writers' lock (lock_key)")
    return key


SQLITE = SQLiteDialect()
POSTGRESQL = PostgreSQLDialect()


def dialect_of(conn: Connection) -> Dialect:
    """The dialect of ``conn``: a ``PgConnection`` says so; any other
    connection is SQLite's."""
    found = getattr(conn, "dialect", None)
    return found if isinstance(found, Dialect) else SQLITE
