"""The scheduler's view: from what the database says happened, what each
task needs next.  State-derived: no code is replayed, so a task's code
need not be deterministic, only its id stable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from durability.ground.store_errors import WorkflowInvalid
from durability.runs.records import AttemptInfo, RunState
from durability.runs.workflow import Task, Workflow

__all__ = ["INTERRUPTED", "Step", "assess", "hydrate"]

#: Attempt states after which the task's worktree is restored before it re-runs.
INTERRUPTED = frozenset({"abandoned", "stopped"})


@dataclass(frozen=True)
class Step:
    """What one task needs: ``done``, ``ready``, ``blocked`` (on its deps),
    ``approval`` (a person's decision) or ``failed``."""

    kind: str
    node_id: str
    iteration: int = 0
    output: Any = None
    previous: Any = None
    #: the previous attempt, when it was interrupted (its worktree is restored)
    restore_from: int | None = None
    error: dict[str, Any] | None = None


def hydrate(task: Task, raw: str) -> Any:
    """A recorded output as the task's dependents see it."""
    data = json.loads(raw)
    if task.output is None:
        return data
    try:
        return task.output.model_validate(data)
    except ValidationError as exc:
        raise WorkflowInvalid(f"the recorded output of {task.id!r} no longer fits "
                              f"{task.output.__name__}: {exc.errors()[:1]}") from None


def assess(workflow: Workflow, state: RunState) -> dict[str, Step]:
    """The next step of every task, in dependency order."""
    steps: dict[str, Step] = {}
    for task in workflow.order():
        if any(steps[d].kind != "done" for d in task.deps):
            steps[task.id] = Step("blocked", task.id)
        else:
            steps[task.id] = _assess_task(task, state)
    return steps


def _assess_task(task: Task, state: RunState) -> Step:
    iteration, previous = 0, None
    while (task.id, iteration) in state.outputs:
        output = hydrate(task, state.outputs[(task.id, iteration)])
        if not task.loops or (task.until is not None and task.until(output)):
            return Step("done", task.id, iteration, output=output)
        previous, iteration = output, iteration + 1
    if iteration >= task.max_iterations:
        return _failed(task, iteration, "LOOP_LIMIT",
                       f"{task.id}: no iteration met the loop's condition in "
                       f"{task.max_iterations}")
    gate = _gate(task, state, iteration)
    if gate is not None:
        return gate
    attempts = state.attempts.get((task.id, iteration), [])
    # Forgiven failures were made before the failed run was resumed: the
    # resume restarted the task's retry budget (attempt numbers go on).
    failures = [a for a in attempts if a.state == "failed" and not a.forgiven]
    if len(failures) > task.retries:
        last = failures[-1].error or {}
        return _failed(task, iteration, str(last.get("code", "TASK_FAILED")),
                       str(last.get("message", f"{task.id} failed")))
    return Step("ready", task.id, iteration, previous=previous, restore_from=_restore(attempts))


def _gate(task: Task, state: RunState, iteration: int) -> Step | None:
    if not task.approval:
        return None
    decision = state.approvals.get(task.id)
    if decision is None:
        return Step("approval", task.id, iteration)
    if decision[0] == "denied":
        reason = f": {decision[1]}" if decision[1] else ""
        return _failed(task, iteration, "APPROVAL_DENIED", f"{task.id} was denied{reason}")
    return None


def _restore(attempts: list[AttemptInfo]) -> int | None:
    if attempts and attempts[-1].state in INTERRUPTED:
        return attempts[-1].attempt
    return None


def _failed(task: Task, iteration: int, code: str, message: str) -> Step:
    return Step("failed", task.id, iteration,
                error={"code": code, "message": message, "node_id": task.id})
