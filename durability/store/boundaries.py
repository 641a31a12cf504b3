"""Tool-call boundaries: every call a hook reported, the unit a rewind picks
(issue 24, migration 0015, docs/decisions/0042-boundaries.md).

A checkpoint row is one per tree (contract 3: an unchanged tree dedups onto
the attempt's latest row), so a call that changed nothing has no row of its
own.  Its boundary does: the session, the call's id and tool, where the
harness's transcript was and how long, and the checkpoint in effect after
the call.  ``seq`` is numbered per session (run id) and machine in the order
the boundaries were recorded; one request is one boundary, however often it
is recorded (a hook installed twice, a late service answer and the hook's
own capture).

A boundary names its checkpoint by attempt and seq; its ``commit_id`` is a
copy of that row's commit, kept equal to it (decision 0057): taken from the
row when the boundary is recorded, renamed in the transaction that renames
the row (gc rewriting a git chain, ``forget``), and cleared (``""``) in the
one that drops it.  A boundary whose ``commit_id`` is empty is *collected*:
its call happened and keeps its seq (so a seq never names two calls), its
conversation can still be rewound, its files cannot.  No boundary names a
commit that no checkpoint row names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from durability.ground.store_errors import NotFound, StoreUnavailable
from durability.store.db import DB_ERRORS, Connection, write_transaction
from durability.store.models import AttemptKey
from durability.store.store import Store
from durability.store.text import row_from_db, to_db

__all__ = ["COLLECTED", "Boundary", "CallInfo", "NewBoundary", "boundaries", "by_checkpoint",
           "clear_dropped", "collected_boundaries", "find_boundary", "insert_boundary",
           "record_boundaries", "rename_commits", "set_call_ids"]

#: The ``commit_id`` of a boundary whose checkpoint row is gone (gc dropped it).
COLLECTED = ""

_COLS = ("run_id, seq, node_id, iteration, attempt, request_id, harness, tool_use_id, "
         "tool_name, event, transcript_path, transcript_bytes, checkpoint_seq, commit_id, "
         "worktree, created_at_ms")
#: The same columns of ``boundaries b``, in a query joining another table.
_B_COLS = ", ".join(f"b.{c.strip()}" for c in _COLS.split(","))


@dataclass(frozen=True)
class CallInfo:
    """What a hook knows of the tool call it reports, beyond the capture's
    own fields (the call id and harness): it makes the call a boundary."""

    tool_name: str | None = None
    #: The harness's event name (``PostToolUse``, ``AfterTool``...).
    event: str | None = None
    transcript_path: str | None = None
    #: The transcript's size in bytes when the hook ran.
    transcript_bytes: int | None = None


@dataclass(frozen=True)
class NewBoundary:
    """What an answered hook call hands the store: the call, and the
    checkpoint its answer named (``checkpoint_seq`` of ``key``)."""

    key: AttemptKey
    request_id: str
    checkpoint_seq: int
    commit_id: str
    worktree: str
    harness: str | None = None
    tool_use_id: str | None = None
    tool_name: str | None = None
    event: str | None = None
    transcript_path: str | None = None
    transcript_bytes: int | None = None


@dataclass(frozen=True)
class Boundary:
    """One recorded boundary (a row of ``boundaries``)."""

    run_id: str
    seq: int
    node_id: str
    iteration: int
    attempt: int
    request_id: str
    harness: str | None
    tool_use_id: str | None
    tool_name: str | None
    event: str | None
    transcript_path: str | None
    transcript_bytes: int | None
    checkpoint_seq: int
    commit_id: str
    worktree: str
    created_at_ms: int

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.run_id, self.node_id, self.iteration, self.attempt)

    @property
    def collected(self) -> bool:
        """Its checkpoint was dropped (``durability gc``): no tree to restore."""
        return self.commit_id == COLLECTED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_boundaries(store: Store, new: Iterable[NewBoundary]) -> int:
    """Record each boundary not yet on record (by request id), in one
    transaction, each with its session's next seq; how many were new.

    The commit recorded is the one the checkpoint row names when the
    transaction reads it (the row is the authority: a gc between the answer
    and this write may have renamed or dropped it), or ``COLLECTED``."""
    rows = list(new)
    if not rows:
        return 0
    now = store._clock()
    try:
        # Narrow (decision 0059): every read below decides within a boundary's
        # run (its next seq, its checkpoint row) or its request (recorded once);
        # only wide writes (gc, forget) change those rows across runs.
        keys = sorted({f"run:{b.key.run_id}" for b in rows}
                      | {f"request:{b.request_id}" for b in rows})
        with store._conn() as db, write_transaction(db, keys=keys) as conn:  # the store's own
            return sum(insert_boundary(conn, store.host, b, now) for b in rows)
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot record the tool-call boundaries: {exc}") from exc


def insert_boundary(conn: Connection, host: str, b: NewBoundary, now: int) -> bool:
    """Inside a write that holds ``b``'s run and request (``record_boundaries``,
    or the checkpoint's own write, decision 0070): ``b`` recorded unless it
    is already; whether it was new."""
    if conn.execute("SELECT 1 FROM boundaries WHERE request_id=$1",
                    (to_db(b.request_id),)).fetchone():
        return False
    top = conn.execute("SELECT MAX(seq) FROM boundaries WHERE run_id=$1 AND host=$2",
                       (b.key.run_id, host)).fetchone()
    seq = int(top[0] or 0) + 1 if top else 1
    row = conn.execute(
        "SELECT commit_id FROM workspace_checkpoints WHERE run_id=$1 AND "
        "node_id=$2 AND iteration=$3 AND attempt=$4 AND host=$5 AND seq=$6",
        (b.key.run_id, b.key.node_id, b.key.iteration, b.key.attempt, host,
         b.checkpoint_seq)).fetchone()
    commit = str(row[0]) if row else COLLECTED
    conn.execute(
        f"INSERT INTO boundaries ({_COLS}, host) VALUES "
        "($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)",
        (b.key.run_id, seq, b.key.node_id, b.key.iteration, b.key.attempt,
         to_db(b.request_id), to_db(b.harness), to_db(b.tool_use_id), to_db(b.tool_name),
         to_db(b.event), to_db(b.transcript_path), b.transcript_bytes, b.checkpoint_seq,
         commit, to_db(b.worktree), now, host))
    return True


def _read(store: Store, sql: str, params: tuple[Any, ...]) -> list[Boundary]:
    try:
        with store._conn() as conn:
            rows = conn.execute(sql, params).fetchall()
            return [Boundary(*row_from_db(r)) for r in rows]  # type: ignore[arg-type]
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot read the state database: {exc}") from exc


def boundaries(store: Store, run_id: str) -> list[Boundary]:
    """This machine's boundaries of a session, by seq."""
    return _read(store, f"SELECT {_COLS} FROM boundaries WHERE run_id=$1 AND host=$2 "
                        "ORDER BY seq", (run_id, store.host))


