"""Forking a run from one of its checkpoints (``durability fork``).

A fork is a new run that starts where an old one stood at a checkpoint of
task ``node`` (Smithers' "fork from a frame"): the tasks the old run had
completed by then are completed in the new one too (their outputs copied,
not re-run), the worktree is restored to that checkpoint's tree, and the
rest runs under the workflow file as it is *now*, so an edited workflow
tries a fix from a known point.  The checkpoint's task itself runs again,
from that tree.  The new run records where it came from (``run_forks``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from durability.ground.store_errors import InvalidValue, NotFound, WorkflowInvalid
from durability.runs.budget import Limits
from durability.runs.execute import EngineConfig, drive, new_run_id
from durability.runs.fence import Claim, Owner
from durability.runs.loader import Loaded, load_workflow
from durability.runs.metadata import compute
from durability.runs.resume import check_claimable
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from durability.runs.workflow import validate_id
from durability.store.database import Connection
from durability.store.events import append
from durability.store.models import AttemptKey, Checkpoint

__all__ = ["ForkPoint", "Restore", "create_fork", "find_point", "fork_run", "forked_from"]

#: Puts a worktree back to a checkpoint's tree; a one-line description.
Restore = Callable[[Checkpoint, str], str]


@dataclass(frozen=True)
class ForkPoint:
    """Where a run was forked from."""

    parent_run_id: str
    node_id: str
    iteration: int
    attempt: int
    seq: int
    commit_id: str
    #: How many task outputs were copied from the parent.
    copied: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The source of a restore's safety checkpoint: the tree the restore
#: replaced (its undo), never a point of the task it is filed under.
PRE_RESTORE = "pre-restore"


def find_point(runs: Runs, run_id: str, node_id: str, iteration: int | None = None,
               seq: int | None = None) -> Checkpoint:
    """The checkpoint named: of ``node_id``'s newest attempt (in
    ``iteration``, default the newest with checkpoints), ``seq`` or its last.

    ``pre-restore`` checkpoints are skipped, as the engine's restore target
    skips them (``durability.runs.attempt_checkpoints.restore_target``): a restore
    (a fork's own, say) files one on the attempt it restored, holding a tree
    of a later moment, so a fork from it would copy later tasks' outputs.
    A ``seq`` naming one is ``InvalidValue`` naming the seqs that are points.
    """
    runs.get_run(run_id)  # NotFound for a run the engine never ran
    usable = [c for c in runs.checkpoints(run_id, node_id) if c.source != PRE_RESTORE
              and (iteration is None or c.iteration == iteration)]
    if not usable:
        where = "" if iteration is None else f" in iteration {iteration}"
        raise NotFound(f"run {run_id!r} node {node_id!r} has no checkpoints{where}")
    newest = max((c.iteration, c.attempt) for c in usable)
    own = [c for c in usable if (c.iteration, c.attempt) == newest]
    if seq is None:
        return max(own, key=lambda c: c.seq)
    key = AttemptKey(run_id, node_id, *newest)
    found = runs.checkpoint(key, seq)  # NotFound naming the seqs there are
    if found.source == PRE_RESTORE:
        raise InvalidValue(
            f"run {run_id!r} node {node_id!r} iteration {key.iteration} attempt "
            f"{key.attempt} seq {seq} is a pre-restore checkpoint (the tree a restore "
            f"replaced), not a point of the task: fork from {_seqs(own)}")
    return found


def _seqs(points: list[Checkpoint]) -> str:
    seqs = sorted(c.seq for c in points)
    if seqs == list(range(seqs[0], seqs[-1] + 1)):
        return f"seq {seqs[0]}" if len(seqs) == 1 else f"seq {seqs[0]} to {seqs[-1]}"
    return "seq " + ", ".join(map(str, seqs))


def fork_run(runs: Runs, run_id: str, *, node_id: str, config: EngineConfig, restore: Restore,
             iteration: int | None = None, seq: int | None = None,
             new_id: str | None = None, owner: Owner | None = None) -> RunOutcome:
    """Fork ``run_id`` at a checkpoint of ``node_id`` into a new run and drive it."""
    loaded, claim = create_fork(runs, run_id, node_id=node_id, config=config, restore=restore,
                                iteration=iteration, seq=seq, new_id=new_id, owner=owner)
    return drive(runs, loaded, claim, config)


def create_fork(runs: Runs, run_id: str, *, node_id: str, config: EngineConfig,
                restore: Restore, iteration: int | None = None, seq: int | None = None,
                new_id: str | None = None, owner: Owner | None = None
                ) -> tuple[Loaded, Claim]:
    """``fork_run`` up to the claim: every check, the worktree restored and
    the new run recorded, claimed by ``owner``, nothing driven yet (a
    detached fork hands the claim to a worker, ``durability.runs.detach``)."""
    new_id = validate_id(new_id or new_run_id(), "run id")
    parent = runs.get_run(run_id)
    # The fork restores the parent's worktree: never under a live owner's tasks.
    check_claimable(parent, now=config.clock(), stale_after_ms=config.stale_after_ms,
                    force=False)
    if _exists(runs, new_id):
        raise InvalidValue(f"run {new_id!r} already exists: fork into a new run id")
    point = find_point(runs, run_id, node_id, iteration, seq)
    if not parent.workflow_path or not parent.repo_root:
        raise WorkflowInvalid(f"run {run_id} has no workflow on record")
    loaded = load_workflow(Path(parent.workflow_path))  # the code as it is now
    if point.node_id not in loaded.workflow.tasks:
        # The fork's promise is that the task runs again from its checkpoint.
        raise NotFound(f"task {point.node_id!r} is not in {parent.workflow_path} as it is now "
                       f"(tasks: {', '.join(sorted(loaded.workflow.tasks))}): nothing forked")
    meta = compute(loaded.path, loaded.imported)
    # Checked and restored before anything is recorded: a fork that cannot
    # start from its tree leaves no half-made run behind.
    done = restore(point, parent.worktree) if parent.worktree is not None else None
    tasks = set(loaded.workflow.tasks)
    # One transaction: the run, its copied outputs and its link to the parent
    # exist together or not at all (a kill -9 midway leaves no run that a
    # resume would take for a fresh one and re-run from the start).
    claim = runs.create_run(
        new_id, owner=owner or Owner.this_process(), workflow_path=meta.workflow_path,
        repo_root=meta.repo_root, worktree=parent.worktree, metadata_json=meta.to_json(),
        plan_json=json.dumps(loaded.workflow.plan()),
        limits_json=parent.limits_json or Limits().to_json(),
        also=lambda conn, made: _record(conn, made, point, tasks, done, runs._clock()))
    return loaded, claim


def _exists(runs: Runs, run_id: str) -> bool:
    try:
        runs.get_run(run_id)
    except NotFound:
        return False
    return True


def _record(conn: Connection, claim: Claim, point: Checkpoint, tasks: set[str],
            restored: str | None, now: int) -> None:
    """Copy the outputs recorded before the checkpoint (never the forked
    task's own from its iteration on) and record the fork (its row and its
    ``fork`` event), in the transaction that creates the run."""
    rows = conn.execute(
        "SELECT node_id, iteration, attempt, output_json, created_at_ms FROM task_outputs "
        "WHERE run_id=$1 AND created_at_ms<=$2 ORDER BY node_id, iteration",
        (point.run_id, point.created_at_ms)).fetchall()
    kept = [r for r in rows if r[0] in tasks
            and not (r[0] == point.node_id and r[1] >= point.iteration)]
    conn.executemany(
        "INSERT INTO task_outputs (run_id, node_id, iteration, attempt, output_json, "
        "created_at_ms) VALUES ($1,$2,$3,$4,$5,$6)", [(claim.run_id, *r) for r in kept])
    conn.execute(
        "INSERT INTO run_forks (run_id, parent_run_id, node_id, iteration, attempt, seq, "
        "commit_id, copied, created_at_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)",
        (claim.run_id, point.run_id, point.node_id, point.iteration, point.attempt,
         point.seq, point.commit_id, len(kept), now))
    append(conn, claim.run_id, "fork", now, node_id=point.node_id,
           iteration=point.iteration, attempt=point.attempt, seq=point.seq,
           detail={"parent_run_id": point.run_id, "commit_id": point.commit_id,
                   "copied": len(kept), "done": restored})


def forked_from(runs: Runs, run_id: str) -> ForkPoint | None:
    """Where ``run_id`` was forked from (None: it was started, not forked)."""
    rows = runs._read("SELECT parent_run_id, node_id, iteration, attempt, seq, commit_id, "
                      "copied FROM run_forks WHERE run_id=$1", (run_id,))
    return ForkPoint(*rows[0]) if rows else None
