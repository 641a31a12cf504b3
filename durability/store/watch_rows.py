"""The watch rows: which worktrees the snapshot service watches (Tier 2), for
which attempt, with which timings, so that a restarted service resumes them
and ``durability unwatch`` can end one when no service runs.

A table of the state database like the others, with its own small class:
the store's methods are records of work (runs, attempts, checkpoints, gaps),
a watch is service configuration.  Foreground watches are not recorded.
One connection, kept behind a lock (decision 0021), opened again when the
database file was replaced or a call failed: an engine run's watch is
re-keyed at every attempt's start capture, inside its request, and opening
a connection there cost more than the write (about 0.5-1 ms).

A watch row's commit does not wait for the disk (decision 0066): an engine
run's watch is re-keyed at every attempt's start capture, and the row is
configuration a power cut may lose at no cost to the record (the run's next
durable write, a checkpoint, a gap or its end rows, carries the fsync that
makes it durable too; the start capture's own checkpoint is committed before
the take-over; a process crash loses nothing either way).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from durability.ground.store_errors import StoreUnavailable
from durability.store.database import (
    DB_ERRORS,
    Connection,
    Location,
    file_inode,
    is_url,
    migrate,
    open_database,
)
from durability.store.db import write_transaction
from durability.store.host import host_id
from durability.store.models import AttemptKey
from durability.store.store import now_ms
from durability.store.text import from_db, to_db

__all__ = ["WatchRow", "Watches"]

_COLS = ("worktree, run_id, node_id, iteration, attempt, settle_ms, max_delay_ms, created_at_ms, "
         "poll")


@dataclass(frozen=True)
class WatchRow:
    """One watched worktree and the attempt its captures belong to."""

    worktree: str
    key: AttemptKey
    settle_ms: int
    max_delay_ms: int
    created_at_ms: int = 0
    poll: bool = False

    def to_dict(self) -> dict[str, object]:
        k = self.key
        return {"worktree": self.worktree, "run_id": k.run_id, "node_id": k.node_id,
                "iteration": k.iteration, "attempt": k.attempt, "settle_ms": self.settle_ms,
                "max_delay_ms": self.max_delay_ms, "created_at_ms": self.created_at_ms,
                "poll": self.poll}


class Watches:
    """The ``watches`` table of the state database at ``location`` (a SQLite
    file or a ``postgresql://`` URL), for one machine's worktrees (``host``,
    default ``durability.store.host.host_id``): a service takes up only its own
    machine's watches, and another machine's watch of the same path is its own."""

    def __init__(self, location: Location, *, host: str | None = None) -> None:
        self.location: Location = location if is_url(location) else Path(location)
        self.host: str = host or host_id()
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._ino: int | None = None  # the SQLite file the connection opened
        with self._open():
            pass  # opened and migrated now: a database that cannot be is said at once

    @contextmanager
    def _open(self) -> Iterator[Connection]:
        """The kept connection, for one call, under the lock; dropped (the
        next call opens another) when the call fails on it."""
        with self._lock:
            conn = self._conn
            ino = file_inode(self.location)
            if conn is not None and ino != self._ino:
                self._drop()  # moved away or replaced: the one there now is the record
                conn = None
            try:
                if conn is None:
                    # Migrated each time: a state database made anew at the
                    # path (by this open, when the registry reaches it first)
                    # has no tables yet.  Up to date, it is one read.
                    conn = self._conn = open_database(self.location)
                    self._ino = file_inode(self.location)
                    migrate(conn, host=self.host)
                yield conn
            except BaseException:
                self._drop()
                raise

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except DB_ERRORS:
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __del__(self) -> None:
        # A registry dropped without close() (a CLI's, a test's) closes its
        # connection now, not at the interpreter's exit.
        if getattr(self, "_conn", None) is not None:
            self._drop()

    def put(self, row: WatchRow) -> None:
        """Record a watch, replacing any earlier watch of the same worktree."""
        k = row.key
        values = (self.host, to_db(row.worktree), k.run_id, k.node_id, k.iteration, k.attempt,
                  row.settle_ms, row.max_delay_ms, row.created_at_ms or now_ms(), int(row.poll))
        try:
            with self._open() as conn, write_transaction(conn, durable=False):
                conn.execute(f"INSERT INTO watches (host, {_COLS}) "
                             "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (host, worktree) "
                             "DO UPDATE SET run_id=excluded.run_id, node_id=excluded.node_id, "
                             "iteration=excluded.iteration, attempt=excluded.attempt, "
                             "settle_ms=excluded.settle_ms, max_delay_ms=excluded.max_delay_ms, "
                             "created_at_ms=excluded.created_at_ms, poll=excluded.poll",
                             values)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot record watch: {exc}") from exc

    def remove(self, worktree: str) -> WatchRow | None:
        """Forget the watch of ``worktree``; returns it when there was one."""
        try:
            with self._open() as conn, write_transaction(conn, durable=False):
                mine = (self.host, to_db(worktree))
                found = conn.execute(f"SELECT {_COLS} FROM watches WHERE host=$1 AND worktree=$2",
                                     mine).fetchone()
                conn.execute("DELETE FROM watches WHERE host=$1 AND worktree=$2", mine)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot remove watch: {exc}") from exc
        return _row(found) if found else None

    def all(self) -> list[WatchRow]:
        """Every recorded watch, by worktree."""
        try:
            with self._open() as conn:
                rows = conn.execute(f"SELECT {_COLS} FROM watches WHERE host=$1 ORDER BY worktree",
                                    (self.host,)).fetchall()
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot read watches: {exc}") from exc
        return [_row(r) for r in rows]


def _row(r: tuple[object, ...]) -> WatchRow:
    worktree, run_id, node_id, iteration, attempt, settle, max_delay, created, poll = r
    key = AttemptKey(str(run_id), str(node_id), int(str(iteration)), int(str(attempt)))
    return WatchRow(str(from_db(worktree)), key, int(str(settle)), int(str(max_delay)),
                    int(str(created)), bool(poll))
