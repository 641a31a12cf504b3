"""What a run has done: attempts started and ended, validated outputs,
approval decisions and budget usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from durability.ground.store_errors import InvalidValue, NotFound, StoreUnavailable
from durability.runs.budget import Usage
from durability.runs.fence import Claim, FencedStore
from durability.store.database import DB_ERRORS
from durability.store.dialect import dialect_of
from durability.store.events import Event, append, append_for
from durability.store.events import newest as newest_events
from durability.store.events import read as read_events
from durability.store.models import AttemptKey

__all__ = ["AttemptInfo", "RunState", "TaskRecords"]


@dataclass(frozen=True)
class AttemptInfo:
    attempt: int
    state: str
    error: dict[str, Any] | None
    #: a failure made before a resume of the failed run: no longer counted
    #: against the task's retries (see ``Runs.start_running``)
    forgiven: bool = False


@dataclass(frozen=True)
class RunState:
    """Everything the scheduler derives its next step from."""

    #: (node_id, iteration) -> the output's JSON text
    outputs: dict[tuple[str, int], str] = field(default_factory=dict)
    #: (node_id, iteration) -> its attempts, oldest first
    attempts: dict[tuple[str, int], list[AttemptInfo]] = field(default_factory=dict)
    #: node_id -> (decision, reason)
    approvals: dict[str, tuple[str, str | None]] = field(default_factory=dict)


class TaskRecords(FencedStore):
    def begin_attempt(self, claim: Claim, node_id: str, iteration: int,
                      worktree: str | None) -> AttemptKey:
        """Start the next attempt of a task iteration (numbered by the store)."""
        now = self._clock()
        with self.fenced(claim) as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE run_id=$1 AND node_id=$2 "
                "AND iteration=$3", (claim.run_id, node_id, iteration)).fetchone()
            key = AttemptKey(claim.run_id, node_id, iteration, int(row[0]) + 1)
            conn.execute(
                "INSERT INTO attempts (run_id, node_id, iteration, attempt, state, "
                "started_at_ms, heartbeat_at_ms, worktree) VALUES ($1,$2,$3,$4,'running',$5,$6,$7)",
                (*_key(key), now, now, worktree))
            append_for(conn, key, "attempt-started", now)
        return key

    def end_attempt(self, claim: Claim, key: AttemptKey, state: str,
                    error: dict[str, Any] | None = None) -> None:
        """Close an attempt that did not produce an output."""
        now = self._clock()
        with self.fenced(claim) as conn:
            conn.execute(
                "UPDATE attempts SET state=$1, finished_at_ms=$2, error_json=$3 WHERE run_id=$4 "
                "AND node_id=$5 AND iteration=$6 AND attempt=$7",
                (state, now, json.dumps(error) if error else None, *_key(key)))
            append_for(conn, key, f"attempt-{state}", now,
                       detail={"code": error.get("code")} if error else None)

    def complete_attempt(self, claim: Claim, key: AttemptKey, output_json: str) -> None:
        """Record a validated output and close its attempt, in one transaction."""
        now = self._clock()
        with self.fenced(claim) as conn:
            conn.execute(
                "INSERT INTO task_outputs (run_id, node_id, iteration, attempt, "
                "output_json, created_at_ms) VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT DO NOTHING",
                (*_key(key), output_json, now))
            conn.execute(
                "UPDATE attempts SET state='succeeded', finished_at_ms=$1 WHERE run_id=$2 AND "
                "node_id=$3 AND iteration=$4 AND attempt=$5", (now, *_key(key)))
            append_for(conn, key, "attempt-finished", now)

    def run_state(self, run_id: str) -> RunState:
        """A consistent read of a run's outputs, attempts and approvals."""
        try:
            return self._run_state(run_id)
        except DB_ERRORS as exc:  # as every other read: a one-line error, not a traceback
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc

    def _run_state(self, run_id: str) -> RunState:
        state = RunState()
        with self._conn() as conn:
            dialect_of(conn).begin_read(conn)  # one snapshot for the three reads
            try:
                for node, it, out in conn.execute(
                        "SELECT node_id, iteration, output_json FROM task_outputs "
                        "WHERE run_id=$1", (run_id,)):
                    state.outputs[(node, it)] = out
                for node, it, att, st, err, forgiven in conn.execute(
                        "SELECT node_id, iteration, attempt, state, error_json, forgiven "
                        "FROM attempts WHERE run_id=$1 ORDER BY attempt", (run_id,)):
                    info = AttemptInfo(att, st, json.loads(err) if err else None,
                                       bool(forgiven))
                    state.attempts.setdefault((node, it), []).append(info)
                for node, decision, reason in conn.execute(
                        "SELECT node_id, decision, reason FROM approvals WHERE run_id=$1",
                        (run_id,)):
                    state.approvals[node] = (decision, reason)
            finally:
                conn.execute("COMMIT")
        return state

    def outputs(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._read(
            "SELECT node_id, iteration, attempt, output_json, created_at_ms FROM task_outputs "
            "WHERE run_id=$1 ORDER BY node_id, iteration", (run_id,))
        return [{"node_id": n, "iteration": i, "attempt": a, "output": json.loads(o),
                 "created_at_ms": t} for n, i, a, o, t in rows]

    def decide(self, run_id: str, node_id: str, decision: str, reason: str | None) -> None:
        """Record a person's approval or denial of a gated node (durably)."""
        if decision not in ("approved", "denied"):
            raise InvalidValue(f"decision must be approved or denied, not {decision!r}")
        with self._write() as conn:
            row = conn.execute("SELECT state, plan_json FROM runs WHERE run_id=$1",
                               (run_id,)).fetchone()
            if row is None or row[0] is None:
                raise NotFound(f"no engine run {run_id!r}")
            if node_id not in {t["id"] for t in json.loads(row[1] or "[]")}:
                raise NotFound(f"run {run_id} has no task {node_id!r}")
            conn.execute(
                "INSERT INTO approvals (run_id, node_id, decision, reason, decided_at_ms) "
                "VALUES ($1,$2,$3,$4,$5) ON CONFLICT (run_id, node_id) DO UPDATE SET "
                "decision=excluded.decision, reason=excluded.reason, "
                "decided_at_ms=excluded.decided_at_ms",
                (run_id, node_id, decision, reason, self._clock()))
            append(conn, run_id, "approval", self._clock(), node_id=node_id,
                   detail={"decision": decision, "reason": reason})

    def events(self, run_id: str, *, after_id: int = 0, limit: int = 1000) -> list[Event]:
        """The run's logged events after ``after_id``, oldest first."""
        try:
            with self._conn() as conn:
                return read_events(conn, run_id, after_id=after_id, limit=limit)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc

    def newest_events(self, run_id: str, limit: int) -> tuple[list[Event], int]:
        """The run's newest ``limit`` events, oldest first, and its total."""
        try:
            with self._conn() as conn:
                return newest_events(conn, run_id, limit)
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot read the state database: {exc}") from exc

    def note(self, run_id: str, kind: str, *, node_id: str | None = None,
             detail: dict[str, Any] | None = None) -> None:
        """Append an event that goes with no state change (a lost claim, a
        budget hit, a restore); never fenced: a loser may say it lost."""
        with self._write() as conn:
            append(conn, run_id, kind, self._clock(), node_id=node_id, detail=detail)

    def add_usage(self, run_id: str, *, turns: int, tokens: int, cost: float) -> Usage:
        """Count a progress event; returns the run's totals after it."""
        with self._write() as conn:
            conn.execute("INSERT INTO run_usage (run_id) VALUES ($1) ON CONFLICT DO NOTHING",
                         (run_id,))
            conn.execute("UPDATE run_usage SET turns=turns+$1, tokens=tokens+$2, cost=cost+$3 "
                         "WHERE run_id=$4", (turns, tokens, cost, run_id))
            row = conn.execute("SELECT turns, tokens, cost FROM run_usage WHERE run_id=$1",
                               (run_id,)).fetchone()
        return Usage(*row)

    def usage(self, run_id: str) -> Usage:
        rows = self._read("SELECT turns, tokens, cost FROM run_usage WHERE run_id=$1", (run_id,))
        return Usage(*rows[0]) if rows else Usage()


def _key(key: AttemptKey) -> tuple[str, str, int, int]:
    return (key.run_id, key.node_id, key.iteration, key.attempt)
