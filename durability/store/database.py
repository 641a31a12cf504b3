"""Which database holds the state: a SQLite file (the default) or PostgreSQL.

A *location* is either a path (SQLite) or a ``postgresql://`` URL.  Both open
to a connection with the same surface (``Connection``): SQLite's own, or
``durability.store.postgres.PgConnection``.  The store, the run records and
the watches are written once against it, in the SQL both databases read
alike; what each spells its own way is in ``durability.store.dialect``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from durability.store import db, postgres
from durability.store.db import DB_ERRORS, Connection, Cursor
from durability.store.postgres import PgConnection, is_url, redact

__all__ = ["DB_ERRORS", "Connection", "Cursor", "Location", "describe", "file_inode", "is_url",
           "migrate",
           "open_database", "refused_value"]

#: A SQLite file, or a ``postgresql://`` URL.
Location = Path | str


def open_database(location: Location, *,
                  busy_timeout_ms: int = db.BUSY_TIMEOUT_MS) -> Connection:
    """A connection to ``location``, not yet migrated."""
    if is_url(location):
        return postgres.connect(str(location), busy_timeout_ms=busy_timeout_ms)
    return db.connect(Path(location), busy_timeout_ms=busy_timeout_ms)


def migrate(conn: Connection, *, host: str | None = None, upto: int | None = None) -> int:
    """Bring the schema of ``conn``'s database up to date (``db.migrate``)."""
    if isinstance(conn, PgConnection):
        return postgres.migrate(conn, host=host, upto=upto)
    assert isinstance(conn, sqlite3.Connection)
    return db.migrate(conn, host=host, upto=upto)


def file_inode(location: Location) -> int | None:
    """The SQLite file's inode now (a connection kept open on another one
    records where nothing reads it); None under PostgreSQL or when no file
    is there."""
    if is_url(location):
        return None
    try:
        return os.stat(location).st_ino
    except OSError:
        return None


def describe(location: Location) -> str:
    """``location`` for a message: a path, or a URL without its password."""
    return redact(str(location)) if is_url(location) else str(location)


def refused_value(exc: BaseException) -> bool:
    """Whether ``exc`` is the database refusing the values of one statement
    (a value too long for an index, text it cannot hold, a broken
    constraint), not the database being unusable (locked, gone, full): the
    same statement with other values may still succeed."""
    if isinstance(exc, (sqlite3.DataError, sqlite3.IntegrityError, sqlite3.InterfaceError)):
        return True
    state = getattr(exc.__cause__, "sqlstate", None)
    # 22: data exception; 23: integrity constraint; 54: program limit
    # exceeded (an index row too large).
    return isinstance(exc, postgres.PgError) and str(state or "")[:2] in ("22", "23", "54")
