"""Copying a SQLite store into PostgreSQL (``durability migrate --to``).

Every table of the source is copied, whatever migrations made it: the list
comes from the source's own catalogue, not from a list kept here, so tables
that later migrations add are copied too.  Both databases are first brought
to the same schema version.  Rows are upserted on their primary key, so a
second run copies what changed since and adds nothing twice.  Afterwards
every table is verified: the same number of rows, and the same primary keys,
on both sides.

Before anything is written, every table is checked the same way: the target
may hold only keys the source has (it is empty, or an earlier copy of this
store), and an event id it holds must hold the same event.  Another store's
rows are never overwritten: the event log's key is a number every store counts
from 1, so a second machine's ``migrate`` into a shared database would replace
the first one's events.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from durability.ground.store_errors import CopyMismatch, InvalidValue, StoreUnavailable
from durability.store import db, postgres
from durability.store.postgres import PgConnection, PgError, redact

__all__ = ["TableCopy", "copy_store"]

#: Rows per batch: one round trip (psycopg pipelines an executemany).
_BATCH = 1000


@dataclass(frozen=True)
class TableCopy:
    """One table's copy: rows in the source and, after the copy, in the target."""

    table: str
    source_rows: int
    target_rows: int


def copy_store(source: Path, target_url: str) -> list[TableCopy]:
    """Copy the SQLite store at ``source`` into the PostgreSQL store at
    ``target_url`` and verify it; ``CopyMismatch`` when they differ after."""
    if not postgres.is_url(target_url):
        raise InvalidValue("the target must be a postgresql:// URL")
    if not Path(source).is_file():
        raise StoreUnavailable(f"no state database at {source}")
    src = db.connect(Path(source))
    try:
        version = db.migrate(src)
        dst = postgres.connect(target_url, busy_timeout_ms=db.BUSY_TIMEOUT_MS)
        try:
            if postgres.migrate(dst) != version:
                raise StoreUnavailable(f"{redact(target_url)} is at another schema version "
                                       f"than {source} ({version})")
            tables = _tables(src)
            for table in tables:
                _check_target(src, dst, table, _key(src, table))
            return [_copy_table(src, dst, table) for table in tables]
        finally:
            dst.close()
    except (sqlite3.Error, PgError) as exc:
        raise StoreUnavailable(f"cannot copy the state database: {exc}") from exc
    finally:
        src.close()


def _tables(src: sqlite3.Connection) -> list[str]:
    """The source's tables, each after the tables it references."""
    names = [r[0] for r in src.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]
    refs = {t: {r[2] for r in src.execute(f"PRAGMA foreign_key_list({_quote(t)})")} - {t}
            for t in names}
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [t for t in names if t not in ordered and refs[t] <= set(ordered)]
        if not ready:
            raise StoreUnavailable(f"circular references between tables: {refs}")
        ordered.extend(ready)
    return ordered


def _key(src: sqlite3.Connection, table: str) -> list[str]:
    info = list(src.execute(f"PRAGMA table_info({_quote(table)})"))
    key = [str(r[1]) for r in sorted(info, key=lambda r: r[5]) if r[5]]
    if not key:
        raise StoreUnavailable(f"table {table} has no primary key: cannot copy it safely")
    return key


#: Tables whose key is a number each store counts from 1 and whose rows never
#: change: the same key holding other values is another store's row.
_COUNTED = {"events": "id"}


def _check_target(src: sqlite3.Connection, dst: PgConnection, table: str,
                  key: list[str]) -> None:
    """``CopyMismatch`` before any write when the target holds rows that are
    not this store's (keys the source has not; a counted row with other
    values)."""
    keys = ", ".join(key)
    mine = {tuple(postgres.read_back(v) for v in r)
            for r in src.execute(f"SELECT {keys} FROM {_quote(table)}")}
    theirs = {tuple(r) for r in dst.execute(f"SELECT {keys} FROM {table}").fetchall()}
    other = len(theirs - mine)
    if not other and _COUNTED.get(table) in key and len(key) == 1:
        cols = ", ".join(str(r[1]) for r in src.execute(f"PRAGMA table_info({_quote(table)})"))
        order = f"SELECT {cols} FROM {{}} ORDER BY {keys}"
        source_rows = {tuple(postgres.read_back(v) for v in r)
                       for r in src.execute(order.format(_quote(table)))}
        other = sum(1 for r in dst.execute(order.format(table)).fetchall()
                    if tuple(r) not in source_rows)
    if other:
        raise CopyMismatch(
            f"table {table}: the target holds {other} rows that are not this store's "
            f"(another machine's?); nothing was copied: migrate copies a store into an empty "
            f"database or into its own earlier copy")


def _copy_table(src: sqlite3.Connection, dst: PgConnection, table: str) -> TableCopy:
    info = list(src.execute(f"PRAGMA table_info({_quote(table)})"))
    cols = [str(r[1]) for r in info]
    key = _key(src, table)
    col_list = ", ".join(cols)
    rest = [c for c in cols if c not in key]
    action = (f"DO UPDATE SET {', '.join(f'{c}=EXCLUDED.{c}' for c in rest)}" if rest
              else "DO NOTHING")
    sql = (f"INSERT INTO {table} ({col_list}) VALUES ({db.marks(1, len(cols))}) "
           f"ON CONFLICT ({', '.join(key)}) {action}")
    rows = src.execute(f"SELECT {col_list} FROM {_quote(table)}")
    # One transaction per table, under the writers' lock: a reader never sees
    # half a table, and a store in use is not written around.
    with db.write_transaction(dst):
        while batch := rows.fetchmany(_BATCH):
            dst.executemany_raw(sql, [tuple(postgres.convert(v) for v in r) for r in batch])
    return _verify(src, dst, table, key)


def _verify(src: sqlite3.Connection, dst: PgConnection, table: str,
            key: list[str]) -> TableCopy:
    keys = ", ".join(key)
    order = f"SELECT {keys} FROM {table} ORDER BY {keys}"
    mine = [tuple(postgres.read_back(v) for v in r)
            for r in src.execute(f"SELECT {keys} FROM {_quote(table)}")]
    theirs = [tuple(r) for r in dst.execute(order).fetchall()]
    copied = TableCopy(table, len(mine), len(theirs))
    if len(mine) != len(theirs):
        raise CopyMismatch(f"table {table}: {len(mine)} rows in the source, {len(theirs)} in "
                           f"the target (rows the source has not were written there)")
    if set(mine) != set(theirs):
        missing = len(set(mine) - set(theirs))
        raise CopyMismatch(f"table {table}: {missing} keys of the source are not in the target")
    return copied


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
