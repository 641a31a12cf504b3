"""What an agent task records (migration 0016): the harness and session of
each attempt, the tool calls a session completed, and the harnesses a run
found blocked by a quota.

Every write is fenced by the run's claim: a process that lost the run
records nothing about an agent (it no longer owns it).  Reads decide the
resume (which session to continue, which tree to restore), so they read
state tables, never the event log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durability.runs.attempt_checkpoints import ATTEMPT_SOURCE, START_LABEL, Target
from durability.runs.fence import Claim
from durability.runs.run_rows import Runs
from durability.store.events import append_for
from durability.store.models import AttemptKey, Checkpoint

__all__ = ["Block", "Prior", "agent_target", "blocks", "clear_block", "complete_call",
           "note", "prior_session", "record_block", "record_session"]

#: How an interrupted attempt ended when its session may be continued: the
#: process went away (abandoned), lost its claim, or parked on a quota.
#: A failed or cancelled attempt's session is never continued, nor one
#: stopped by a budget (a person raised the limit: start clean).
RESUMABLE_CODES = frozenset({"RUN_CLAIM_LOST", "QUOTA_EXHAUSTED"})


@dataclass(frozen=True)
class Block:
    harness: str
    reset_at_ms: int | None
    message: str | None
    claim_epoch: int


@dataclass(frozen=True)
class Prior:
    """The session an interrupted attempt ran, to continue on resume."""

    attempt: int
    harness: str
    session_id: str
    #: the attempts of this task iteration that ran this session, oldest first
    attempts: tuple[int, ...]


def note(runs: Runs, claim: Claim, key: AttemptKey, kind: str,
         detail: dict[str, Any] | None = None) -> None:
    """An event about an agent attempt, fenced by the claim."""
    with runs.fenced(claim) as conn:
        append_for(conn, key, kind, runs._clock(), detail=detail)


def record_session(runs: Runs, claim: Claim, key: AttemptKey, harness: str,
                   session_id: str) -> None:
    """The attempt runs ``session_id`` of ``harness`` (as soon as the stream says)."""
    with runs.fenced(claim) as conn:
        conn.execute("UPDATE attempts SET harness=$1, session_id=$2 WHERE run_id=$3 AND "
                     "node_id=$4 AND iteration=$5 AND attempt=$6",
                     (harness, session_id, *_key(key)))
        append_for(conn, key, "agent-session", runs._clock(),
                   detail={"harness": harness, "session_id": session_id})


def complete_call(runs: Runs, claim: Claim, key: AttemptKey, session_id: str,
                  tool_use_id: str, name: str | None) -> None:
    """A tool call of ``session_id`` whose result the stream carried."""
    with runs.fenced(claim) as conn:
        conn.execute(
            "INSERT INTO agent_calls (run_id, session_id, tool_use_id, node_id, iteration, "
            "attempt, name, completed_at_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8) "
            "ON CONFLICT DO NOTHING",
            (key.run_id, session_id, tool_use_id[:200], key.node_id, key.iteration,
             key.attempt, (name or "")[:200] or None, runs._clock()))


def completed_calls(runs: Runs, run_id: str, session_id: str) -> set[str]:
    rows = runs._read("SELECT tool_use_id FROM agent_calls WHERE run_id=$1 AND session_id=$2",
                      (run_id, session_id))
    return {str(r[0]) for r in rows}


def blocks(runs: Runs, run_id: str) -> list[Block]:
    rows = runs._read("SELECT harness, reset_at_ms, message, claim_epoch FROM agent_blocks "
                      "WHERE run_id=$1 ORDER BY harness", (run_id,))
    return [Block(str(h), None if r is None else int(r), m, int(e)) for h, r, m, e in rows]


def record_block(runs: Runs, claim: Claim, key: AttemptKey, harness: str,
                 reset_at_ms: int | None, message: str) -> None:
    """``harness`` is blocked by a quota until ``reset_at_ms`` (None: unknown)."""
    now = runs._clock()
    with runs.fenced(claim) as conn:
        conn.execute("DELETE FROM agent_blocks WHERE run_id=$1 AND harness=$2",
                     (key.run_id, harness))
        conn.execute("INSERT INTO agent_blocks (run_id, harness, reset_at_ms, message, "
                     "claim_epoch, blocked_at_ms) VALUES ($1,$2,$3,$4,$5,$6)",
                     (key.run_id, harness, reset_at_ms, message[:1000], claim.epoch, now))
        append_for(conn, key, "agent-blocked", now,
                   detail={"harness": harness, "reset_at_ms": reset_at_ms,
                           "message": message[:300]})


def clear_block(runs: Runs, claim: Claim, run_id: str, harness: str) -> None:
    with runs.fenced(claim) as conn:
        conn.execute("DELETE FROM agent_blocks WHERE run_id=$1 AND harness=$2",
                     (run_id, harness))


def prior_session(runs: Runs, key_run: str, node_id: str, iteration: int) -> Prior | None:
    """The session to continue for the next attempt of ``node_id``: the last
    attempt's, when it was interrupted (not failed, not cancelled) and had
    one; None otherwise."""
    rows = runs._read(
        "SELECT attempt, state, error_json, harness, session_id FROM attempts WHERE run_id=$1 "
        "AND node_id=$2 AND iteration=$3 ORDER BY attempt", (key_run, node_id, iteration))
    if not rows:
        return None
    attempt, state, error_json, harness, session = rows[-1]
    code = (json.loads(error_json) if error_json else {}).get("code")
    resumable = state == "abandoned" or (state == "stopped" and code in RESUMABLE_CODES)
    if not resumable or not session or not harness:
        return None
    same = tuple(int(r[0]) for r in rows if r[4] == session)
    return Prior(int(attempt), str(harness), str(session), same)


def agent_target(checkpoints: Sequence[Checkpoint], prior: Prior, completed: set[str], *,
                 node_id: str, iteration: int, worktree: str) -> Target | None:
    """Where a continued session's tree starts: the newest checkpoint of the
    session's attempts whose tool call the session completed, else the tree
    the session's first attempt started from (no call completed)."""
    own = sorted((c for c in checkpoints if c.worktree == worktree and c.node_id == node_id
                  and c.iteration == iteration and c.attempt in prior.attempts
                  and c.source != "pre-restore"), key=_order)
    done = [c for c in own if c.tool_use_id is not None and c.tool_use_id in completed]
    if done:
        return Target(done[-1], f"last completed call {done[-1].tool_use_id}")
    starts = [c for c in own if c.source == ATTEMPT_SOURCE and c.label == START_LABEL]
    if starts:
        return Target(starts[0], "no completed call: the session's start")
    return None


def _order(c: Checkpoint) -> tuple[int, int, int]:
    return (c.created_at_ms, c.attempt, c.seq)


def _key(key: AttemptKey) -> tuple[str, str, int, int]:
    return (key.run_id, key.node_id, key.iteration, key.attempt)
