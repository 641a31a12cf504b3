"""SQLite connections and versioned migrations.

Migrations are the ``migrations/<dialect>/NNNN_name.sql`` files of this
package, one folder per database (``sqlite``, ``postgresql``), each written in
its database's own SQL and types: the same versions, under the same file
names, make the same schema on both.  They are applied in order and never
edited once released: a change to the schema is a new file in both folders.
``PRAGMA user_version`` records how far a SQLite database has come (under
PostgreSQL: the rows of ``durability_schema``, ``durability.store.postgres``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from durability.ground.store_errors import StoreUnavailable
from durability.store.dialect import dialect_of
from durability.store.host import host_id, sql_literal

__all__ = ["DB_ERRORS", "DIALECTS", "Connection", "Cursor", "DatabaseError", "NumberedConnection",
           "bind_host", "connect", "marks", "migrate", "migrations", "read_transaction",
           "statements", "write_transaction"]


class DatabaseError(sqlite3.Error):
    """A database error that is not SQLite's: PostgreSQL's, as
    ``durability.store.postgres`` raises it.  A subclass of ``sqlite3.Error`` so that
    code written against SQLite (``except sqlite3.Error``) handles it too."""


#: What a database call may raise, whichever the database.
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError)


class Cursor(Protocol):
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...
    @property
    def rowcount(self) -> int: ...


class Connection(Protocol):
    """The part of ``sqlite3.Connection`` the store uses; PostgreSQL's
    connection (``durability.store.postgres.PgConnection``) has the same."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Any, /) -> Cursor: ...
    def close(self) -> None: ...
    @property
    def total_changes(self) -> int: ...
    @property
    def in_transaction(self) -> bool: ...


def _numbered(parameters: Any) -> Any:
    """A tuple of values as the dict SQLite binds ``$1``, ``$2``, ... from
    (``{"1": v1, ...}``): by number, so a statement may name them in any
    order and more than once."""
    if isinstance(parameters, (dict, str, bytes)):
        return parameters
    return {str(i): v for i, v in enumerate(parameters, 1)}


class NumberedConnection(sqlite3.Connection):
    """A SQLite connection whose statements' ``$N`` placeholders are bound
    from a tuple by number, as PostgreSQL binds them: the store's
    statements are the same text on both databases, run as written."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(sql, _numbered(parameters))

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return super().executemany(sql, (_numbered(p) for p in parameters))


def marks(first: int, count: int) -> str:
    """``count`` placeholders from ``$first`` on, comma separated: an ``IN``
    list of a statement whose earlier parameters are ``$1`` to ``$first-1``."""
    return ",".join(f"${n}" for n in range(first, first + count))


# How long a writer waits for another writer (another process's capture, the
# service's gap ingestion) before giving up with "database is locked".  Captures
# are short, so 10 s only runs out when something is wedged.  The default of
# ``connect`` and ``Store``; a caller (a test of the locked case) may pass less.
BUSY_TIMEOUT_MS = 10_000


#: The SQLite this Python runs, and the oldest the store's SQL needs (the
#: upserts' ``INSERT ... ON CONFLICT ... DO UPDATE``).
SQLITE_VERSION: tuple[int, int, int] = sqlite3.sqlite_version_info
SQLITE_MIN = (3, 24, 0)


def connect(path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open ``path`` with the pragmas every connection needs; a write waits up
    to ``busy_timeout_ms`` for another writer's lock.

    The database is created only when no file exists at ``path``; a file that
    exists but is empty, not a database or unreadable is ``StoreUnavailable``,
    never replaced by a fresh one (its seq numbering would restart at 1).
    """
    if SQLITE_VERSION < SQLITE_MIN:
        raise StoreUnavailable(
            f"SQLite {'.'.join(map(str, SQLITE_VERSION))} is too old for the state database "
            f"(needs {'.'.join(map(str, SQLITE_MIN))} or later): use a Python built with a "
            "newer SQLite")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:  # e.g. the state folder is a file: a clear error, not a traceback
        raise StoreUnavailable(f"cannot create {path.parent}: {exc.strerror}") from exc
    if not os.path.lexists(path):
        _create(path)
    _check_existing(path)
    try:
        # mode=rw: SQLite must not create the file, should it vanish after the check.
        conn = sqlite3.connect(
            f"{Path(path).absolute().as_uri()}?mode=rw", uri=True, isolation_level=None,
            timeout=busy_timeout_ms / 1000, check_same_thread=False,
            factory=NumberedConnection,
        )
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open {path}: {exc}") from exc
    try:
        # WAL: readers (listing, restore) never block the capture writer and a
        # crash mid-write leaves the last committed state intact.
        conn.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged checkpoint survives power loss, not only a
        # killed process; the fsync costs a few ms per capture.
        conn.execute("PRAGMA synchronous=FULL")
        # Wait for a concurrent writer instead of failing at once.
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # Checkpoints must point at attempts that exist.
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        conn.close()
        if "not a database" in str(exc):
            raise StoreUnavailable(f"{path} is not a SQLite database (damaged or overwritten); "
                                   "move it away to start a new, empty record") from exc
        raise StoreUnavailable(f"cannot use {path}: {exc}") from exc
    return conn


