"""The state store in PostgreSQL: a connection that speaks the store's SQL.

The store's queries and migrations are written once, in the SQL both
databases understand, plus a few SQLite spellings.  ``PgConnection`` wraps a
psycopg 3 connection so that the store's code runs unchanged; it translates,
and only translates, these (docs/how-to/runs.md, "PostgreSQL"):

- ``?`` placeholders become ``%s`` (a literal ``%`` is doubled);
- ``INSERT OR IGNORE INTO`` becomes ``INSERT INTO ... ON CONFLICT DO NOTHING``;
- ``INSERT OR REPLACE INTO t (cols)`` becomes an upsert on ``t``'s primary key;
- ``GROUP_CONCAT(x)`` becomes ``STRING_AGG(x, ',')``, ``IFNULL`` ``COALESCE``;
- ``BEGIN IMMEDIATE`` (one writer at a time, reads inside it current) becomes
  ``BEGIN`` plus a transaction-scoped advisory lock, so a write transaction
  reads, decides and writes exactly as under SQLite's write lock; a plain
  ``BEGIN`` (a consistent read of several tables) becomes a REPEATABLE READ
  transaction, SQLite's snapshot;
- in migrations, column types: ``INTEGER`` becomes ``BIGINT`` (times are
  milliseconds), ``REAL`` ``DOUBLE PRECISION``, ``BLOB`` ``BYTEA`` and
  ``TEXT`` ``TEXT COLLATE "C"`` (byte order, as SQLite sorts).

A migration that translation cannot carry has a per-dialect override,
``NNNN_name.postgresql.sql``, used instead of ``NNNN_name.sql``.  Applied
versions are rows of ``durability_schema`` (SQLite: ``PRAGMA user_version``).

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
from durability.store.host import host_id
from durability.store.text import escape_nul, unescape_nul

if TYPE_CHECKING:
    import psycopg

__all__ = ["URL_SCHEMES", "PgConnection", "PgError", "connect", "convert", "is_url", "migrate",
           "redact", "translate", "translate_ddl"]

URL_SCHEMES = ("postgresql://", "postgres://")


class PgError(DatabaseError):
    """A PostgreSQL error, raised where the store's code expects a database
    error (it catches it as it catches ``sqlite3.Error``)."""


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """``url`` without its password, for messages and listings."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


# -- translation ------------------------------------------------------------

_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_OR_REPLACE = re.compile(r"^\s*INSERT\s+OR\s+REPLACE\s+INTO\s+(\w+)\s*\(([^)]*)\)",
                         re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"\bGROUP_CONCAT\s*\(\s*(DISTINCT\s+)?([^()]+?)\s*\)", re.IGNORECASE)
