"""The state store in PostgreSQL: psycopg 3 behind the store's connection surface.

``PgConnection`` runs the store's statements as they are written: the SQL
both databases read alike, and what PostgreSQL spells its own way written
for it in ``durability.store.dialect`` (transactions, the integrity check)
and in ``migrations/postgresql/`` (its types).  Nothing is translated or
rewritten: the statements' ``$1``, ``$2``, ... placeholders are PostgreSQL's
own, bound by the server (psycopg's ``RawCursor``, which leaves ``%`` and
``?`` alone), so the server receives each statement as written.  Values
are converted as ``convert`` says (PostgreSQL's text is UTF-8 without NUL).
Applied versions are rows of ``durability_schema`` (SQLite: ``PRAGMA
user_version``).

psycopg is an optional dependency (the ``postgres`` extra): it is imported
only when a ``postgresql://`` location is opened.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from durability.ground.store_errors import StoreUnavailable
from durability.store.db import DatabaseError, bind_host, migrations, statements, write_transaction
from durability.store.dialect import POSTGRESQL, PostgreSQLDialect
from durability.store.host import host_id
from durability.store.text import escape_nul, unescape_nul

if TYPE_CHECKING:
    import psycopg

__all__ = ["URL_SCHEMES", "PgConnection", "PgError", "connect", "convert",
           "is_url", "migrate", "redact", "scrub"]

URL_SCHEMES = ("postgresql://", "postgres://")


class PgError(DatabaseError):
    """A PostgreSQL error, raised where the store's code expects a database
    error (it catches it as it catches ``sqlite3.Error``)."""


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


# A password given as a parameter of the URL (libpq reads password= and sslpassword=).
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:ssl)?password=)([^&#]*)")


def _userinfo(url: str) -> tuple[int, int] | None:
    """Where the user information of ``url`` lies (``start``, the ``@``):
    everything up to the last ``@`` before the query, so a password that
    holds a ``@`` or a ``/`` (unencoded) is all of it."""
    start = url.find("://")
    if start < 0:
        return None
    start += 3
    query = url.find("?", start)
    at = url.rfind("@", start, len(url) if query < 0 else query)
    return (start, at) if at >= 0 else None


def redact(url: str) -> str:
    """``url`` without its password (the user information's and a
    ``password=`` parameter's), for messages and listings."""
    found = _userinfo(url)
    if found is not None and ":" in url[found[0]:found[1]]:
        start, at = found
        user = url[start:at].split(":", 1)[0]
        url = f"{url[:start]}{user}:***{url[at:]}"
    return _QUERY_PASSWORD.sub(r"\1***", url)


def _secrets(url: str) -> list[str]:
    """The passwords in ``url``, as written and decoded, longest first."""
    from urllib.parse import unquote
    found = []
    where = _userinfo(url)
    if where is not None and ":" in url[where[0]:where[1]]:
        found.append(url[where[0]:where[1]].split(":", 1)[1])
    found += [m.group(2) for m in _QUERY_PASSWORD.finditer(url)]
    # libpq splits a password holding an unencoded @ or / elsewhere (part
    # of it becomes the host): each longer piece is a secret too.
    found += [piece for s in found for piece in re.split(r"[@/:]", s) if len(piece) >= 3]
    every = {s for s in found if s} | {unquote(s) for s in found if s}
    return sorted(every, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` (what libpq or psycopg said about ``url``) without the
    passwords of ``url``: libpq quotes the part of a URL it cannot read,
    which may be a password, or the whole URL."""
    text = text.replace(url, redact(url))
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def convert(value: object) -> object:
    """A value as PostgreSQL can hold it in the column SQLite held it in.

    bool is stored as the integer SQLite stores; bytes (a path that is not
    UTF-8, ``durability.store.text``) as text with the undecodable bytes escaped, since
    PostgreSQL text must be valid UTF-8: deterministic, so lookups by that
    path still match, but it reads back escaped (a documented limitation).
    Text with a NUL, which PostgreSQL's text refuses, is escaped losslessly
    (``durability.store.text.escape_nul``) and read back as it was (``read_back``).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, bytes):
        return escape_nul(value.decode("utf-8", "backslashreplace"))
    if isinstance(value, str):
        return escape_nul(value)
    return value


def read_back(value: object) -> object:
    """What a value written as ``convert(value)`` reads back as."""
    return _from_pg(convert(value))


def _from_pg(value: object) -> object:
    return unescape_nul(value) if isinstance(value, str) else value


def _rows_from_pg(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(_from_pg(v) for v in row) for row in rows]


# -- the connection -----------------------------------------------------------


class PgCursor:
    """The part of ``sqlite3.Cursor`` the store uses."""

    def __init__(self, rows: list[tuple[Any, ...]] | None, rowcount: int) -> None:
        self._rows = rows or []
        self._next = 0
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest = self._rows[self._next:]
        self._next = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class PgConnection:
    """A psycopg connection with the surface of ``sqlite3.Connection`` the
    store uses: ``execute``, ``executemany``, ``total_changes``,
    ``in_transaction``, ``close``; its ``dialect`` is PostgreSQL's."""

    dialect: PostgreSQLDialect = POSTGRESQL

    def __init__(self, conn: psycopg.Connection[Any], url: str, busy_timeout_ms: int) -> None:
        self._conn = conn
        self.url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._closed = False
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._close_when_dropped()
        self.total_changes = 0
        self._guard = threading.Lock()
        schema = self._query("SELECT current_schema()", ())[0][0] or "public"
        self._schema = schema
        #: The writers' lock: one per schema, so that databases that share a
        #: server (and tests that share one) do not wait for each other.
        self.lock_key = _advisory(f"durability-writer:{schema}")

    def key_lock(self, key: str) -> int:
        """The lock of one key a narrow write decides on (``run:<id>``,
        ``request:<id>``; decision 0059), in this connection's schema."""
        return _advisory(f"durability-writer:{self._schema}:{key}")

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self._closed = True
        self._conn.close()

    def _live(self) -> psycopg.Connection[Any]:
        """The connection; a new one when the server dropped the last (it
        restarted, or a network blip): the operation that met the break
        failed, the next one works, and a long-lived service recovers."""
        if self._conn.broken and not self._closed:
            self._conn = _open(self.url, self._busy_timeout_ms)
            self._close_when_dropped()
        return self._conn

    def _close_when_dropped(self) -> None:
        """A store dropped unclosed (as a SQLite connection may be) ends its
        session instead of leaving psycopg to warn about it.  A finalizer,
        not ``__del__``: the garbage collector runs weakref callbacks before
        any ``__del__``, so this closes the session even when the store is
        collected in a cycle together with psycopg's connection."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, self._conn.close)

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> PgCursor:
        """``sql`` as written: its ``$1``, ``$2``, ... are bound by the server
        (psycopg's ``RawCursor``), the text is not changed."""
        return self._run(sql, [convert(p) for p in parameters])

    def executemany(self, sql: str, seq: Iterator[Sequence[Any]] | Sequence[Sequence[Any]],
                    /) -> PgCursor:
        total = 0
        for params in seq:
            total += max(self.execute(sql, params).rowcount, 0)
        return PgCursor(None, total)

    def executemany_raw(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` (its ``$N`` placeholders), once per row, in one pipelined
        round trip: the bulk path of ``durability.store.transfer``."""
        import psycopg
        try:
            with self._guard, self._live().cursor() as cur:
                cur.executemany(sql, rows)
        except psycopg.Error as exc:
            raise PgError(_message(exc)) from exc

    def execute_migration(self, sql: str) -> None:
        """One statement of a migration file, run as written (no parameters)."""
        self._query(sql, None)

    def _run(self, sql: str, params: Sequence[Any]) -> PgCursor:
        import psycopg
        try:
            with self._guard:
                cur = self._live().execute(sql, params)
                rows = _rows_from_pg(cur.fetchall()) if cur.description is not None else None
                count = cur.rowcount
        except psycopg.Error as exc:
            raise PgError(_message(exc)) from exc
        if rows is None and count > 0:
            self.total_changes += count
        return PgCursor(rows, count)

    def _query(self, sql: str, params: Sequence[Any] | None) -> list[tuple[Any, ...]]:
        import psycopg
        try:
            with self._guard:
                cur = self._live().execute(sql, params)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise PgError(_message(exc)) from exc


def _advisory(name: str) -> int:
    """An advisory lock's number for ``name``: 64 bits of its SHA-256.  Any
    text names one (a run id may hold a lone surrogate: it is encoded as is)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()[:8],
                          "big", signed=True)


def _message(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if type(exc).__name__ == "LockNotAvailable":
        return f"database is locked (PostgreSQL: {text})"
    return text


def connect(url: str, *, busy_timeout_ms: int) -> PgConnection:
    """Connect to the PostgreSQL database at ``url``; a write waits up to
    ``busy_timeout_ms`` for another writer (``lock_timeout``)."""
    try:
        import psycopg  # noqa: F401  (the extra may be missing: say so)
    except ImportError as exc:
        raise StoreUnavailable("DURABILITY_DATABASE_URL names PostgreSQL but psycopg is not "
                               "installed: pip install 'worktree-durability[postgres]'") from exc
    try:
        conn = _open(url, busy_timeout_ms)
    except PgError as exc:
        raise StoreUnavailable(f"cannot connect to {redact(url)}: {exc}") from exc
    try:
        return PgConnection(conn, url, busy_timeout_ms)
    except PgError as exc:
        conn.close()
        raise StoreUnavailable(f"cannot use {redact(url)}: {exc}") from exc


def _open(url: str, busy_timeout_ms: int) -> psycopg.Connection[Any]:
    import psycopg
    try:
        # RawCursor: the statements' ``$N`` placeholders go to the server as
        # written (psycopg's own cursor would read ``%s`` and rewrite them).
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10,
                               cursor_factory=psycopg.RawCursor)
        try:
            conn.execute(f"SET lock_timeout = {int(busy_timeout_ms)}")
        except psycopg.Error:
            conn.close()
            raise
    except psycopg.Error as exc:
        # from None: psycopg's own exception may quote the URL too.
        raise PgError(scrub(_message(exc), url)) from None
    return conn


# -- migrations ---------------------------------------------------------------


#: The applied migrations: version and file name (``migrations/postgresql/``).
_SCHEMA_TABLE = ('CREATE TABLE IF NOT EXISTS durability_schema ('
                 'version BIGINT PRIMARY KEY, name TEXT COLLATE "C" NOT NULL)')


def migrate(conn: PgConnection, *, host: str | None = None, upto: int | None = None) -> int:
    """Bring the schema up to date (up to ``upto`` when given); safe when
    several processes race (the writers' lock serialises them, and each
    re-reads the version under it).  ``host``: the machine the rows already
    there belong to (``durability.store.db.migrate``)."""
    host = host or host_id()
    try:
        # One round trip when up to date: every process (each hook) opens the store.
        current = _version(conn)
        for version, name, sql in migrations("postgresql"):
            if current >= version or (upto is not None and version > upto):
                continue
            with write_transaction(conn):
                conn.execute_migration(_SCHEMA_TABLE)
                if _version(conn) < version:  # else another process won the race
                    for statement in statements(bind_host(sql, host)):
                        conn.execute_migration(statement)
                    conn.execute("INSERT INTO durability_schema (version, name) VALUES ($1, $2)",
                                 (version, name))
            current = version
    except PgError as exc:
        raise StoreUnavailable(f"cannot migrate the state database: {exc}") from exc
    return current


def _version(conn: PgConnection) -> int:
    # to_regclass first: no error (which would abort a transaction) on a new database.
    if conn.execute("SELECT to_regclass('durability_schema')").fetchone()[0] is None:
        return 0
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM durability_schema"
                            ).fetchone()[0])
