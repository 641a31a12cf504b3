"""The event log: an append-only record of what happened to runs, for people
and tools (``durability logs``).

Every event is written inside the transaction that made it happen (the
attempt row it reports, the checkpoint it names), so the log never says
something the state does not, and a rolled-back write leaves no event.  The
engine never reads the log to decide anything: resume derives everything
from the state tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from durability.store.db import Connection
from durability.store.dialect import POSTGRESQL, SQLITE, dialect_of
from durability.store.models import AttemptKey
from durability.store.text import row_from_db

__all__ = ["KINDS", "Event", "append", "append_for", "newest", "read"]

#: Every kind of event, as ``durability logs`` prints it.
KINDS = (
    "run-started", "run-resumed", "run-parked",
    "claim-won", "claim-lost",
    "attempt-started", "attempt-finished", "attempt-failed", "attempt-stopped",
    "attempt-abandoned",
    "checkpoint", "gap", "restore",
    "merge", "merge-conflict", "fork",
    "approval", "pause", "cancel", "budget-hit",
    "watch-ended",
    # agent tasks (durability/runs/agent.py, docs/how-to/agents.md)
    "agent-session", "agent-resume", "agent-session-lost", "agent-failover", "agent-blocked",
    "agent-correction", "agent-refused", "agent-usage", "agent-ended",
)

_COLS = "id, ts_ms, run_id, kind, node_id, iteration, attempt, seq, detail_json"
#: Appending one event, per database (``append``): PostgreSQL's id is its
#: column's default, the next of ``events_id_seq``.
_APPEND = {
    SQLITE.name: f"INSERT INTO events ({_COLS}) SELECT COALESCE(MAX(id), 0) + 1, "
                 "$1,$2,$3,$4,$5,$6,$7,$8 FROM events",
    POSTGRESQL.name: "INSERT INTO events (ts_ms, run_id, kind, node_id, iteration, attempt, "
                     "seq, detail_json) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
}


@dataclass(frozen=True)
class Event:
    id: int
    ts_ms: int
    run_id: str
    kind: str
    node_id: str | None
    iteration: int | None
    attempt: int | None
    seq: int | None
    detail: dict[str, Any] | None


def append(conn: Connection, run_id: str | bytes | None, kind: str, ts_ms: int, *,
           node_id: str | bytes | None = None, iteration: int | None = None,
           attempt: int | None = None, seq: int | None = None,
           detail: dict[str, Any] | None = None) -> None:
    """Append one event in the caller's write transaction.  Ids as
    ``durability.store.text.to_db`` gives them (a gap from the spool may carry
    any text).

    The id: under SQLite the largest plus one, read under the write lock, so
    it cannot be taken twice.  Under PostgreSQL the schema's sequence
    (``events_id_seq``, migration 0018), since writes of different runs run
    in parallel there (decision 0059); a run's events are still numbered in
    the order they commit, for every write that appends one holds its run's
    lock or the whole schema's until it commits, so a reader following a run
    by id (``durability logs --follow``) never sees a smaller id appear later."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    conn.execute(
        _APPEND[dialect_of(conn).name],
        (ts_ms, run_id, kind, node_id, iteration, attempt, seq,
         json.dumps(detail, sort_keys=True) if detail else None))


def append_for(conn: Connection, key: AttemptKey, kind: str, ts_ms: int, *,
               seq: int | None = None, detail: dict[str, Any] | None = None) -> None:
    """Append an event about one attempt."""
    append(conn, key.run_id, kind, ts_ms, node_id=key.node_id, iteration=key.iteration,
           attempt=key.attempt, seq=seq, detail=detail)


def read(conn: Connection, run_id: str, *, after_id: int = 0,
         limit: int = 1000) -> list[Event]:
    """The run's events with an id above ``after_id``, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM events WHERE run_id=$1 AND id>$2 ORDER BY id LIMIT $3",
        (run_id, after_id, limit)).fetchall()
    return [_event(r) for r in rows]


def newest(conn: Connection, run_id: str, limit: int) -> tuple[list[Event], int]:
    """The run's newest ``limit`` events, oldest first, and how many it has
    (a long session logs one per tool call: a reader wants the tail, bounded)."""
    total = int(conn.execute("SELECT COUNT(*) FROM events WHERE run_id=$1",
                             (run_id,)).fetchone()[0])
    rows = conn.execute(
        f"SELECT {_COLS} FROM events WHERE run_id=$1 ORDER BY id DESC LIMIT $2",
        (run_id, limit)).fetchall()
    return [_event(r) for r in reversed(rows)], total


def _event(r: tuple[Any, ...]) -> Event:
    id_, ts, run_id, kind, node, iteration, attempt, seq = row_from_db(r[:8])
    return Event(int(str(id_)), int(str(ts)), str(run_id), str(kind),
                 None if node is None else str(node),
                 None if iteration is None else int(str(iteration)),
                 None if attempt is None else int(str(attempt)),
                 None if seq is None else int(str(seq)),
                 json.loads(r[8]) if r[8] else None)
