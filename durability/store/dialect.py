"""The two databases the store speaks to, each with its own SQL where they differ.

The store's queries are written once where SQLite and PostgreSQL read the
same text: upserts are ``INSERT ... ON CONFLICT (...) DO UPDATE`` / ``DO
NOTHING`` (SQLite >= 3.24), ``COALESCE``, ``RETURNING``.  What differs is
written here, per database, and chosen by the connection's ``dialect``:

- how a write transaction starts: SQLite's ``BEGIN IMMEDIATE`` takes the
  write lock up front; PostgreSQL's takes the writers' advisory lock (one
  per schema) before its first read, so a write reads, decides and writes
  exactly as under SQLite's lock.  A *narrow* write (one that names the
  keys its decisions depend on: ``record_checkpoint``'s run and request,
  docs/decisions/0059-narrow-writers-lock-on-postgresql.md) takes that
  lock shared and an exclusive lock per key instead, so narrow writes of
  different keys run in parallel while every other write still excludes
  them all;
- how a consistent read of several tables starts (SQLite's deferred
  ``BEGIN`` reads one snapshot; PostgreSQL: REPEATABLE READ);
- a write whose loss at a power cut costs nothing recorded (a watch row:
  service configuration, docs/decisions/0066-watch-rows-commit-lazily.md)
  commits without waiting for the disk: SQLite's ``synchronous=NORMAL``
  for that transaction, PostgreSQL's ``synchronous_commit`` off; the next
  durable commit makes it durable too (one WAL, written in order);
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

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from durability.store.db import Connection

__all__ = ["POSTGRESQL", "SQLITE", "Dialect", "PostgreSQLDialect", "SQLiteDialect",
           "dialect_of"]


class Dialect:
    """What one database spells its own way."""

    #: ``sqlite`` or ``postgresql``: also the folder of its migrations.
    name: ClassVar[str]

    def begin_write(self, conn: Connection, keys: Sequence[str] = (), *,
                    durable: bool = True) -> None:
        """Start a write transaction holding the writers' lock: all of it,
        or, given the ``keys`` every decision of the write depends on, only
        as much as excludes the writers of those keys and every write that
        names none (a database with one writer ignores ``keys``).
        ``durable`` False: its commit may return before the disk has it
        (a crash of the process loses nothing; a power cut may lose it
        unless a durable commit followed); ``end_lazy_write`` puts it back."""
        raise NotImplementedError

    def end_lazy_write(self, conn: Connection) -> None:
        """After the commit or rollback of a write begun not ``durable``:
        undo what ``begin_write`` set for it."""

    def begin_read(self, conn: Connection) -> None:
        """Start a transaction whose reads see one snapshot."""
        raise NotImplementedError

    def integrity_check(self, conn: Connection) -> str:
        """``ok``, or what the database found damaged."""
        raise NotImplementedError


class SQLiteDialect(Dialect):
    name = "sqlite"

    def begin_write(self, conn: Connection, keys: Sequence[str] = (), *,
                    durable: bool = True) -> None:
        if not durable:
            # Per connection, and not inside a transaction: set before the
            # BEGIN, put back by end_lazy_write.  In WAL mode NORMAL syncs the
            # log only at a checkpoint of it, or with the next FULL commit.
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")  # one writer at a time: keys change nothing

    def end_lazy_write(self, conn: Connection) -> None:
        if not conn.in_transaction:
            conn.execute("PRAGMA synchronous=FULL")

    def begin_read(self, conn: Connection) -> None:
        conn.execute("BEGIN")

    def integrity_check(self, conn: Connection) -> str:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


class PostgreSQLDialect(Dialect):
    name = "postgresql"

    def begin_write(self, conn: Connection, keys: Sequence[str] = (), *,
                    durable: bool = True) -> None:
        conn.execute("BEGIN")
        if not durable:
            # This transaction only: the commit returns before the WAL is
            # flushed (the server's WAL writer flushes it within
            # wal_writer_delay; a server crash may lose it, never corrupt).
            conn.execute("SET LOCAL synchronous_commit TO OFF")
        # The key is the schema's (``PgConnection.lock_key``): stores that
        # share a server do not wait for each other.
        schema = _lock_key(conn)
        if not keys:
            # A wide write: alone in the schema, as under SQLite's lock.
            conn.execute("SELECT pg_advisory_xact_lock($1)", (schema,))
            return
        # A narrow write (decision 0059): the schema's lock shared (it waits
        # for, and holds off, every wide write), then one exclusive lock per
        # key, taken in the order of their numbers so that two narrow writes
        # can never each hold a key the other waits for.  One round trip:
        # PostgreSQL evaluates a select list from left to right.
        numbers = sorted({_key_number(conn, key) for key in keys})
        calls = ", ".join(f"pg_advisory_xact_lock(${i})" for i in range(2, len(numbers) + 2))
        conn.execute(f"SELECT pg_advisory_xact_lock_shared($1), {calls}", (schema, *numbers))

    def end_lazy_write(self, conn: Connection) -> None:
        pass  # SET LOCAL ended with the transaction

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


def _key_number(conn: Connection, key: str) -> int:
    number = getattr(conn, "key_lock", None)
    if number is None:
        raise TypeError("a PostgreSQL connection names its narrow writers' locks (key_lock)")
    found = number(key)
    if not isinstance(found, int):
        raise TypeError("a narrow writers' lock is a number")
    return found


SQLITE = SQLiteDialect()
POSTGRESQL = PostgreSQLDialect()


def dialect_of(conn: Connection) -> Dialect:
    """The dialect of ``conn``: a ``PgConnection`` says so; any other
    connection is SQLite's."""
    found = getattr(conn, "dialect", None)
    return found if isinstance(found, Dialect) else SQLITE
