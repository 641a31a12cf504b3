"""Starting and resuming runs: the engine's entry points.

``start_run`` loads a workflow file, records the run with the hashes of what
it was started from, and drives it.  ``resume_run`` checks those hashes,
claims the run and drives it from wherever the database says it stopped.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from durability.ground.store_errors import (
    ClaimLost,
    EngineError,
    InvalidValue,
    NotFound,
    ResumeMetadataMismatch,
    WorkflowInvalid,
)
from durability.runs.agent import AgentConfig
from durability.runs.budget import Limits
from durability.runs.fence import Claim, Owner
from durability.runs.isolated import Isolation, IsolationOps
from durability.runs.loader import Loaded, load_workflow
from durability.runs.metadata import Metadata, compute, verify
from durability.runs.resume import DEFAULT_STALE_AFTER_MS, claim_run
from durability.runs.run_rows import RunRow, Runs
from durability.runs.runner import Runner, RunOutcome
from durability.runs.workflow import validate_id
from durability.runs.worktree import NullWorktreeOps, WorktreeOps
from durability.store.clock import Clock, system_clock

__all__ = ["EngineConfig", "create_run", "drive", "new_run_id", "resume_claim", "resume_run",
           "start_run"]


@dataclass(frozen=True)
class EngineConfig:
    """How a process drives runs; resolved at the entry point."""

    ops: WorktreeOps = field(default_factory=NullWorktreeOps)
    clock: Clock = system_clock
    #: How often the owner's heartbeat is refreshed.
    heartbeat_s: float = 1.0
    stale_after_ms: int = DEFAULT_STALE_AFTER_MS
    #: Makes, merges and removes isolated tasks' worktrees (None: such tasks
    #: work in the run's worktree).
    isolation: IsolationOps | None = None
    #: How agent tasks run (hook command, executables, prices).
    agents: AgentConfig = field(default_factory=AgentConfig)


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


def start_run(runs: Runs, workflow_path: Path, *, config: EngineConfig,
              run_id: str | None = None, worktree: str | None = None,
              limits: Limits | None = None, owner: Owner | None = None) -> RunOutcome:
    """Start a new run of the workflow at ``workflow_path`` and drive it.

    A run id already used by a run of the same workflow file is a no-op
    that reports the existing run (``RunOutcome.existing``): a second start
    of the same run is contention, not failure.  Another workflow's run id
    is ``InvalidValue``.
    """
    made = create_run(runs, workflow_path, run_id=run_id, worktree=worktree, limits=limits,
                      owner=owner)
    if isinstance(made, RunOutcome):
        return made
    loaded, claim = made
    runs.start_running(claim)
    return _drive(runs, loaded, claim, config)


def create_run(runs: Runs, workflow_path: Path, *, run_id: str | None = None,
               worktree: str | None = None, limits: Limits | None = None,
               owner: Owner | None = None) -> tuple[Loaded, Claim] | RunOutcome:
    """``start_run`` up to the claim: the workflow loaded and checked and
    the run recorded, claimed by ``owner``, nothing driven yet (a detached
    start hands the claim to a worker, ``durability.runs.detach``).  A run
    id already used by a run of the same workflow file is its outcome
    (``existing``); another workflow's run id is ``InvalidValue``."""
    run_id = validate_id(run_id or new_run_id(), "run id")
    existing = _existing(runs, run_id, workflow_path)
    if existing is not None:
        return existing
    loaded = load_workflow(workflow_path)
    meta = compute(loaded.path, loaded.imported)
    merged = loaded.workflow.limits.merged(limits or Limits())
    try:
        claim = runs.create_run(
            run_id, owner=owner or Owner.this_process(), workflow_path=meta.workflow_path,
            repo_root=meta.repo_root, worktree=worktree, metadata_json=meta.to_json(),
            plan_json=json.dumps(loaded.workflow.plan()), limits_json=merged.to_json())
    except InvalidValue:  # created by a racing start since we looked
        existing = _existing(runs, run_id, workflow_path)
        if existing is None:
            raise
        return existing
    return loaded, claim


def _existing(runs: Runs, run_id: str, workflow_path: Path) -> RunOutcome | None:
    """The outcome naming an engine run ``run_id`` of the same workflow
    file; None when there is no such run; ``InvalidValue`` for another
    workflow's run."""
    try:
        row = runs.get_run(run_id)
    except NotFound:
        return None
    if row.workflow_path != os.path.abspath(workflow_path):
        raise InvalidValue(f"run {run_id!r} already exists for {row.workflow_path}: "
                           "pick another run id")
    error = json.loads(row.error_json) if row.error_json else None
    return RunOutcome(run_id, row.state or "running", error, row.waiting_on, row.wake_at_ms,
                      existing=True)