def find_boundary(store: Store, run_id: str, *, seq: int | None = None,
                  call: str | None = None) -> Boundary:
    """The boundary ``seq`` of a session, or the one of tool call ``call``
    (its newest, should a call be reported twice under two requests)."""
    if (seq is None) == (call is None):
        raise ValueError("give seq or call")
    if seq is not None:
        found = _read(store, f"SELECT {_COLS} FROM boundaries WHERE run_id=$1 AND host=$2 "
                             "AND seq=$3", (run_id, store.host, seq))
        what = f"boundary seq {seq}"
    else:
        found = _read(store, f"SELECT {_COLS} FROM boundaries WHERE run_id=$1 AND host=$2 "
                             "AND tool_use_id=$3 ORDER BY seq DESC LIMIT 1",
                      (run_id, store.host, to_db(call)))
        what = f"boundary for tool call {call!r}"
    if not found:
        every = boundaries(store, run_id)
        span = f" (seq 1 to {every[-1].seq})" if every else ""
        raise NotFound(f"session {run_id!r} has no {what}{span}")
    return found[0]


def by_checkpoint(store: Store, run_ids: Iterable[str]) -> dict[tuple[AttemptKey, int],
                                                              list[Boundary]]:
    """The boundaries of the sessions ``run_ids``, by the checkpoint each
    names (its attempt and seq), in seq order: what a listing shows beside
    each checkpoint."""
    found: dict[tuple[AttemptKey, int], list[Boundary]] = {}
    for run_id in sorted(set(run_ids)):
        for b in boundaries(store, run_id):
            found.setdefault((b.key, b.checkpoint_seq), []).append(b)
    return found


