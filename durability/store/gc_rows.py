"""Dropping checkpoint rows that a retention policy let go (``durability gc``).

The store only knows rows: which checkpoint may go is decided above it
(``durability.retention``), and the refs and objects behind a row are the
backends' business.  Two guards live here because they protect the store's
own contracts whatever the caller decided:

- the newest checkpoint of an attempt (its highest seq, and the commit its
  ``jj_pointer`` names) is never deleted, so the next seq is still the old
  maximum plus one: a seq is never handed out twice (contract 3);
- rows, renamed commits and the attempt's pointer change in one transaction,
  and with them the tool-call boundaries that name the rows (decision 0057:
  a boundary names its row's commit, or none once the row is dropped).

It also keeps the undo points restores named (``record_undo_point``): the
checkpoint a restore's pre-restore capture landed on, which may be an older
row the capture deduplicated onto, whatever its ``source``.  A policy reads
them with the rows (``RetentionRow.undo_named_at_ms``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from durability.ground.store_errors import StoreUnavailable
from durability.store import boundaries
from durability.store.db import DB_ERRORS, Connection, marks, write_transaction
from durability.store.models import AttemptKey, Checkpoint
from durability.store.store import Store
from durability.store.text import row_from_db, to_db

__all__ = ["Pruned", "RetentionRow", "apply", "commits_in_use", "record_undo_point",
           "retention_rows"]

_KEY = "run_id=$1 AND node_id=$2 AND iteration=$3 AND attempt=$4"


@dataclass(frozen=True)
class RetentionRow:
    """A checkpoint with what a policy needs to judge it."""

    checkpoint: Checkpoint
    #: The run's state (None for a hook session: it has no engine state).
    run_state: str | None
    #: The attempt's newest commit.
    jj_pointer: str | None
    #: The attempt's highest seq.
    max_seq: int
    #: When a restore last named this checkpoint as its undo (None: never).
    undo_named_at_ms: int | None = None
    #: When the newest tool-call boundary naming this checkpoint was recorded
    #: (None: none does): the last time a call left the tree in this state.
    called_at_ms: int | None = None


@dataclass(frozen=True)
class Pruned:
    dropped: int
    renamed: int


def retention_rows(store: Store, worktrees: Iterable[str] | None = None) -> list[RetentionRow]:
    """Every checkpoint of the store's machine (of ``worktrees`` only, when
    given), oldest first per attempt: another machine's worktree at the same
    path is never judged here."""
    from durability.store.store import _CHECKPOINT_COLS

    cols = ", ".join(f"c.{c.strip()}" for c in _CHECKPOINT_COLS.split(","))
    # The newest boundary naming the row, found by the boundaries_commit
    # index (a boundary names its row's commit, decision 0057).
    called = ("(SELECT MAX(b.created_at_ms) FROM boundaries b WHERE b.commit_id=c.commit_id "
              "AND b.run_id=c.run_id AND b.node_id=c.node_id AND b.iteration=c.iteration "
              "AND b.attempt=c.attempt AND b.host=c.host AND b.checkpoint_seq=c.seq)")
    sql = (f"SELECT {cols}, r.state, a.jj_pointer, m.top, u.named_at_ms, {called} "
           "FROM workspace_checkpoints c "
           "JOIN attempts a ON a.run_id=c.run_id AND a.node_id=c.node_id "
           "AND a.iteration=c.iteration AND a.attempt=c.attempt "
           "LEFT JOIN runs r ON r.run_id=c.run_id "
           "JOIN (SELECT run_id, node_id, iteration, attempt, MAX(seq) AS top "
           "FROM workspace_checkpoints WHERE host=$1 "
           "GROUP BY run_id, node_id, iteration, attempt) m "
           "ON m.run_id=c.run_id AND m.node_id=c.node_id AND m.iteration=c.iteration "
           "AND m.attempt=c.attempt "
           "LEFT JOIN undo_points u ON u.run_id=c.run_id AND u.node_id=c.node_id "
           "AND u.iteration=c.iteration AND u.attempt=c.attempt AND u.host=c.host "
           "AND u.seq=c.seq WHERE c.host=$2")
    params: tuple[Any, ...] = (store.host, store.host)
    chosen = None if worktrees is None else sorted(set(worktrees))
    if chosen is not None:
        if not chosen:
            return []
        sql += f" AND c.worktree IN ({marks(len(params) + 1, len(chosen))})"
        params += tuple(to_db(w) for w in chosen)
    sql += " ORDER BY c.run_id, c.node_id, c.iteration, c.attempt, c.seq"
    n = len(_CHECKPOINT_COLS.split(","))
    return [RetentionRow(Checkpoint(*row[:n]), row[n], row[n + 1], int(row[n + 2]),
                         None if row[n + 3] is None else int(row[n + 3]),
                         None if row[n + 4] is None else int(row[n + 4]))
            for row in _read(store, sql, params)]


def record_undo_point(store: Store, key: AttemptKey, seq: int) -> None:
    """Record that a restore names ``seq`` of ``key`` as its undo, now by the
    store's clock (a later restore naming it again moves the time on)."""
    named_at_ms = store._clock()
    try:
        with store._conn() as db, write_transaction(db) as conn:  # the store's own connection
            conn.execute("INSERT INTO undo_points (run_id, node_id, iteration, attempt, "
                         "host, seq, named_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) "
                         "ON CONFLICT (run_id, node_id, iteration, attempt, host, seq) "
                         "DO UPDATE SET named_at_ms=excluded.named_at_ms",
                         (to_db(key.run_id), to_db(key.node_id), key.iteration, key.attempt,
                          store.host, seq, named_at_ms))
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot record the undo point: {exc}") from exc


