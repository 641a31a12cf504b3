"""Run rows: lifecycle state, ownership and claims, in the state database.

Every write made on behalf of a run's owner is *fenced*: it runs in one
``BEGIN IMMEDIATE`` transaction that first checks the run's ``claim_epoch``
is still the one the owner claimed.  A claim is a compare-and-swap on that
epoch, so of two processes claiming the same observed state exactly one
wins, and an owner that was displaced can never record anything again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from durability.ground.store_errors import InvalidValue, NotFound, RunNotActive
from durability.runs.fence import Claim, Owner
from durability.runs.records import TaskRecords
from durability.store.database import Connection
from durability.store.events import append

__all__ = ["ACTIVE", "PARKED", "STATES", "Claim", "Owner", "RunRow", "Runs"]

STATES = ("running", "waiting-approval", "waiting-quota", "paused", "cancelled", "finished",
          "failed")
#: States in which no process works on the run.
PARKED = frozenset(STATES) - {"running"}
ACTIVE = frozenset({"running", "waiting-approval", "waiting-quota", "paused"})

_RUN_COLS = ("run_id, created_at_ms, state, workflow_path, repo_root, worktree, metadata_json, "
             "plan_json, limits_json, owner, owner_pid, owner_host, claim_epoch, claimed_at_ms, "
             "heartbeat_at_ms, requested, wake_at_ms, waiting_on, error_json, updated_at_ms")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    created_at_ms: int
    state: str | None
    workflow_path: str | None
    repo_root: str | None
    worktree: str | None
    metadata_json: str | None
    plan_json: str | None
    limits_json: str | None
    owner: str | None
    owner_pid: int | None
    owner_host: str | None
    claim_epoch: int
    claimed_at_ms: int | None
    heartbeat_at_ms: int | None
    requested: str | None
    wake_at_ms: int | None
    waiting_on: str | None
    error_json: str | None
    updated_at_ms: int | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("plan_json", "error_json", "limits_json"):
            data[name.removesuffix("_json")] = json.loads(data.pop(name) or "null")
        data.pop("metadata_json")
        return data


class Runs(TaskRecords):
    """The store, with the engine's runs."""

    def __enter__(self) -> Runs:
        return self

    def get_run(self, run_id: str) -> RunRow:
        rows = self._read(f"SELECT {_RUN_COLS} FROM runs WHERE run_id=$1", (run_id,))
        if not rows or rows[0][2] is None:
            raise NotFound(f"no engine run {run_id!r}")
        return RunRow(*rows[0])

    def list_runs(self) -> list[RunRow]:
        """Every run the engine started, newest first."""
        rows = self._read(f"SELECT {_RUN_COLS} FROM runs WHERE state IS NOT NULL "
                          "ORDER BY created_at_ms DESC, run_id")
        return [RunRow(*r) for r in rows]

    def create_run(self, run_id: str, *, owner: Owner, workflow_path: str, repo_root: str,
                   worktree: str | None, metadata_json: str, plan_json: str,
                   limits_json: str,
                   also: Callable[[Connection, Claim], None] | None = None) -> Claim:
        """Record a new run, claimed by ``owner``; an engine run id is used once.

        ``also`` writes more rows of the new run in the same transaction (a
        fork's copied outputs and its link): the run exists with them or not
        at all."""
        now = self._clock()
        with self._write() as conn:
            row = conn.execute("SELECT state FROM runs WHERE run_id=$1", (run_id,)).fetchone()
            if row is not None and row[0] is not None:
                raise InvalidValue(f"run {run_id!r} already exists: resume it instead")
            # A row without a state was made by a hook that fired first; adopt it.
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ($1, $2) "
                         "ON CONFLICT DO NOTHING", (run_id, now))
            conn.execute(
                "UPDATE runs SET state='running', workflow_path=$1, repo_root=$2, worktree=$3, "
                "metadata_json=$4, plan_json=$5, limits_json=$6, owner=$7, owner_pid=$8, "
                "owner_host=$9, claim_epoch=claim_epoch+1, claimed_at_ms=$10, heartbeat_at_ms=$11, "
                "updated_at_ms=$12 WHERE run_id=$13",
                (workflow_path, repo_root, worktree, metadata_json, plan_json, limits_json,
                 owner.name, owner.pid, owner.host, now, now, now, run_id))
            conn.execute("INSERT INTO run_usage (run_id) VALUES ($1) ON CONFLICT DO NOTHING",
                         (run_id,))
            epoch = conn.execute("SELECT claim_epoch FROM runs WHERE run_id=$1",
                                 (run_id,)).fetchone()[0]
            append(conn, run_id, "run-started", now,
                   detail={"owner": owner.name, "workflow": workflow_path})
            claim = Claim(run_id, int(epoch), owner)
            if also is not None:
                also(conn, claim)
        return claim

    def claim(self, run_id: str, *, expected_epoch: int, owner: Owner) -> Claim | None:
        """Compare-and-swap: take the run if its epoch is still ``expected_epoch``.

        A run that had an owner (alive or not) is taken from it: its claim is
        lost here, in this transaction, and the log says so, because the
        displaced owner can record nothing once it notices."""
        now = self._clock()
        with self._write() as conn:
            held = conn.execute("SELECT owner FROM runs WHERE run_id=$1 AND claim_epoch=$2",
                                (run_id, expected_epoch)).fetchone()
            cur = conn.execute(
                "UPDATE runs SET owner=$1, owner_pid=$2, owner_host=$3, claim_epoch=claim_epoch+1, "
                "claimed_at_ms=$4, heartbeat_at_ms=$5, updated_at_ms=$6 "
                "WHERE run_id=$7 AND claim_epoch=$8 AND state IS NOT NULL",
                (owner.name, owner.pid, owner.host, now, now, now, run_id, expected_epoch))
            if cur.rowcount == 1 and held is not None and held[0] is not None:
                append(conn, run_id, "claim-lost", now,
                       detail={"owner": held[0], "epoch": expected_epoch, "by": owner.name})
            if cur.rowcount == 1:
                append(conn, run_id, "claim-won", now,
                       detail={"owner": owner.name, "epoch": expected_epoch + 1})
        if cur.rowcount != 1:
            return None
        return Claim(run_id, expected_epoch + 1, owner)

    def take_over(self, run_id: str, *, epoch: int, owner: Owner) -> Claim | None:
        """Hand a claim made by a supervisor to the child process it started."""
        now = self._clock()
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET owner_pid=$1, owner_host=$2, heartbeat_at_ms=$3, updated_at_ms=$4 "
                "WHERE run_id=$5 AND claim_epoch=$6 AND owner=$7",
                (owner.pid, owner.host, now, now, run_id, epoch, owner.name))
        return Claim(run_id, epoch, owner) if cur.rowcount == 1 else None

    def start_running(self, claim: Claim, *, metadata_json: str | None = None,
                      plan_json: str | None = None, keep_request: bool = False,
                      announce: bool = True) -> None:
        """Mark the claimed run running; attempts a previous owner left running
        are marked abandoned (they will re-run as fresh attempts).  When the
        run was ``failed``, its failed attempts are forgiven: each unfinished
        task gets its whole retry budget again.  A pending pause or cancel is
        cleared, unless ``keep_request`` (a worker starting on a claim taken
        for it: a request made since was made of this claim).  ``announce``
        False: the claimant already started it (and logged the resume); the
        worker it handed the claim to only brings the record up to date."""
        now = self._clock()
        with self.fenced(claim) as conn:
            # Resuming a failed run is a person's decision to try again (after
            # fixing the cause), so the failures that exhausted the retries
            # must stop counting, or the run would fail again at once.  The
            # state is read in this transaction: only the claim that moves the
            # run out of 'failed' forgives, and a resume of a run in any other
            # state leaves the retry budget as it was.
            conn.execute(
                "UPDATE attempts SET forgiven=1 WHERE run_id=$1 AND state='failed' AND "
                "forgiven=0 AND (SELECT state FROM runs WHERE run_id=$2)='failed'",
                (claim.run_id, claim.run_id))
            conn.execute(
                "UPDATE runs SET state='running', "
                + ("" if keep_request else "requested=NULL, ")
                + "wake_at_ms=NULL, waiting_on=NULL, error_json=NULL, updated_at_ms=$1, "
                "metadata_json=COALESCE($2, metadata_json), plan_json=COALESCE($3, plan_json) "
                "WHERE run_id=$4",
                (now, metadata_json, plan_json, claim.run_id))
            left = conn.execute(
                "SELECT node_id, iteration, attempt FROM attempts WHERE run_id=$1 AND "
                "state='running' ORDER BY node_id, iteration, attempt",
                (claim.run_id,)).fetchall()
            conn.execute(
                "UPDATE attempts SET state='abandoned', finished_at_ms=$1 "
                "WHERE run_id=$2 AND state='running'", (now, claim.run_id))
            for node, iteration, attempt in left:
                append(conn, claim.run_id, "attempt-abandoned", now, node_id=node,
                       iteration=iteration, attempt=attempt)
            if claim.epoch > 1 and announce:  # a claim after the first: the run is resumed
                append(conn, claim.run_id, "run-resumed", now,
                       detail={"owner": claim.owner.name, "epoch": claim.epoch})

    def beat(self, claim: Claim) -> str | None:
        """Refresh the heartbeats of the run and its running attempts; return
        what was requested of the owner ('pause', 'cancel' or None)."""
        now = self._clock()
        with self.fenced(claim) as conn:
            conn.execute("UPDATE runs SET heartbeat_at_ms=$1 WHERE run_id=$2",
                         (now, claim.run_id))
            conn.execute("UPDATE attempts SET heartbeat_at_ms=$1 WHERE run_id=$2 AND "
                         "state='running'", (now, claim.run_id))
            row = conn.execute("SELECT requested FROM runs WHERE run_id=$1",
                               (claim.run_id,)).fetchone()
        return row[0] if row else None

    def park(self, claim: Claim, state: str, *, error: dict[str, Any] | None = None,
             waiting_on: str | None = None, wake_at_ms: int | None = None) -> None:
        """Leave the run in ``state`` and release it: no owner works on it now."""
        if state not in PARKED:
            raise InvalidValue(f"cannot park a run as {state!r}")
        with self.fenced(claim) as conn:
            conn.execute(
                "UPDATE runs SET state=$1, error_json=$2, waiting_on=$3, wake_at_ms=$4, "
                "requested=NULL, owner=NULL, owner_pid=NULL, owner_host=NULL, "
                "updated_at_ms=$5 WHERE run_id=$6",
                (state, json.dumps(error) if error else None, waiting_on, wake_at_ms,
                 self._clock(), claim.run_id))
            append(conn, claim.run_id, "run-parked", self._clock(),
                   detail={"state": state, "error": error, "waiting_on": waiting_on})

    def request(self, run_id: str, kind: str, *, live_within_ms: int) -> str:
        """Ask for ``pause`` or ``cancel``.  A live owner is asked and acts on
        it (returns 'requested'); a run nobody works on changes state at once
        (returns the new state)."""
        target = {"pause": "paused", "cancel": "cancelled"}[kind]
        now = self._clock()
        with self._write() as conn:
            row = conn.execute("SELECT state, owner, heartbeat_at_ms, claim_epoch FROM runs "
                               "WHERE run_id=$1", (run_id,)).fetchone()
            if row is None or row[0] is None:
                raise NotFound(f"no engine run {run_id!r}")
            state, owner, beat, epoch = row
            if state in ("finished", "cancelled") or (state == "failed" and kind == "pause"):
                raise RunNotActive(f"run {run_id} is {state}; nothing to {kind}")
            append(conn, run_id, kind, now, detail={"state": state})
            if state == "running" and owner and beat is not None and now - beat < live_within_ms:
                conn.execute("UPDATE runs SET requested=$1 WHERE run_id=$2", (kind, run_id))
                return "requested"
            # An owner whose heartbeat is stale may only be asleep (a suspended
            # laptop): its claim ends here, so once awake it can record
            # nothing more on a run that was paused or cancelled meanwhile.
            conn.execute("UPDATE runs SET state=$1, requested=NULL, owner=NULL, owner_pid=NULL, "
                         "owner_host=NULL, claim_epoch=claim_epoch+1, updated_at_ms=$2 "
                         "WHERE run_id=$3", (target, now, run_id))
            if owner:
                append(conn, run_id, "claim-lost", now,
                       detail={"owner": owner, "epoch": epoch, "by": kind})
            return target

    def supervisable(self, *, now: int, stale_after_ms: int,
                     run_ids: list[str] | None = None) -> list[RunRow]:
        """Running runs whose heartbeat is stale, and waiting-quota runs whose
        reset time has passed."""
        rows = self._read(
            f"SELECT {_RUN_COLS} FROM runs WHERE (state='running' AND "
            "(heartbeat_at_ms IS NULL OR heartbeat_at_ms < $1)) OR "
            "(state='waiting-quota' AND wake_at_ms IS NOT NULL AND wake_at_ms <= $2) "
            "ORDER BY updated_at_ms, run_id", (now - stale_after_ms, now))
        found = [RunRow(*r) for r in rows]
        return [r for r in found if run_ids is None or r.run_id in run_ids]