def collected_boundaries(store: Store, *, worktree: str | None = None,
                         run_id: str | None = None, limit: int | None = None
                         ) -> list[Boundary]:
    """This machine's collected boundaries (their checkpoint gc dropped) of
    the attempts that have a checkpoint in ``worktree``, or of the session
    ``run_id``: newest first, at most ``limit``; one query (decision 0061).

    By attempt, not by the boundary's own ``worktree``: a worktree that moved
    re-keys its checkpoints, not its boundaries; and every attempt keeps its
    newest checkpoint (retention's ``newest``), so an attempt whose calls
    were collected still has a row naming the worktree it ran in.  The
    query starts from the worktree's attempts (``checkpoints_by_worktree``)
    and reads their boundaries by the primary key, so its cost follows this
    worktree's records, not every collected call of the store."""
    if (worktree is None) == (run_id is None):
        raise ValueError("give worktree or run_id")
    if worktree is not None:
        sql = (f"SELECT {_B_COLS} FROM (SELECT DISTINCT run_id, node_id, iteration, attempt "
               "FROM workspace_checkpoints WHERE host=$1 AND worktree=$2) a "
               "JOIN boundaries b ON b.run_id=a.run_id AND b.host=$3 AND b.node_id=a.node_id "
               "AND b.iteration=a.iteration AND b.attempt=a.attempt WHERE b.commit_id=$4")
        params: tuple[Any, ...] = (store.host, to_db(worktree), store.host, COLLECTED)
    else:
        sql = f"SELECT {_COLS} FROM boundaries b WHERE b.run_id=$1 AND b.host=$2 AND b.commit_id=$3"
        params = (run_id, store.host, COLLECTED)
    sql += " ORDER BY b.created_at_ms DESC, b.run_id DESC, b.seq DESC"
    if limit is not None:
        sql += f" LIMIT ${len(params) + 1}"
        params += (limit,)
    return _read(store, sql, params)


def set_call_ids(store: Store, run_id: str, calls: dict[int, str]) -> int:
    """Give boundaries of ``run_id`` that have none their tool call id
    (``{seq: id}``), found after the fact (a Gemini call's id is in its chat
    file only once its batch ran); how many were set."""
    if not calls:
        return 0
    try:
        with store._conn() as db, write_transaction(db) as conn:
            done = 0
            for seq, call in sorted(calls.items()):
                cur = conn.execute("UPDATE boundaries SET tool_use_id=$1 WHERE run_id=$2 AND "
                                   "host=$3 AND seq=$4 AND tool_use_id IS NULL",
                                   (to_db(call), run_id, store.host, seq))
                done += max(int(cur.rowcount), 0)
            return done
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot record the tool call ids: {exc}") from exc


def rename_commits(conn: Connection, renamed: Mapping[str, str], host: str) -> None:
    """In the caller's transaction (the one renaming the checkpoint rows):
    boundaries naming an old commit name the new one (found by the
    ``boundaries_commit`` index, migration 0017)."""
    for old, new in renamed.items():
        conn.execute("UPDATE boundaries SET commit_id=$1 WHERE commit_id=$2 AND host=$3",
                     (new, old, host))


def clear_dropped(conn: Connection, key: AttemptKey, seq: int, host: str) -> None:
    """In the caller's transaction (the one dropping checkpoint ``seq`` of
    ``key``): its boundaries are collected, naming no commit.  Found by the
    attempt and seq, not the commit, so a boundary that a toolkit before
    migration 0017 recorded with another commit is cleared too."""
    conn.execute("UPDATE boundaries SET commit_id=$1 WHERE run_id=$2 AND node_id=$3 AND "
                 "iteration=$4 AND attempt=$5 AND host=$6 AND checkpoint_seq=$7",
                 (COLLECTED, key.run_id, key.node_id, key.iteration, key.attempt,
                  host, seq))
