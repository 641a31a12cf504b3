"""Isolated worktrees: a task of its own jj workspace or git worktree.

A task declared ``worktree="isolated"`` works in a worktree of its own,
made from the run's (shared) worktree before its first attempt, reused by
every later attempt (a resume finds it in the ``task_worktrees`` table), and
merged back into the shared worktree when the task finishes.  A merge that
conflicts fails the task with ``WORKTREE_CONFLICT`` and keeps both sides:
the isolated worktree stays where it is, and both trees are checkpoints.

``engine`` knows nothing of jj or git: the worktree work is an
``IsolationOps`` (``durability.worktree_ops.isolation`` implements it), and
this module keeps the records and the order of the steps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from durability.runs.fence import Claim
from durability.runs.run_rows import Runs
from durability.store.events import append_for
from durability.store.models import AttemptKey

__all__ = ["Isolation", "IsolationOps", "Made", "TaskWorktree", "task_worktrees"]

log = logging.getLogger(__name__)

_COLS = ("run_id, node_id, iteration, path, kind, shared, base_commit, name, state, "
         "created_at_ms, updated_at_ms")


@dataclass(frozen=True)
class Made:
    """A worktree ``IsolationOps.create`` made."""

    path: str
    #: ``jj`` (a workspace) or ``git`` (a linked worktree)
    kind: str
    #: the shared worktree's tree it started from (the merge base), pinned
    base_commit: str
    #: the jj workspace name, or the git ref under refs/durability/
    name: str


@dataclass(frozen=True)
class TaskWorktree:
    """A row of ``task_worktrees``: one task iteration's isolated worktree."""

    run_id: str
    node_id: str
    iteration: int
    path: str
    kind: str
    shared: str
    base_commit: str
    name: str
    #: ``active`` (in use), ``conflict`` (its merge conflicted; kept),
    #: ``merged`` (merged back, not yet removed), ``removed``
    state: str
    created_at_ms: int
    updated_at_ms: int


class IsolationOps(Protocol):
    def create(self, run_id: str, node_id: str, iteration: int, shared: str,
               base: str | None = None) -> Made:
        """Make an isolated worktree holding the shared worktree's tree as it
        is now, or the tree of ``base`` (a commit made by an earlier create)."""
        ...

    def usable(self, row: TaskWorktree) -> bool:
        """Whether the worktree of ``row`` is still there to work in."""
        ...

    def merge_back(self, row: TaskWorktree, key: AttemptKey) -> str:
        """Merge the isolated tree into the shared worktree (three-way, from
        ``row.base_commit``), checkpointing both sides on ``key``; a one-line
        description.  Raises ``WorktreeConflict`` having changed nothing in
        the shared worktree."""
        ...

    def remove(self, row: TaskWorktree) -> None:
        """Delete the isolated worktree (its checkpoints stay restorable)."""
        ...


class Isolation:
    """The isolated worktrees of one claimed run."""

    def __init__(self, runs: Runs, claim: Claim, ops: IsolationOps) -> None:
        self.runs = runs
        self.claim = claim
        self.ops = ops

    def worktree_for(self, node_id: str, iteration: int, shared: str) -> str:
        """The task iteration's worktree: the recorded one while it is there,
        else a new one (recorded before the attempt begins)."""
        row = self.row(node_id, iteration)
        if row is not None and row.state != "removed" and self.ops.usable(row):
            if row.state != "active":
                self._set_state(row, "active")
            return row.path
        base = None
        if row is not None and row.state != "removed":
            # Made again from the same base: the attempt's checkpoints (which
            # a restore puts back) and the merge both start from that tree.
            # A newer base would have the restore undo, and the merge then
            # delete, whatever other tasks merged meanwhile.
            log.warning("run %s: the isolated worktree %s of %s is gone; making it again",
                        self.claim.run_id, row.path, node_id)
            base = row.base_commit
        made = self.ops.create(self.claim.run_id, node_id, iteration, shared, base)
        now = self.runs._clock()
        with self.runs.fenced(self.claim) as conn:
            conn.execute("DELETE FROM task_worktrees WHERE run_id=$1 AND node_id=$2 AND "
                         "iteration=$3", (self.claim.run_id, node_id, iteration))
            conn.execute(
                f"INSERT INTO task_worktrees ({_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)",
                (self.claim.run_id, node_id, iteration, made.path, made.kind, shared,
                 made.base_commit, made.name, "active", now, now))
        return made.path

    def merge_back(self, node_id: str, iteration: int, key: AttemptKey) -> str:
        """Merge the task's tree into the shared worktree; ``WorktreeConflict``
        marks the row ``conflict`` (the worktree is kept) and propagates."""
        from durability.ground.store_errors import WorktreeConflict

        row = self.row(node_id, iteration)
        if row is None:
            raise WorktreeConflict(f"{node_id} iteration {iteration} has no isolated worktree "
                                   "on record to merge back")
        try:
            done = self.ops.merge_back(row, key)
        except WorktreeConflict as exc:
            self._set_state(row, "conflict", key=key, event=(
                "merge-conflict", {"worktree": row.path, "into": row.shared,
                                   "message": str(exc)[:2000]}))
            raise
        self._set_state(row, "merged", key=key, event=(
            "merge", {"worktree": row.path, "into": row.shared, "done": done}))
        return done

    def remove(self, node_id: str, iteration: int) -> None:
        """Delete a merged worktree; a failure to delete is logged, not fatal
        (the work is merged and recorded)."""
        row = self.row(node_id, iteration)
        if row is None or row.state != "merged":
            return
        try:
            self.ops.remove(row)
        except Exception as exc:
            log.warning("run %s: could not remove %s: %s", self.claim.run_id, row.path, exc)
            return
        self._set_state(row, "removed")

    def sweep(self, done: set[tuple[str, int]]) -> None:
        """Remove the merged worktrees of completed tasks that a crash left
        behind (between recording the output and deleting the worktree)."""
        for row in self.rows(self.claim.run_id):
            if row.state == "merged" and (row.node_id, row.iteration) in done:
                self.remove(row.node_id, row.iteration)

    def row(self, node_id: str, iteration: int) -> TaskWorktree | None:
        found = self.runs._read(
            f"SELECT {_COLS} FROM task_worktrees WHERE run_id=$1 AND node_id=$2 AND iteration=$3",
            (self.claim.run_id, node_id, iteration))
        return TaskWorktree(*found[0]) if found else None

    def rows(self, run_id: str) -> list[TaskWorktree]:
        return task_worktrees(self.runs, run_id)

    def _set_state(self, row: TaskWorktree, state: str, *, key: AttemptKey | None = None,
                   event: tuple[str, dict[str, Any]] | None = None) -> None:
        """Move ``row`` to ``state``, logging ``event`` (kind, detail) about
        ``key``'s attempt in the same write."""
        now = self.runs._clock()
        with self.runs.fenced(self.claim) as conn:
            conn.execute("UPDATE task_worktrees SET state=$1, updated_at_ms=$2 WHERE run_id=$3 AND "
                         "node_id=$4 AND iteration=$5",
                         (state, now, row.run_id, row.node_id, row.iteration))
            if event is not None and key is not None:
                append_for(conn, key, event[0], now, detail=event[1])


def task_worktrees(runs: Runs, run_id: str) -> list[TaskWorktree]:
    """Every isolated worktree a run made, by task and iteration."""
    rows = runs._read(f"SELECT {_COLS} FROM task_worktrees WHERE run_id=$1 "
                      "ORDER BY node_id, iteration", (run_id,))
    return [TaskWorktree(*r) for r in rows]