def _create(path: Path) -> None:
    """Create an empty database at ``path`` atomically: built under a private
    name, then linked into place, which fails if another process won the race.
    So a file at ``path`` always has a SQLite header, and an empty one can
    only mean damage."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    old = os.umask(0o077)  # the database holds paths and labels: owner only
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # Writes the header; WAL is the mode every connection uses anyway.
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process created it first: use theirs
    except (OSError, sqlite3.Error) as exc:
        raise StoreUnavailable(f"cannot create {path}: {exc}") from exc
    finally:
        os.umask(old)
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)


def _check_existing(path: Path) -> None:
    """Refuse a database file that exists but cannot be the store.

    Only stat, never open: closing any descriptor of the file drops every
    POSIX lock this process holds on it, including those of its open SQLite
    connections, and another process could then delete the WAL they use.
    A file that is not a database is caught by the first pragma instead.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise StoreUnavailable(f"cannot read the state database {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise StoreUnavailable(f"the state database {path} is not a regular file; "
                               "move it away to start a new, empty record")
    if st.st_size == 0:
        raise StoreUnavailable(f"the state database {path} is empty (0 bytes); it held the "
                               "record and was truncated: restore it from a backup or move "
                               "it away to start a new, empty record")


@contextmanager
def write_transaction(conn: Connection, *, keys: Sequence[str] = (),
                      durable: bool = True) -> Iterator[Connection]:
    """One unit of work holding the writers' lock from its start (SQLite:
    ``BEGIN IMMEDIATE``; ``durability.store.dialect``), so the reads inside
    (the next seq) cannot be invalidated by another writer.

    ``keys``: a *narrow* write names every key its reads decide on (a
    checkpoint: its run and its request id), and under PostgreSQL waits only
    for the writes of the same keys and for the writes that name none; a
    write that names none excludes every other (decision 0059).  A write may
    name keys only when no row it reads can be changed by a narrow write of
    another key: a write that decides across runs names none.

    ``durable`` False: the commit does not wait for the disk (decision
    0066): only for rows a power cut may lose at no cost to the record."""
    dialect = dialect_of(conn)
    try:
        try:
            dialect.begin_write(conn, keys, durable=durable)
        except DB_ERRORS as exc:
            _rollback(conn)
            raise StoreUnavailable(f"cannot begin a write: {exc}") from exc
        try:
            yield conn
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except DB_ERRORS as exc:
            _rollback(conn)
            raise StoreUnavailable(f"cannot commit: {exc}") from exc
    finally:
        if not durable:
            try:
                dialect.end_lazy_write(conn)
            except DB_ERRORS:
                pass  # a connection that cannot take a pragma is closed by its owner


@contextmanager
def read_transaction(conn: Connection) -> Iterator[Connection]:
    """Reads of several tables that see one snapshot (``durability.store.dialect``)."""
    dialect_of(conn).begin_read(conn)
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _rollback(conn: Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except DB_ERRORS:
            pass  # the connection is unusable; the caller is already failing


#: The databases, each with its folder of migrations.
DIALECTS = ("sqlite", "postgresql")


def migrations(dialect: str = "sqlite") -> list[tuple[int, str, str]]:
    """``(version, file name, sql)`` for every migration of ``dialect``
    (``migrations/<dialect>/``), in order."""
    if dialect not in DIALECTS:
        raise ValueError(f"no migrations for {dialect!r}")
    found = []
    for entry in resources.files("durability.store.migrations").joinpath(dialect).iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two {dialect} migrations share a version: {versions}")
    return found


def bind_host(sql: str, host: str) -> str:
    """A migration's text with ``:this_host`` (the migrating machine, whose
    the rows already there are) bound: migrations take no parameters."""
    return sql.replace(":this_host", sql_literal(host))


def migrate(conn: sqlite3.Connection, *, host: str | None = None,
            upto: int | None = None) -> int:
    """Bring the schema up to date (up to version ``upto`` when given: a
    test's older store); safe when several processes race.  ``host``: the
    machine the rows already there belong to (``durability.store.host.host_id``)."""
    host = host or host_id()
    try:
        pending = [m for m in migrations() if upto is None or m[0] <= upto]
        if pending and _user_version(conn) < pending[-1][0]:
            # One transaction for every migration due (decision 0055): a new
            # store is made with one commit (one WAL sync) instead of one per
            # migration, and a crash still leaves a whole version, never part.
            with write_transaction(conn):
                current = _user_version(conn)  # another process may have won the race
                for version, _name, sql in pending:
                    if version <= current:
                        continue
                    for statement in statements(bind_host(sql, host)):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={version}")
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot migrate the state database: {exc}") from exc
    return _user_version(conn)


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def statements(sql: str) -> Iterator[str]:
    """The statements of a migration file, one by one."""
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                yield buf
            buf = ""
    if buf.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()
    ):
        raise RuntimeError(f"incomplete SQL statement in migration: {buf[:80]!r}")