def commits_in_use(store: Store, commit_ids: Iterable[str]) -> set[str]:
    """Which of ``commit_ids`` a checkpoint row (of any run), an attempt's
    pointer or an isolated task's merge base (``task_worktrees.base_commit``,
    a snapshot that is often also a checkpoint's commit) still names: their
    pins must stay."""
    wanted = sorted(set(commit_ids))
    found: set[str] = set()
    for start in range(0, len(wanted), 300):  # SQLite's limit on parameters (999)
        part = wanted[start:start + 300]
        listed = marks(1, len(part))  # the same $1..$n in each list
        rows = _read(store, f"SELECT commit_id FROM workspace_checkpoints WHERE commit_id IN "
                            f"({listed}) UNION SELECT jj_pointer FROM attempts WHERE "
                            f"jj_pointer IN ({listed}) UNION SELECT base_commit FROM "
                            f"task_worktrees WHERE state <> 'removed' AND base_commit IN "
                            f"({listed})", tuple(part))
        found.update(str(r[0]) for r in rows)
    return found


def apply(store: Store, drop: Iterable[Checkpoint],
          renamed: Mapping[str, str] | None = None, *, forgotten: bool = False) -> Pruned:
    """Delete the ``drop`` rows and rename commits (old id -> new id, in rows,
    pointers and boundaries: a git chain rewritten without the dropped
    commits), in one transaction.  A row that is its attempt's newest, or its
    pointer, stays whatever the caller asked.

    ``forgotten``: the old commits held a path ``durability forget`` takes
    out, so no record of ours may name them any more: the fork records and
    the text of the event log and of gaps that quote an old id name the new
    one too (for gc's renames they stay as history: those commits held
    nothing to hide)."""
    renamed = dict(renamed or {})
    try:
        with store._conn() as db, write_transaction(db) as conn:  # the store's own connection
            dropped = sum(_drop(conn, c, store.host) for c in drop)
            for old, new in renamed.items():
                conn.execute("UPDATE workspace_checkpoints SET commit_id=$1 "
                             "WHERE commit_id=$2 AND host=$3", (new, old, store.host))
                conn.execute("UPDATE attempts SET jj_pointer=$1 WHERE jj_pointer=$2", (new, old))
            boundaries.rename_commits(conn, renamed, store.host)
            if forgotten:
                _rename_history(conn, renamed)
            return Pruned(dropped=dropped, renamed=len(renamed))
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot drop checkpoints: {exc}") from exc


def _drop(conn: Connection, c: Checkpoint, host: str) -> int:
    k = AttemptKey(c.run_id, c.node_id, c.iteration, c.attempt)
    args = (k.run_id, k.node_id, k.iteration, k.attempt)
    # The attempt's rows of this machine (``host``): seqs are numbered per machine.
    top = conn.execute(f"SELECT MAX(seq) FROM workspace_checkpoints WHERE {_KEY} AND host=$5",
                       (*args, host)).fetchone()
    pointer = conn.execute(f"SELECT jj_pointer FROM attempts WHERE {_KEY}", args).fetchone()
    if (top and top[0] == c.seq) or (pointer and pointer[0] == c.commit_id):
        return 0  # read inside the write lock: a capture since the plan moved nothing past this
    cur = conn.execute(f"DELETE FROM workspace_checkpoints WHERE {_KEY} AND host=$5 AND seq=$6",
                       (*args, host, c.seq))
    conn.execute(f"DELETE FROM undo_points WHERE {_KEY} AND host=$5 AND seq=$6",
                 (*args, host, c.seq))
    boundaries.clear_dropped(conn, k, c.seq, host)
    # gc keeps what is not pushed; a remote named since its plan must not
    # leave rows of a checkpoint that is gone.
    conn.execute("DELETE FROM replication_outbox WHERE request_id=$1", (to_db(c.request_id),))
    return int(cur.rowcount)


def _rename_history(conn: Connection, renamed: Mapping[str, str]) -> None:
    """Every other record that quotes an old commit id: a fork's source
    (``run_forks``), the JSON of events (a checkpoint's, a fork's) and the
    text of gaps.  A commit id is 40 (or 64) hex digits: one found inside a
    text is that commit."""
    for old, new in renamed.items():
        like = f"%{old}%"
        conn.execute("UPDATE run_forks SET commit_id=$1 WHERE commit_id=$2", (new, old))
        conn.execute("UPDATE events SET detail_json=REPLACE(detail_json, $1, $2) "
                     "WHERE detail_json LIKE $3", (old, new, like))
        conn.execute("UPDATE gaps SET detail=REPLACE(detail, $1, $2) WHERE detail LIKE $3",
                     (old, new, like))


def _read(store: Store, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    try:
        with store._conn() as conn:
            return [row_from_db(r) for r in conn.execute(sql, params).fetchall()]
    except DB_ERRORS as exc:
        raise StoreUnavailable(f"cannot read the state database: {exc}") from exc
