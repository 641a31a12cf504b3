"""The state store: runs, attempts, workspace checkpoints and gaps, in SQLite
or PostgreSQL (``durability.store.database``).

One ``Store`` per process and database.  Every write is one ``BEGIN
IMMEDIATE`` transaction (under PostgreSQL: a transaction holding the
writers' lock), so seq numbers are assigned by the database and stay
monotonic across processes, hosts and restarts.  Under PostgreSQL a
checkpoint's write holds that lock shared and its run's and request's
locks exclusively (``write_transaction``'s ``keys``, decision 0059): the
checkpoints of different runs are written in parallel, and every other
write still waits for them and holds them off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from durability.ground.store_errors import NotFound, RecordRefused, StoreUnavailable
from durability.store.clock import system_clock
from durability.store.database import (
    DB_ERRORS,
    Connection,
    Location,
    describe,
    is_url,
    migrate,
    open_database,
    refused_value,
)
from durability.store.db import BUSY_TIMEOUT_MS, write_transaction
from durability.store.dialect import POSTGRESQL, SQLITE, Dialect, dialect_of
from durability.store.events import append, append_for
from durability.store.host import host_id
from durability.store.models import (
    Attempt,
    AttemptKey,
    Checkpoint,
    Gap,
    NewCheckpoint,
    Recorded,
    Session,
)
from durability.store.outbox import queue_checkpoint
from durability.store.text import row_from_db, storable_gap, to_db

__all__ = ["Store", "gap_reason", "now_ms"]

_CHECKPOINT_COLS = (
    "run_id, node_id, iteration, attempt, seq, commit_id, change_id, operation_id, "
    "worktree, source, tool_use_id, label, request_id, created_at_ms, harness, agent_id, "
    "agent_type, session_id"
)
_ATTEMPT_COLS = (
    "run_id, node_id, iteration, attempt, state, started_at_ms, finished_at_ms, "
    "heartbeat_at_ms, worktree, jj_pointer, error_json"
)
_GAP_COLS = (
    "ts_ms, run_id, request_id, reason, node_id, iteration, attempt, worktree, "
    "source, tool_use_id, detail"
)
_KEY_WHERE = "run_id=$1 AND node_id=$2 AND iteration=$3 AND attempt=$4"
# The same after two other parameters ($1, $2).
_KEY_WHERE_AFTER_2 = "run_id=$3 AND node_id=$4 AND iteration=$5 AND attempt=$6"
# An attempt's checkpoints on one machine (seqs are numbered per machine).
_HOST_KEY_WHERE = _KEY_WHERE + " AND host=$5"
# One row per run id over checkpoints and gaps of this machine (``$1`` to ``$4``: this machine);
# the worktree is that of the newest checkpoint, else of the newest gap.
_SESSIONS_SQLITE = """
WITH events AS (
    SELECT run_id, created_at_ms AS ts, worktree, source, harness, 1 AS c, 0 AS g
      FROM workspace_checkpoints WHERE host = $1
    UNION ALL
    SELECT run_id, ts_ms, worktree, NULL, NULL, 0, 1 FROM gaps WHERE host = $2
)
SELECT run_id,
       COALESCE(
         (SELECT worktree FROM workspace_checkpoints w WHERE w.run_id = e.run_id
             AND w.host = $3
           ORDER BY created_at_ms DESC, seq DESC LIMIT 1),
         (SELECT worktree FROM gaps x WHERE x.run_id = e.run_id AND x.worktree IS NOT NULL
             AND x.host = $4
           ORDER BY ts_ms DESC LIMIT 1)),
       MIN(ts), MAX(ts), SUM(c), SUM(g), COALESCE(GROUP_CONCAT(DISTINCT source), ''),
       COALESCE(GROUP_CONCAT(DISTINCT harness), '')
  FROM events e
 GROUP BY run_id
 ORDER BY MAX(ts) DESC, run_id
