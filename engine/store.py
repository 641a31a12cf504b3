"""The state store: runs, attempts, workspace checkpoints and gaps in SQLite.

One ``Store`` per process and database file.  Each thread gets its own
connection; every write is one ``BEGIN IMMEDIATE`` transaction, so seq numbers
are assigned by the database and stay monotonic across processes and restarts.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.clock import system_clock
from engine.db import BUSY_TIMEOUT_MS, connect, migrate, write_transaction
from engine.errors import NotFound, StoreUnavailable
from engine.models import Attempt, AttemptKey, Checkpoint, Gap, NewCheckpoint, Recorded

__all__ = ["Store", "now_ms"]

_CHECKPOINT_COLS = (
    "run_id, node_id, iteration, attempt, seq, commit_id, change_id, operation_id, "
    "worktree, source, tool_use_id, label, request_id, created_at_ms"
)
_ATTEMPT_COLS = (
    "run_id, node_id, iteration, attempt, state, started_at_ms, finished_at_ms, "
    "heartbeat_at_ms, worktree, jj_pointer, error_json"
)
_GAP_COLS = (
    "ts_ms, run_id, request_id, reason, node_id, iteration, attempt, worktree, "
    "source, tool_use_id, detail"
)
_KEY_WHERE = "run_id=? AND node_id=? AND iteration=? AND attempt=?"


#: The store's default clock (kept under this name for its callers).
now_ms = system_clock


class Store:
    """The state database at ``path`` (created and migrated on first use).

    One connection, shared by the threads of a process behind a lock: SQLite
    serialises writers anyway, and a connection per thread would leak one for
    every short-lived thread of a long-running service.  A write waits up to
    ``busy_timeout_ms`` for another process's write lock, then fails with
    ``StoreUnavailable``.
    """

    def __init__(self, path: Path, *, clock: Callable[[], int] = now_ms,
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        self.busy_timeout_ms = busy_timeout_ms
        self._db: sqlite3.Connection | None = connect(self.path, busy_timeout_ms=busy_timeout_ms)
        migrate(self._db)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        """The connection, held exclusively for one unit of work."""
        with self._lock:
            if self._db is None:
                raise StoreUnavailable(f"the store at {self.path} is closed")
            yield self._db

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._conn() as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc

    # -- checkpoints -------------------------------------------------------

    def record_checkpoint(self, new: NewCheckpoint) -> Recorded:
        """Record a captured commit for an attempt (contract 3, docs/DESIGN.md).

        Creates the run and attempt on first sight.  In one transaction: a
        request id seen before returns its row; a commit equal to the
        attempt's latest checkpoint adds nothing; otherwise the next seq is
        inserted and the attempt's ``jj_pointer`` moves to the commit.
        """
        now = self._clock()
        try:
            with self._conn() as db, write_transaction(db) as conn:
                return self._record(conn, new, now)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot record checkpoint: {exc}") from exc

    def _record(self, conn: sqlite3.Connection, new: NewCheckpoint, now: int) -> Recorded:
        seen = conn.execute(
            "SELECT seq, commit_id FROM workspace_checkpoints WHERE request_id=?",
            (new.request_id,),
        ).fetchone()
        if seen:
            return Recorded(seq=seen[0], commit_id=seen[1], deduped=False, replayed=True)
        k = new.key
        self._ensure_attempt(conn, k, new.worktree, now)
        latest = conn.execute(
            f"SELECT seq, commit_id FROM workspace_checkpoints WHERE {_KEY_WHERE} "
            "ORDER BY seq DESC LIMIT 1",
            (k.run_id, k.node_id, k.iteration, k.attempt),
        ).fetchone()
        if latest and latest[1] == new.commit_id:
            return Recorded(seq=latest[0], commit_id=new.commit_id, deduped=True)
        seq = (latest[0] if latest else 0) + 1
        conn.execute(
            f"INSERT INTO workspace_checkpoints ({_CHECKPOINT_COLS}) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (k.run_id, k.node_id, k.iteration, k.attempt, seq, new.commit_id, new.change_id,
             new.operation_id, new.worktree, new.source, new.tool_use_id, new.label,
             new.request_id, now),
        )
        conn.execute(
            f"UPDATE attempts SET jj_pointer=?, worktree=? WHERE {_KEY_WHERE}",
            (new.commit_id, new.worktree, k.run_id, k.node_id, k.iteration, k.attempt),
        )
        return Recorded(seq=seq, commit_id=new.commit_id, deduped=False)

    def _ensure_attempt(
        self, conn: sqlite3.Connection, k: AttemptKey, worktree: str | None, now: int
    ) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO runs (run_id, created_at_ms) VALUES (?, ?)", (k.run_id, now)
        )
        conn.execute(
            "INSERT OR IGNORE INTO attempts (run_id, node_id, iteration, attempt, state, "
            "started_at_ms, worktree) VALUES (?,?,?,?,'running',?,?)",
            (k.run_id, k.node_id, k.iteration, k.attempt, now, worktree),
        )

    def ensure_attempt(self, key: AttemptKey, worktree: str | None = None) -> None:
        """Create the run and attempt rows if they do not exist yet."""
        try:
            with self._conn() as db, write_transaction(db) as conn:
                self._ensure_attempt(conn, key, worktree, self._clock())
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot record attempt: {exc}") from exc

    def checkpoints(self, run_id: str, node_id: str | None = None) -> list[Checkpoint]:
        """Every checkpoint of a run (or of one node), by attempt then seq."""
        sql = f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints WHERE run_id=?"
        params: tuple[Any, ...] = (run_id,)
        if node_id is not None:
            sql += " AND node_id=?"
            params += (node_id,)
        sql += " ORDER BY node_id, iteration, attempt, seq"
        return [Checkpoint(*row) for row in self._read(sql, params)]

    def checkpoint(self, key: AttemptKey, seq: int | None = None) -> Checkpoint:
        """One checkpoint of an attempt: ``seq``, or the latest."""
        sql = f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints WHERE {_KEY_WHERE}"
        params: tuple[Any, ...] = (key.run_id, key.node_id, key.iteration, key.attempt)
        if seq is None:
            sql += " ORDER BY seq DESC LIMIT 1"
        else:
            sql += " AND seq=?"
            params += (seq,)
        rows = self._read(sql, params)
        if not rows:
            which = "checkpoints" if seq is None else f"checkpoint seq {seq}"
            raise NotFound(
                f"run {key.run_id!r} node {key.node_id!r} iteration {key.iteration} "
                f"attempt {key.attempt} has no {which}"
            )
        return Checkpoint(*rows[0])

    def latest_attempt(
        self, run_id: str, node_id: str, iteration: int | None = None
    ) -> AttemptKey:
        """The newest attempt of a node that has a checkpoint."""
        sql = "SELECT iteration, attempt FROM workspace_checkpoints WHERE run_id=? AND node_id=?"
        params: tuple[Any, ...] = (run_id, node_id)
        if iteration is not None:
            sql += " AND iteration=?"
            params += (iteration,)
        rows = self._read(sql + " ORDER BY iteration DESC, attempt DESC LIMIT 1", params)
        if not rows:
            raise NotFound(f"run {run_id!r} node {node_id!r} has no checkpoints")
        return AttemptKey(run_id, node_id, rows[0][0], rows[0][1])

    # -- attempts ----------------------------------------------------------

    def attempts(self, run_id: str) -> list[Attempt]:
        rows = self._read(
            f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE run_id=? "
            "ORDER BY node_id, iteration, attempt",
            (run_id,),
        )
        return [Attempt(*row) for row in rows]

    def run_exists(self, run_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE run_id=?", (run_id,)))

    # -- gaps --------------------------------------------------------------

    def add_gaps(self, gaps: Iterable[Gap]) -> int:
        """Insert gaps not yet recorded; returns how many were new."""
        rows = [
            (g.ts_ms, g.run_id, g.request_id, g.reason, g.node_id, g.iteration, g.attempt,
             g.worktree, g.source, g.tool_use_id, g.detail)
            for g in gaps
        ]
        if not rows:
            return 0
        try:
            with self._conn() as db, write_transaction(db) as conn:
                before = conn.total_changes
                conn.executemany(
                    f"INSERT OR IGNORE INTO gaps ({_GAP_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    rows,
                )
                return conn.total_changes - before
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot record gaps: {exc}") from exc

    def gaps(self, run_id: str) -> list[Gap]:
        rows = self._read(
            f"SELECT {_GAP_COLS} FROM gaps WHERE run_id=? ORDER BY ts_ms, request_id", (run_id,)
        )
        return [Gap(*row) for row in rows]

    # -- health ------------------------------------------------------------

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file: ``"ok"`` when sound."""
        return str(self._read("PRAGMA integrity_check")[0][0])