def resume_run(runs: Runs, run_id: str, *, config: EngineConfig, owner: Owner | None = None,
               force: bool = False, accept_workflow_change: bool = False,
               since_ms: int | None = None, claim_epoch: int | None = None,
               claim_started: bool = False) -> RunOutcome:
    """Resume ``run_id`` (legal from every state).

    With ``claim_epoch`` the caller is the child a supervisor started for
    the claim it took at that epoch (as ``owner``'s name); ``claim_started``:
    the claimant already marked the run running (``durability.runs.detach``).
    """
    owner = owner or Owner.this_process()
    row = runs.get_run(run_id)
    if claim_epoch is not None:
        return _resume_claimed(runs, row, owner, claim_epoch, config, accept_workflow_change,
                               started=claim_started)
    # Checked before claiming: a refused resume changes nothing.
    meta, loaded = _prepare(row, accept_workflow_change)
    claim = claim_run(runs, row, owner=owner, now=config.clock(),
                      stale_after_ms=config.stale_after_ms, force=force, since_ms=since_ms)
    runs.start_running(claim, metadata_json=meta.to_json(),
                       plan_json=json.dumps(loaded.workflow.plan()))
    return _drive(runs, loaded, claim, config)


def resume_claim(runs: Runs, run_id: str, *, owner: Owner, now: int, stale_after_ms: int,
                 force: bool = False, accept_workflow_change: bool = False,
                 since_ms: int | None = None) -> Claim:
    """``resume_run`` up to the claim, for a worker to drive
    (``durability.runs.detach``): the same checks (the workflow's files
    hashed against the record, never run; the owner and heartbeat), then the
    compare-and-swap.  A refused resume changes nothing."""
    row = runs.get_run(run_id)
    _verified(row, accept_workflow_change)
    return claim_run(runs, row, owner=owner, now=now, stale_after_ms=stale_after_ms,
                     force=force, since_ms=since_ms)


def _resume_claimed(runs: Runs, row: RunRow, owner: Owner, epoch: int, config: EngineConfig,
                    accept: bool, *, started: bool = False) -> RunOutcome:
    claim = runs.take_over(row.run_id, epoch=epoch, owner=owner)
    if claim is None:
        raise ClaimLost(f"run {row.run_id} was claimed by another process before it started")
    try:
        meta, loaded = _prepare(row, accept)
    except EngineError as exc:
        # Nobody is there to read an error: leave it on the run.
        runs.park(claim, "failed", error={"code": exc.code, "message": exc.message,
                                          "node_id": None})
        raise
    # A pause or cancel asked since the claim was taken was asked of this
    # claim (a request pending before it was acted on by whoever claimed).
    runs.start_running(claim, metadata_json=meta.to_json(),
                       plan_json=json.dumps(loaded.workflow.plan()), keep_request=True,
                       announce=not started)
    return _drive(runs, loaded, claim, config)


def _verified(row: RunRow, accept: bool) -> Metadata:
    """The run's workflow files checked against the record (hashed, not run)."""
    if not row.workflow_path or not row.repo_root:
        raise WorkflowInvalid(f"run {row.run_id} has no workflow on record")
    stored_files = json.loads(row.metadata_json or "{}").get("files", {})
    stored = Metadata(row.workflow_path, row.repo_root, stored_files)
    path = Path(row.workflow_path)
    if not path.is_file():
        raise ResumeMetadataMismatch(f"workflow file {path} is missing")
    return verify(stored, path, accept_change=accept)


def _prepare(row: RunRow, accept: bool) -> tuple[Metadata, Loaded]:
    meta = _verified(row, accept)
    loaded = load_workflow(Path(meta.workflow_path))
    if accept:  # the accepted files are the new baseline, with what they import now
        meta = compute(loaded.path, loaded.imported)
    return meta, loaded


def _drive(runs: Runs, loaded: Loaded, claim: Claim, config: EngineConfig) -> RunOutcome:
    row = runs.get_run(claim.run_id)
    isolation = None if config.isolation is None else Isolation(runs, claim, config.isolation)
    runner = Runner(runs, loaded.workflow, claim, worktree=row.worktree,
                    limits=Limits.from_json(row.limits_json), ops=config.ops,
                    heartbeat_s=config.heartbeat_s, isolation=isolation, agents=config.agents)
    return runner.drive()


def drive(runs: Runs, loaded: Loaded, claim: Claim, config: EngineConfig) -> RunOutcome:
    """Drive a claimed, running run of ``loaded`` (for entry points beside
    start and resume, such as ``durability.runs.fork``)."""
    return _drive(runs, loaded, claim, config)