"""
# The same for PostgreSQL: its aggregate of distinct values is STRING_AGG.
_SESSIONS_POSTGRESQL = """
WITH events AS (
    SELECT run_id, created_at_ms AS ts, worktree, source, harness, 1 AS c, 0 AS g
      FROM workspace_checkpoints WHERE host = $1
    UNION ALL
    SELECT run_id, ts_ms, worktree, NULL, NULL, 0, 1 FROM gaps WHERE host = $2
)
SELECT run_id,
       COALESCE(
         (SELECT worktree FROM workspace_checkpoints w WHERE w.run_id = e.run_id
             AND w.host = $3
           ORDER BY created_at_ms DESC, seq DESC LIMIT 1),
         (SELECT worktree FROM gaps x WHERE x.run_id = e.run_id AND x.worktree IS NOT NULL
             AND x.host = $4
           ORDER BY ts_ms DESC LIMIT 1)),
       MIN(ts), MAX(ts), SUM(c), SUM(g), COALESCE(STRING_AGG(DISTINCT source, ','), ''),
       COALESCE(STRING_AGG(DISTINCT harness, ','), '')
  FROM events e
 GROUP BY run_id
 ORDER BY MAX(ts) DESC, run_id
"""
_SESSIONS_SQL = {SQLITE.name: _SESSIONS_SQLITE, POSTGRESQL.name: _SESSIONS_POSTGRESQL}


def _checkpoint_keys(new: NewCheckpoint) -> tuple[str, str]:
    """What a checkpoint's write decides on (decision 0059), as the keys of
    its narrow lock: its run (the attempt's next seq and pointer, the run
    and attempt rows it may create, and the order of the run's events) and
    its request id (recorded once).  Everything else it reads (gaps,
    remotes, pushed rows) only wide writes change."""
    return (f"run:{new.key.run_id}", f"request:{new.request_id}")


#: The store's default clock (kept under this name for its callers).
now_ms = system_clock


def gap_reason(conn: Connection, request_id: str) -> str | None:
    """The reason of the gap on record for ``request_id`` (any machine's:
    gaps are keyed by request id alone), or None.  A request is on record
    once, checkpoint or gap: ``Store._refuse_if_gap`` and the remote import
    (decision 0069) both ask here."""
    gap = conn.execute("SELECT reason FROM gaps WHERE request_id=$1",
                       (to_db(request_id),)).fetchone()
    return None if gap is None else str(gap[0])


class Store:
    """The state database at ``location`` (created and migrated on first use):
    a SQLite file, or a ``postgresql://`` URL.

    One connection, shared by the threads of a process behind a lock: SQLite
    serialises writers anyway, and a connection per thread would leak one for
    every short-lived thread of a long-running service.  A write waits up to
    ``busy_timeout_ms`` for another process's write lock, then fails with
    ``StoreUnavailable``.

    A store handle is one machine's (``host``, default ``durability.store.host.host_id``):
    its checkpoints are recorded, numbered and read as that machine's, and
    its worktrees are that machine's paths, so machines sharing one
    PostgreSQL store never see each other's worktree at the same path.
    """

    def __init__(self, location: Location, *, clock: Callable[[], int] = now_ms,
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS, host: str | None = None) -> None:
        #: a SQLite file, or a postgresql:// URL
        self.location: Location = location if is_url(location) else Path(location)
        #: the SQLite file (under PostgreSQL, the state folder's name for it:
        #: nothing is written there)
        self.path = Path(location) if not is_url(location) else Path("state.db")
        self._clock = clock
        #: the machine whose records this handle reads and writes
        self.host: str = host or host_id()
        self._lock = threading.RLock()
        self.busy_timeout_ms = busy_timeout_ms
        self._db: Connection | None = open_database(self.location,
                                                    busy_timeout_ms=busy_timeout_ms)
        #: the database's SQL where it has its own (``durability.store.dialect``)
        self.dialect: Dialect = dialect_of(self._db)
        try:
            migrate(self._db, host=self.host)
        except BaseException:
            self._db.close()
            raise

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
    def _conn(self) -> Iterator[Connection]:
        """The connection, held exclusively for one unit of work."""
        with self._lock:
            if self._db is None:
                raise StoreUnavailable(f"the store at {describe(self.location)} is closed")
            yield self._db

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._conn() as conn:
                # Paths that are not UTF-8 come back as the str they went in as.
                return [row_from_db(r) for r in conn.execute(sql, params).fetchall()]
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc

    # -- checkpoints -------------------------------------------------------

    def record_checkpoint(self, new: NewCheckpoint, *,
                          then: Callable[[Connection, Recorded, str, int], object]
                          | None = None
                          ) -> Recorded:
        """Record a captured commit for an attempt (contract 3, docs/DESIGN.md).

        Creates the run and attempt on first sight.  In one transaction: a
        request id seen before returns its row; a request id already on record
        as a gap is ``RecordRefused`` (each request is recorded once:
        checkpoint or gap, never both); a
        commit equal to the attempt's latest checkpoint adds nothing;
        otherwise the next seq is inserted and the attempt's ``jj_pointer``
        moves to the commit.

        ``then``: more of the same write, after the row, within the keys
        the checkpoint's write holds (its run and its request), called with
        the connection, the row, this store's host and the write's time: the call's
        boundary (decision 0070), one commit instead of two.  It runs under
        a savepoint: whatever it raises (a value the database or its driver
        refuses, a bug) is undone alone, the checkpoint is committed all the
        same, and ``then`` can tell its caller only by what it did (it did
        not finish).  The checkpoint is the record; the part never costs it.
        """
        try:
            with self._conn() as db, write_transaction(db, keys=_checkpoint_keys(new)) as conn:
                # Checked inside the write lock: a gap filed for this request
                # cannot land between the check and the insert (a gap is a
                # wide write, which this write's lock holds off).
                now = self._clock()
                done = self._record(conn, new, now)
                if then is not None:
                    conn.execute("SAVEPOINT then_part")
                    try:
                        then(conn, done, self.host, now)
                    except Exception:  # not only DB_ERRORS: a driver's UnicodeError too
                        conn.execute("ROLLBACK TO SAVEPOINT then_part")
                    conn.execute("RELEASE SAVEPOINT then_part")
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot record checkpoint: {exc}") from exc
        return done

    def _record(self, conn: Connection, new: NewCheckpoint, now: int) -> Recorded:
        seen = conn.execute(
            "SELECT seq, commit_id FROM workspace_checkpoints WHERE request_id=$1",
            (to_db(new.request_id),),
        ).fetchone()
        if seen:
            return Recorded(seq=seen[0], commit_id=seen[1], deduped=False, replayed=True)
        self._refuse_if_gap(conn, new)
        k = new.key
        self._ensure_attempt(conn, k, new.worktree, now)
        latest = conn.execute(
            f"SELECT seq, commit_id, worktree FROM workspace_checkpoints WHERE {_HOST_KEY_WHERE} "
            "ORDER BY seq DESC LIMIT 1",
            (k.run_id, k.node_id, k.iteration, k.attempt, self.host),
        ).fetchone()
        # The same commit in another worktree is a new checkpoint: an isolated
        # task's tree merged back unchanged into the shared worktree is the
        # shared worktree's state now, which its restores must find.
        if latest and latest[1] == new.commit_id and latest[2] == to_db(new.worktree):
            if new.tool_use_id:
                # A watch caught the call's tree first: the row it made now
                # names the call (and its session), so a resume that looks
                # for a completed call's checkpoint finds it.
                conn.execute(
                    "UPDATE workspace_checkpoints SET tool_use_id=$1, "
                    "session_id=COALESCE(session_id, $2) WHERE run_id=$3 AND node_id=$4 "
                    "AND iteration=$5 AND attempt=$6 AND host=$7 AND seq=$8 "
                    "AND tool_use_id IS NULL",
                    (to_db(new.tool_use_id), to_db(new.session_id), k.run_id, k.node_id,
                     k.iteration, k.attempt, self.host, latest[0]))
            return Recorded(seq=latest[0], commit_id=new.commit_id, deduped=True)
        seq = (latest[0] if latest else 0) + 1
        conn.execute(
            f"INSERT INTO workspace_checkpoints ({_CHECKPOINT_COLS}, host) "
            "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19)",
            (k.run_id, k.node_id, k.iteration, k.attempt, seq, new.commit_id, new.change_id,
             new.operation_id, to_db(new.worktree), new.source, to_db(new.tool_use_id),
             to_db(new.label), to_db(new.request_id), now, new.harness, to_db(new.agent_id),
             to_db(new.agent_type), to_db(new.session_id), self.host),
        )
        conn.execute(
            f"UPDATE attempts SET jj_pointer=$1, worktree=$2 WHERE {_KEY_WHERE_AFTER_2}",
            (new.commit_id, to_db(new.worktree), k.run_id, k.node_id, k.iteration, k.attempt),
        )
        # Due on its worktree's remotes from this commit on (docs/how-to/remote.md).
        queue_checkpoint(conn, new.request_id)
        append_for(conn, k, "checkpoint", now, seq=seq,
                   detail={"source": new.source, "commit_id": new.commit_id})
        return Recorded(seq=seq, commit_id=new.commit_id, deduped=False)

    def _refuse_if_gap(self, conn: Connection, new: NewCheckpoint) -> None:
        reason = gap_reason(conn, new.request_id)
        if reason is not None:
            raise RecordRefused(f"request {new.request_id} is already on record as a "
                                f"{reason} gap", gap_reason=reason)

    def request_record(self, request_id: str) -> Checkpoint | Gap | None:
        """What is on record for a request id: its checkpoint, its gap, or None."""
        rows = self._read(f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints "
                          "WHERE request_id=$1", (to_db(request_id),))
        if rows:
            return Checkpoint(*rows[0])
        gaps = self._read(f"SELECT {_GAP_COLS} FROM gaps WHERE request_id=$1",
                          (to_db(request_id),))
        return Gap(*gaps[0]) if gaps else None

    def _ensure_attempt(
        self, conn: Connection, k: AttemptKey, worktree: str | None, now: int
    ) -> None:
        conn.execute(
            "INSERT INTO runs (run_id, created_at_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            (k.run_id, now)
        )
        conn.execute(
            "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, "
            "started_at_ms, worktree) VALUES ($1,$2,$3,$4,'running',$5,$6) ON CONFLICT DO NOTHING",
            (k.run_id, k.node_id, k.iteration, k.attempt, now, to_db(worktree)),
        )

    def ensure_attempt(self, key: AttemptKey, worktree: str | None = None) -> None:
        """Create the run and attempt rows if they do not exist yet."""
        try:
            with self._conn() as db, write_transaction(db) as conn:
                self._ensure_attempt(conn, key, worktree, self._clock())
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot record attempt: {exc}") from exc

    def checkpoints(self, run_id: str, node_id: str | None = None) -> list[Checkpoint]:
        """Every checkpoint of a run (or of one node), by attempt then seq."""
        sql = f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints WHERE run_id=$1 AND host=$2"
        params: tuple[Any, ...] = (run_id, self.host)
        if node_id is not None:
            sql += " AND node_id=$3"
            params += (node_id,)
        sql += " ORDER BY node_id, iteration, attempt, seq"
        return [Checkpoint(*row) for row in self._read(sql, params)]

    def worktree_checkpoints(self, worktree: str) -> list[Checkpoint]:
        """Every checkpoint of one worktree, whichever run took it, oldest first."""
        rows = self._read(f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints "
                          "WHERE host=$1 AND worktree=$2 ORDER BY created_at_ms, run_id, "
                          "node_id, iteration, attempt, seq", (self.host, to_db(worktree)))
        return [Checkpoint(*row) for row in rows]

    def worktree_gaps(self, worktree: str) -> list[Gap]:
        """Every gap filed for one worktree, whichever run it was for, oldest first."""
        rows = self._read(f"SELECT {_GAP_COLS} FROM gaps WHERE host=$1 AND worktree=$2 "
                          "ORDER BY ts_ms, request_id", (self.host, to_db(worktree)))
        return [Gap(*row) for row in rows]

    def checkpoint(self, key: AttemptKey, seq: int | None = None) -> Checkpoint:
        """One checkpoint of an attempt: ``seq``, or the latest."""
        sql = f"SELECT {_CHECKPOINT_COLS} FROM workspace_checkpoints WHERE {_HOST_KEY_WHERE}"
        params: tuple[Any, ...] = (key.run_id, key.node_id, key.iteration, key.attempt,
                                   self.host)
        if seq is None:
            sql += " ORDER BY seq DESC LIMIT 1"
        else:
            sql += " AND seq=$6"
            params += (seq,)
        rows = self._read(sql, params)
        if not rows:
            which = "checkpoints" if seq is None else f"checkpoint seq {seq}"
            raise NotFound(
                f"run {key.run_id!r} node {key.node_id!r} iteration {key.iteration} "
                f"attempt {key.attempt} has no {which}{self._seq_range(key)}"
            )
        return Checkpoint(*rows[0])

    def _seq_range(self, key: AttemptKey) -> str:
        """``" (seq 1 to N)"`` of an attempt with checkpoints: the valid choices."""
        low, high = self._read("SELECT MIN(seq), MAX(seq) FROM workspace_checkpoints "
                               f"WHERE {_HOST_KEY_WHERE}",
                               (key.run_id, key.node_id, key.iteration, key.attempt,
                                self.host))[0]
        return f" (seq {low} to {high})" if low is not None else ""

    def latest_attempt(
        self, run_id: str, node_id: str, iteration: int | None = None
    ) -> AttemptKey:
        """The newest attempt of a node that has a checkpoint."""
        sql = ("SELECT iteration, attempt FROM workspace_checkpoints WHERE run_id=$1 "
               "AND node_id=$2 AND host=$3")
        params: tuple[Any, ...] = (run_id, node_id, self.host)
        if iteration is not None:
            sql += " AND iteration=$4"
            params += (iteration,)
        rows = self._read(sql + " ORDER BY iteration DESC, attempt DESC LIMIT 1", params)
        if not rows:
            raise NotFound(f"run {run_id!r} node {node_id!r} has no checkpoints")
        return AttemptKey(run_id, node_id, rows[0][0], rows[0][1])

    # -- attempts ----------------------------------------------------------

    def attempts(self, run_id: str) -> list[Attempt]:
        rows = self._read(
            f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE run_id=$1 "
            "ORDER BY node_id, iteration, attempt",
            (run_id,),
        )
        return [Attempt(*row) for row in rows]

    def run_exists(self, run_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM runs WHERE run_id=$1", (run_id,)))

    # -- gaps --------------------------------------------------------------

    def add_gaps(self, gaps: Iterable[Gap]) -> int:
        """Insert gaps not yet recorded; returns how many were new.

        A gap whose request already has a checkpoint is skipped: the request
        was captured after all (a late answer of the service, the hook's own
        fallback), and a request is on record once, checkpoint or gap.
        """
        gaps_list = list(gaps)
        if not gaps_list:
            return 0
        try:
            return self._add_gaps(gaps_list)
        except DB_ERRORS as exc:
            if not refused_value(exc):
                raise StoreUnavailable(f"cannot record gaps: {exc}") from exc
        # One gap the database refuses (a value past an index's limit) must
        # not keep the others out, nor itself: each alone, and a refused one
        # in its storable form (``storable_gap``).
        added = 0
        for gap in gaps_list:
            try:
                added += self._add_gaps([gap])
                continue
            except DB_ERRORS as exc:
                if not refused_value(exc):
                    raise StoreUnavailable(f"cannot record gaps: {exc}") from exc
            try:
                added += self._add_gaps([storable_gap(gap)])
            except DB_ERRORS as exc:
                if not refused_value(exc):
                    raise StoreUnavailable(f"cannot record gaps: {exc}") from exc
                # Refused even so: it stays in the spool it came from.
        return added

    def _add_gaps(self, gaps_list: list[Gap]) -> int:
        """Insert ``gaps_list`` in one transaction (``add_gaps``)."""
        rows = [
            (g.ts_ms, to_db(g.run_id), to_db(g.request_id), to_db(g.reason), to_db(g.node_id),
             g.iteration, g.attempt, to_db(g.worktree), to_db(g.source), to_db(g.tool_use_id),
             to_db(g.detail), self.host, to_db(g.request_id))
            for g in gaps_list
        ]
        with self._conn() as db, write_transaction(db) as conn:
            added = 0
            for row, gap in zip(rows, gaps_list, strict=True):
                cur = conn.execute(
                    f"INSERT INTO gaps ({_GAP_COLS}, host) "
                    "SELECT $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12 "
                    "WHERE NOT EXISTS (SELECT 1 FROM workspace_checkpoints "
                    "WHERE request_id=$13) ON CONFLICT DO NOTHING", row)
                if cur.rowcount == 1:  # a new gap: the log says so once
                    added += 1
                    append(conn, to_db(gap.run_id), "gap", gap.ts_ms,
                           node_id=to_db(gap.node_id), iteration=gap.iteration,
                           attempt=gap.attempt, detail={"reason": gap.reason})
            return added

    def gaps(self, run_id: str) -> list[Gap]:
        """This machine's gaps of a run (as ``checkpoints``: another host
        sharing the store may use the same run id and worktree path)."""
        rows = self._read(
            f"SELECT {_GAP_COLS} FROM gaps WHERE run_id=$1 AND host=$2 ORDER BY ts_ms, request_id",
            (run_id, self.host))
        return [Gap(*row) for row in rows]

    # -- a worktree moved ---------------------------------------------------

    def move_worktree(self, old: str, new: str) -> int:
        """Re-key this machine's records of the worktree at ``old`` to ``new``
        (it moved there: checkpoints, gaps, attempts, watches, remotes and
        replication rows), in one transaction; how many checkpoints moved.
        A watch or remote ``new`` already has stays, and so does the old one
        it would replace."""
        o, n, h = to_db(old), to_db(new), self.host
        try:
            with self._conn() as db, write_transaction(db) as conn:
                conn.execute(
                    "UPDATE attempts SET worktree=$1 WHERE worktree=$2 AND EXISTS (SELECT 1 FROM "
                    "workspace_checkpoints c WHERE c.run_id=attempts.run_id AND "
                    "c.node_id=attempts.node_id AND c.iteration=attempts.iteration AND "
                    "c.attempt=attempts.attempt AND c.host=$3 AND c.worktree=$4)", (n, o, h, o))
                moved = conn.execute("UPDATE workspace_checkpoints SET worktree=$1 WHERE host=$2 "
                                     "AND worktree=$3", (n, h, o)).rowcount
                for table in ("gaps", "replication", "replication_outbox"):
                    conn.execute(f"UPDATE {table} SET worktree=$1 WHERE host=$2 AND worktree=$3",
                                 (n, h, o))
                conn.execute("UPDATE watches SET worktree=$1 WHERE host=$2 AND worktree=$3 AND NOT "
                             "EXISTS (SELECT 1 FROM watches w WHERE w.host=$4 AND w.worktree=$5)",
                             (n, h, o, h, n))
                conn.execute("UPDATE remotes SET worktree=$1 WHERE host=$2 AND worktree=$3 AND NOT "
                             "EXISTS (SELECT 1 FROM remotes r WHERE r.host=$4 AND r.worktree=$5 "
                             "AND r.name=remotes.name)", (n, h, o, h, n))
                return max(int(moved), 0)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot move the records of {old}: {exc}") from exc

    def knows_worktree(self, worktree: str) -> bool:
        """Whether this machine has any checkpoint or gap of ``worktree``."""
        return bool(self._read(
            "SELECT 1 FROM workspace_checkpoints WHERE host=$1 AND worktree=$2 UNION ALL "
            "SELECT 1 FROM gaps WHERE host=$3 AND worktree=$4 LIMIT 1",
            (self.host, to_db(worktree), self.host, to_db(worktree))))

    # -- sessions ----------------------------------------------------------

    def sessions(self, worktree: str | None = None) -> list[Session]:
        """Every run id with checkpoints or gaps, newest activity first; with
        ``worktree``, only those that touched it.  A session's worktree is the
        one of its newest checkpoint (else of its newest gap)."""
        rows = self._read(_SESSIONS_SQL[self.dialect.name], (self.host,) * 4)
        found = [Session(*row) for row in rows]
        if worktree is not None:
            touched = {r[0] for r in self._read(
                "SELECT DISTINCT run_id FROM workspace_checkpoints WHERE host=$1 AND worktree=$2 "
                "UNION SELECT DISTINCT run_id FROM gaps WHERE host=$3 AND worktree=$4",
                (self.host, to_db(worktree), self.host, to_db(worktree)))}
            found = [s for s in found if s.run_id in touched]
        return found

    def has_records(self, run_id: str) -> bool:
        """Whether anything is recorded under ``run_id`` (a run row, a
        checkpoint or a gap: hook sessions have no run row until they capture)."""
        return bool(self._read(
            "SELECT 1 FROM runs WHERE run_id=$1 UNION ALL "
            "SELECT 1 FROM gaps WHERE run_id=$2 LIMIT 1", (run_id, run_id)))

    # -- health ------------------------------------------------------------

    def integrity_check(self) -> str:
        """SQLite's own verdict on the file: ``"ok"`` when sound (PostgreSQL:
        ``"ok"`` when the server answers; it checks its own pages)."""
        try:
            with self._conn() as conn:
                return self.dialect.integrity_check(conn)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc
