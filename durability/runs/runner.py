"""Executing a claimed run: start ready tasks in dependency order (at most
``max_parallel`` at once), record what they return, and leave the run in the
state it ended in.

The scheduler re-derives every decision from the database (``plan.assess``),
so a run resumed by another process continues exactly where this one
stopped.  Tasks run in threads; each gets a ``TaskContext`` and runs inside
the ambient attempt context the ``WorktreeOps`` provides.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from durability.ground.store_errors import (
    BudgetExceeded,
    ClaimLost,
    EngineError,
    QuotaExhausted,
    TaskStopped,
    WorktreeConflict,
)
from durability.runs import budget
from durability.runs.agent import AgentConfig, AgentEnv, resolve_harness
from durability.runs.agent_rows import Prior, agent_target, completed_calls, prior_session
from durability.runs.attempt_checkpoints import Target, checkpointed, restore_target
from durability.runs.budget import Limits
from durability.runs.context import TaskContext
from durability.runs.fence import Claim
from durability.runs.heartbeat import Heartbeat
from durability.runs.isolated import Isolation
from durability.runs.plan import Step, assess
from durability.runs.run_rows import Runs
from durability.runs.workflow import Task, Workflow
from durability.runs.worktree import WorktreeOps
from durability.store.models import AttemptKey

__all__ = ["RunOutcome", "Runner"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """How a run's process ended: the state the run was left in."""

    run_id: str
    state: str
    error: dict[str, Any] | None = None
    waiting_on: str | None = None
    wake_at_ms: int | None = None
    #: a start of a run that already existed: nothing was done
    existing: bool = False


@dataclass
class _Halt:
    """Why no new task starts: the state the run parks in once drained."""

    state: str
    error: dict[str, Any] | None = None
    waiting_on: str | None = None
    wake_at_ms: int | None = None
    known_reset: bool = True


@dataclass
class _Flight:
    task: Task
    key: AttemptKey
    ctx: TaskContext
    steps: dict[str, Step] = field(default_factory=dict)


# A later halt replaces an earlier one only when it outranks it: losing the
# run beats everything, a cancel beats a pause or a wait.
_RANK = {"lost": 4, "failed": 3, "cancelled": 2, "waiting-quota": 1, "paused": 1}


class Runner:
    def __init__(self, runs: Runs, workflow: Workflow, claim: Claim, *, worktree: str | None,
                 limits: Limits, ops: WorktreeOps, heartbeat_s: float = 1.0,
                 poll_s: float = 0.05, isolation: Isolation | None = None,
                 agents: AgentConfig | None = None) -> None:
        self.runs = runs
        self.workflow = workflow
        self.claim = claim
        self.worktree = worktree
        self.limits = limits
        self.ops = ops
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s
        #: Isolated tasks' worktrees (None: every task works in ``worktree``).
        self.isolation = isolation
        self.agents = agents or AgentConfig()
        self._flights: dict[Future[Any], _Flight] = {}
        self._halt: _Halt | None = None

    @property
    def run_id(self) -> str:
        return self.claim.run_id

    def drive(self) -> RunOutcome:
        """Run until every task is done or the run parks; raises ``ClaimLost``
        (having recorded nothing more) when another process took the run."""
        # What the attempts kept between them (their worktree's watch) ends
        # before the run's row is parked: a watch left to outlive its run
        # would meet the service's owner sweep.
        with self.ops.run_checkpoints(self.run_id):
            halt = self._drive()
        return self._park(halt)

    def _drive(self) -> _Halt:
        with Heartbeat(self.runs, self.claim, interval_s=self.heartbeat_s) as beat, \
                ThreadPoolExecutor(self.workflow.max_parallel,
                                   thread_name_prefix=f"task-{self.run_id}") as pool:
            if self.isolation is not None:
                self.isolation.sweep(set(self.runs.run_state(self.run_id).outputs))
            while True:
                self._notice(beat)
                # With every slot taken nothing can start: skip the database
                # read until a task settles (this loop turns every poll_s).
                if self._halt is None and len(self._flights) < self.workflow.max_parallel:
                    self._schedule(pool)
                if not self._flights and self._halt is not None:
                    return self._halt
                done, _ = wait(list(self._flights), timeout=self.poll_s,
                               return_when=FIRST_COMPLETED)
                for future in done:
                    self._settle(self._flights.pop(future), future)

    # -- deciding -----------------------------------------------------------

    def _notice(self, beat: Heartbeat) -> None:
        if beat.lost.is_set():
            self._halt_with(_Halt("lost"), stop_code="RUN_CLAIM_LOST")
        else:
            self._obey(beat.requested)

    def _obey(self, asked: str | None) -> None:
        """Act on what was asked of the owner: cancel stops the tasks in
        flight, pause only starts nothing new."""
        if asked == "cancel":
            self._halt_with(_Halt("cancelled"), stop_code="RUN_CANCELLED")
        elif asked == "pause":
            self._halt_with(_Halt("paused"))

    def _halt_with(self, halt: _Halt, *, stop_code: str | None = None) -> None:
        current = self._halt
        if current is not None and current.state == halt.state == "waiting-quota":
            current.known_reset = current.known_reset and halt.known_reset
            current.wake_at_ms = max(current.wake_at_ms or 0, halt.wake_at_ms or 0)
        elif current is None or _RANK.get(halt.state, 0) > _RANK.get(current.state, 0):
            self._halt = halt
        if stop_code is not None:
            for flight in self._flights.values():
                flight.ctx.stop(stop_code)

    def _schedule(self, pool: ThreadPoolExecutor) -> None:
        steps = assess(self.workflow, self.runs.run_state(self.run_id))
        failed = [s for s in steps.values() if s.kind == "failed"]
        if failed:
            return self._halt_with(_Halt("failed", error=failed[0].error))
        if all(s.kind == "done" for s in steps.values()):
            return self._halt_with(_Halt("finished"))
        busy = {f.key.node_id for f in self._flights.values()}
        ready = [s for s in steps.values() if s.kind == "ready" and s.node_id not in busy]
        if ready and self._asked_to_stop():
            return None
        for step in ready[: self.workflow.max_parallel - len(self._flights)]:
            self._launch(pool, step, steps)
            if self._halt is not None:
                return None
        if not self._flights:
            waiting = [s.node_id for s in steps.values() if s.kind == "approval"]
            if waiting:
                self._halt_with(_Halt("waiting-approval", waiting_on=waiting[0]))
            elif self._halt is None:  # nothing runs and nothing can: never spin
                self._halt_with(_Halt("failed", error={"code": "RUN_STUCK", "node_id": None,
                                                       "message": "no task can start"}))
        return None

    def _asked_to_stop(self) -> bool:
        """Read the request flag before starting anything: the heartbeat
        brings it within a second, but a paused run must start nothing new."""
        asked = self.runs.get_run(self.run_id).requested
        self._obey(asked)
        return asked is not None

    # -- starting -----------------------------------------------------------

    def _launch(self, pool: ThreadPoolExecutor, step: Step, steps: dict[str, Step]) -> None:
        task = self.workflow.tasks[step.node_id]
        try:
            budget.check(self.limits, self.runs.usage(self.run_id))
            worktree = self._worktree_for(task, step)
            prior = self._prior(task, step)
            self._restore(step, worktree, prior)
            key = self.runs.begin_attempt(self.claim, task.id, step.iteration, worktree)
        except BudgetExceeded as exc:
            self.runs.note(self.run_id, "budget-hit", node_id=task.id,
                           detail={"code": exc.code, "limit": exc.limit})
            return self._halt_with(_Halt("failed", error=_error(exc, task.id)))
        except ClaimLost:
            return self._halt_with(_Halt("lost"))
        except Exception as exc:  # a restore that failed: never re-run on a doubtful tree
            return self._halt_with(_Halt("failed", error=_error(exc, task.id, "RESTORE_FAILED")))
        ctx = TaskContext(
            key.run_id, key.node_id, key.iteration, key.attempt, worktree,
            env=self.ops.attempt_env(key, worktree),
            inputs={d: steps[d].output for d in task.deps}, previous=step.previous,
            _report=self._report,
            _agent=None if task.agent is None else AgentEnv(self.runs, self.claim,
                                                            self.agents, prior))
        log.info("run %s: starting %s iteration %d attempt %d", self.run_id, task.id,
                 key.iteration, key.attempt)
        future = pool.submit(contextvars.copy_context().run, self._execute, task, ctx)
        self._flights[future] = _Flight(task, key, ctx)

    def _worktree_for(self, task: Task, step: Step) -> str | None:
        """The run's worktree, or the task's isolated one (made on first use)."""
        if (self.worktree is None or self.isolation is None
                or self.workflow.mode(task) != "isolated"):
            return self.worktree
        return self.isolation.worktree_for(task.id, step.iteration, self.worktree)

    def _prior(self, task: Task, step: Step) -> Prior | None:
        """The interrupted agent session an agent task's next attempt continues."""
        if task.agent is None or step.restore_from is None:
            return None
        return prior_session(self.runs, self.run_id, step.node_id, step.iteration)

    def _target(self, step: Step, worktree: str, prior: Prior | None) -> Target | None:
        checkpoints = self.runs.checkpoints(self.run_id)
        if prior is not None:
            found = agent_target(checkpoints, prior, self._completed(prior, worktree),
                                 node_id=step.node_id,
                                 iteration=step.iteration, worktree=worktree)
            if found is not None:
                return found
        return restore_target(checkpoints, node_id=step.node_id, iteration=step.iteration,
                              worktree=worktree,
                              on_resume=self.workflow.tasks[step.node_id].on_resume)

    def _completed(self, prior: Prior, worktree: str) -> set[str]:
        """The tool calls the session completed: its transcript's, where the
        adapter can read it (what the continued conversation holds), else the
        ones the stream reported."""
        try:
            harness = resolve_harness(prior.harness)
        except EngineError:
            harness = None
        read = getattr(harness, "completed_calls", None)
        if callable(read):
            try:
                found = read(prior.session_id, Path(worktree), dict(os.environ))
            except Exception as exc:
                log.info("run %s: transcript of %s unreadable: %s", self.run_id,
                         prior.session_id, exc)
                found = None
            if found is not None:
                return set(found)
        return completed_calls(self.runs, self.run_id, prior.session_id)

    def _restore(self, step: Step, worktree: str | None, prior: Prior | None = None) -> None:
        if step.restore_from is None or worktree is None:
            return
        prev = AttemptKey(self.run_id, step.node_id, step.iteration, step.restore_from)
        if any(f.ctx.worktree == worktree for f in self._flights.values()):
            # Another task already works on this worktree in this process:
            # a restore now would undo its work.  The first re-run of this
            # resume restored the tree (to the newest checkpoint, covering
            # this task's own).
            log.info("run %s: %s not restored: another task is running", self.run_id, prev)
            return
        target = self._target(step, worktree, prior)
        if target is None:
            log.info("run %s: attempt %s had no checkpoint to go back to", self.run_id, prev)
            return
        done = self.ops.restore_checkpoint(target.checkpoint, worktree, prev)
        cp = target.checkpoint
        self.runs.note(self.run_id, "restore", node_id=step.node_id, detail={
            "to": {"node_id": cp.node_id, "iteration": cp.iteration, "attempt": cp.attempt,
                   "seq": cp.seq}, "reason": target.reason, "done": done})
        log.info("run %s: %s (%s)", self.run_id, done, target.reason)

    def _execute(self, task: Task, ctx: TaskContext) -> Any:
        with checkpointed(self.ops, ctx.key, ctx.worktree, task.checkpoints), \
                self.ops.attempt_context(ctx.key, ctx.worktree):
            return task.fn(ctx)

    def _report(self, turns: int, tokens: int, cost: float) -> None:
        usage = self.runs.add_usage(self.run_id, turns=turns, tokens=tokens, cost=cost)
        budget.check(self.limits, usage)

    # -- finishing ----------------------------------------------------------

    def _settle(self, flight: _Flight, future: Future[Any]) -> None:
        try:
            self._record(flight, future)
        except ClaimLost:
            self._halt_with(_Halt("lost"), stop_code="RUN_CLAIM_LOST")

    def _record(self, flight: _Flight, future: Future[Any]) -> None:
        node, key = flight.task.id, flight.key
        try:
            result = future.result()
        except TaskStopped as exc:
            self.runs.end_attempt(self.claim, key, "stopped", _error(exc, node))
        except BudgetExceeded as exc:
            self.runs.end_attempt(self.claim, key, "stopped", _error(exc, node))
            self.runs.note(self.run_id, "budget-hit", node_id=node,
                           detail={"code": exc.code, "limit": exc.limit})
            self._halt_with(_Halt("failed", error=_error(exc, node)), stop_code=exc.code)
        except QuotaExhausted as exc:
            error = {**_error(exc, node), "reset_at_ms": exc.reset_at_ms}
            self.runs.end_attempt(self.claim, key, "stopped", error)
            self._halt_with(_Halt("waiting-quota", wake_at_ms=exc.reset_at_ms,
                                  known_reset=exc.reset_at_ms is not None))
        except Exception as exc:
            self.runs.end_attempt(self.claim, key, "failed", _error(exc, node, "TASK_FAILED"))
        else:
            self._complete(flight, result)

    def _complete(self, flight: _Flight, result: Any) -> None:
        try:
            output_json = _validate(flight.task, result)
        except (ValidationError, TypeError, ValueError) as exc:
            error = _error(exc, flight.task.id, "OUTPUT_INVALID")
            return self.runs.end_attempt(self.claim, flight.key, "failed", error)
        isolated = self._isolated(flight)
        if isolated is not None:
            try:
                log.info("run %s: %s", self.run_id,
                         isolated.merge_back(flight.task.id, flight.key.iteration, flight.key))
            except ClaimLost:
                raise
            except Exception as exc:
                # Running again cannot resolve a conflict (or a merge that
                # failed): fail the run now, its retries would only fail the
                # same way, and keep both sides for a person to look at.
                code = "WORKTREE_CONFLICT" if isinstance(exc, WorktreeConflict) else \
                    "WORKTREE_MERGE_FAILED"
                error = _error(exc, flight.task.id, code)
                self.runs.end_attempt(self.claim, flight.key, "failed", error)
                return self._halt_with(_Halt("failed", error=error))
        self.runs.complete_attempt(self.claim, flight.key, output_json)
        if isolated is not None:
            isolated.remove(flight.task.id, flight.key.iteration)
        return None

    def _isolated(self, flight: _Flight) -> Isolation | None:
        """The isolation to merge ``flight`` back through, if it worked apart."""
        if self.isolation is None or flight.ctx.worktree in (None, self.worktree):
            return None
        return self.isolation

    def _park(self, halt: _Halt) -> RunOutcome:
        if halt.state == "lost":
            raise ClaimLost(f"run {self.run_id} was taken over by another process")
        if halt.state == "waiting-quota" and not halt.known_reset:
            halt = replace(halt, wake_at_ms=None)
        self.runs.park(self.claim, halt.state, error=halt.error, waiting_on=halt.waiting_on,
                       wake_at_ms=halt.wake_at_ms)
        return RunOutcome(self.run_id, halt.state, halt.error, halt.waiting_on, halt.wake_at_ms)


def _validate(task: Task, result: Any) -> str:
    """The result as JSON, after it validated against the task's output model."""
    if task.output is not None:
        model = task.output.model_validate(
            result.model_dump() if isinstance(result, BaseModel) else result)
        return model.model_dump_json()
    return json.dumps(result, sort_keys=True, allow_nan=False)


def _error(exc: BaseException, node_id: str, default: str = "TASK_FAILED") -> dict[str, Any]:
    code = getattr(exc, "code", None)
    return {"code": code if isinstance(code, str) and code.isupper() else default,
            "message": f"{type(exc).__name__}: {exc}"[:2000], "node_id": node_id}