_IFNULL = re.compile(r"\bIFNULL\s*\(", re.IGNORECASE)
_DDL = re.compile(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)\b", re.IGNORECASE)
_TYPES = (
    (re.compile(r"\bINTEGER\b", re.IGNORECASE), "BIGINT"),
    (re.compile(r"\bREAL\b", re.IGNORECASE), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b", re.IGNORECASE), "BYTEA"),
    (re.compile(r"\bTEXT\b(?!\s+COLLATE)", re.IGNORECASE), 'TEXT COLLATE "C"'),
)


def translate(sql: str, *, placeholders: bool = True,
              primary_key: Any = None) -> str:
    """``sql`` in PostgreSQL's spelling (see the module's docstring).

    ``primary_key(table)`` names the key columns of ``table`` for an
    ``INSERT OR REPLACE``; without it such a statement is refused.
    """
    text = _placeholders(sql) if placeholders else sql
    text = _GROUP_CONCAT.sub(lambda m: f"STRING_AGG({m.group(1) or ''}{m.group(2)}, ',')", text)
    text = _IFNULL.sub("COALESCE(", text)
    if _OR_IGNORE.match(text):
        return _OR_IGNORE.sub("INSERT INTO", text).rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    found = _OR_REPLACE.match(text)
    if found:
        if primary_key is None:
            raise PgError("INSERT OR REPLACE needs the table's primary key")
        table = found.group(1)
        key = list(primary_key(table))
        cols = [c.strip() for c in found.group(2).split(",")]
        rest = [c for c in cols if c not in key]
        action = (f"DO UPDATE SET {', '.join(f'{c}=EXCLUDED.{c}' for c in rest)}" if rest
                  else "DO NOTHING")
        text = _OR_REPLACE.sub(lambda m: f"INSERT INTO {m.group(1)} ({m.group(2)})", text)
        return f"{text.rstrip().rstrip(';')} ON CONFLICT ({', '.join(key)}) {action}"
    return text


def translate_ddl(sql: str) -> str:
    """A migration statement in PostgreSQL's spelling: column types too."""
    text = translate(sql, placeholders=False)
    if _DDL.match(_strip_comments(text)):
        for pattern, replacement in _TYPES:
            text = pattern.sub(replacement, text)
    return text


def _strip_comments(sql: str) -> str:
    return "\n".join(ln for ln in sql.splitlines() if not ln.strip().startswith("--"))


def _placeholders(sql: str) -> str:
    """``?`` outside string literals to ``%s``; every ``%`` doubled (psycopg
    reads ``%`` as the start of a placeholder)."""
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "?" and not quoted:
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


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
    ``in_transaction``, ``close``."""

    def __init__(self, conn: psycopg.Connection[Any], url: str, busy_timeout_ms: int) -> None:
        self._conn = conn
        self.url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._closed = False
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._close_when_dropped()
        self.total_changes = 0
        self._keys: dict[str, list[str]] = {}
        self._translated: dict[str, str] = {}
        self._guard = threading.Lock()
        schema = self._query("SELECT current_schema()", ())[0][0] or "public"
        #: The writers' lock: one per schema, so that databases that share a
        #: server (and tests that share one) do not wait for each other.
        self.lock_key = int.from_bytes(
            hashlib.sha256(f"durability-writer:{schema}".encode()).digest()[:8], "big",
            signed=True)

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
        word = " ".join(sql.split()).upper().rstrip(";")
        if word in ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"):
            self._query("BEGIN", None)
            self._query("SELECT pg_advisory_xact_lock(%s)", (self.lock_key,))
            return PgCursor(None, -1)
        if word in ("BEGIN", "BEGIN DEFERRED"):
            self._query("BEGIN ISOLATION LEVEL REPEATABLE READ", None)
            return PgCursor(None, -1)
        if word.startswith("PRAGMA "):
            return self._pragma(word)
        text = self._translated.get(sql)
        if text is None:  # the store's statements are a few dozen constants
            text = self._translated[sql] = translate(sql, primary_key=self._primary_key)
        return self._run(text, [convert(p) for p in parameters])

    def executemany(self, sql: str, seq: Iterator[Sequence[Any]] | Sequence[Sequence[Any]],
                    /) -> PgCursor:
        total = 0
        for params in seq:
            total += max(self.execute(sql, params).rowcount, 0)
        return PgCursor(None, total)

    def executemany_raw(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` in PostgreSQL's own spelling (``%s``), once per row, in one
        pipelined round trip: the bulk path of ``durability.store.transfer``."""
        import psycopg
        try:
            with self._guard, self._live().cursor() as cur:
                cur.executemany(sql, rows)
        except psycopg.Error as exc:
            raise PgError(_message(exc)) from exc

    def execute_migration(self, sql: str) -> None:
        """One statement of a migration file, types translated, no placeholders."""
        self._query(translate_ddl(sql), None)

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

    def _pragma(self, word: str) -> PgCursor:
        # integrity_check: PostgreSQL checks its own pages; the probe is that
        # the server answers.
        if word == "PRAGMA INTEGRITY_CHECK":
            self._query("SELECT 1", ())
            return PgCursor([("ok",)], -1)
        raise PgError(f"{word} has no PostgreSQL equivalent")

    def _primary_key(self, table: str) -> list[str]:
        if table not in self._keys:
            rows = self._query(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
                "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) "
                "AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)", (table,))
            if not rows:
                raise PgError(f"table {table} has no primary key to replace on")
            self._keys[table] = [str(r[0]) for r in rows]
        return self._keys[table]


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
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        try:
            conn.execute(f"SET lock_timeout = {int(busy_timeout_ms)}")
        except psycopg.Error:
            conn.close()
            raise
    except psycopg.Error as exc:
        raise PgError(_message(exc)) from exc
    return conn


# -- migrations ---------------------------------------------------------------


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
                conn.execute_migration("CREATE TABLE IF NOT EXISTS durability_schema ("
                                       "version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
                if _version(conn) < version:  # else another process won the race
                    for statement in statements(bind_host(sql, host)):
                        conn.execute_migration(statement)
                    conn.execute("INSERT INTO durability_schema (version, name) VALUES (?, ?)",
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
