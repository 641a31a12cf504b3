"""Declaring a workflow: named tasks, their dependencies, loops, retries,
approval gates and output contracts.

::

    wf = Workflow("review")

    @wf.task(output=Plan)
    def plan(ctx): ...

    @wf.task(deps=["plan"], retries=2, until=lambda out: out.done)
    def fix(ctx): ...   # runs for iteration 0, 1, 2... until ``until`` holds

A task's id is its stable identity: the engine matches recorded work to
tasks by ``(node_id, iteration)``, so renaming a task orphans its rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.budget import Limits
from engine.errors import WorkflowInvalid

__all__ = ["Task", "Workflow", "validate_id"]

F = TypeVar("F", bound=Callable[..., Any])

# The same id rules as the rest of the toolkit: no slash, so an id can never
# become a path, and nothing a shell or a file name would trip on.
_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,199}")


def validate_id(value: object, what: str) -> str:
    """``value`` when it is a usable run or node id, else ``WorkflowInvalid``."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise WorkflowInvalid(f"invalid {what} {str(value)[:80]!r}: use 1-200 of letters, "
                              "digits and _ . : @ + = -, not starting with . : @ + = -")
    return value


@dataclass(frozen=True)
class Task:
    """One node of a workflow."""

    id: str
    fn: Callable[..., Any]
    deps: tuple[str, ...] = ()
    #: The result must validate against this model before it is recorded.
    output: type[BaseModel] | None = None
    #: Further attempts after a failure (interruptions do not count).
    retries: int = 0
    #: Makes the task a loop: iteration 0, 1, 2... until this holds of the output.
    until: Callable[[Any], bool] | None = None
    max_iterations: int = 100
    #: Park the run until a person approves this node.
    approval: bool = False
    #: The engine checkpoints the worktree at the start and end of each
    #: attempt and watches it meanwhile (False: a task that never touches it).
    checkpoints: bool = True
    #: After an interruption: ``continue`` from the last checkpoint, or start
    #: ``clean`` from the tree the first attempt started from.
    on_resume: str = "continue"

    @property
    def loops(self) -> bool:
        return self.until is not None

    def to_plan(self) -> dict[str, Any]:
        return {"id": self.id, "deps": list(self.deps), "loop": self.loops,
                "approval": self.approval, "retries": self.retries}


class Workflow:
    """A set of tasks run in dependency order, at most ``max_parallel`` at once."""

    def __init__(self, name: str, *, max_parallel: int = 1, limits: Limits | None = None) -> None:
        self.name = name
        if max_parallel < 1:
            raise WorkflowInvalid(f"max_parallel must be >= 1, not {max_parallel}")
        self.max_parallel = max_parallel
        self.limits = limits or Limits()
        self.tasks: dict[str, Task] = {}

    def task(self, id: str | None = None, *, deps: Iterable[str] = (),
             output: type[BaseModel] | None = None, retries: int = 0,
             until: Callable[[Any], bool] | None = None, max_iterations: int = 100,
             approval: bool = False, checkpoints: bool = True,
             on_resume: str = "continue") -> Callable[[F], F]:
        """Declare the decorated callable as a task (its id defaults to its name)."""

        def decorate(fn: F) -> F:
            self.add(Task(id or fn.__name__, fn, tuple(deps), output, retries, until,
                          max_iterations, approval, checkpoints=checkpoints,
                          on_resume=on_resume))
            return fn

        return decorate

    def add(self, task: Task) -> Task:
        """Add a task; its id must be new and valid."""
        validate_id(task.id, "task id")
        if task.id in self.tasks:
            raise WorkflowInvalid(f"two tasks have the id {task.id!r}")
        if task.retries < 0 or task.max_iterations < 1:
            raise WorkflowInvalid(f"task {task.id!r}: retries >= 0 and max_iterations >= 1")
        if task.on_resume not in ("continue", "clean"):
            raise WorkflowInvalid(f"task {task.id!r}: on_resume must be 'continue' or 'clean', "
                                  f"not {str(task.on_resume)[:40]!r}")
        self.tasks[task.id] = task
        return task

    def order(self) -> list[Task]:
        """The tasks in dependency order (declaration order among equals)."""
        done: list[Task] = []
        seen: set[str] = set()
        visiting: set[str] = set()
        for task in self.tasks.values():
            self._visit(task, seen, visiting, done)
        return done

    def _visit(self, task: Task, seen: set[str], visiting: set[str], done: list[Task]) -> None:
        if task.id in seen:
            return
        if task.id in visiting:
            raise WorkflowInvalid(f"the dependencies of {task.id!r} form a cycle")
        visiting.add(task.id)
        for dep in task.deps:
            if dep not in self.tasks:
                raise WorkflowInvalid(f"task {task.id!r} depends on unknown task {dep!r}")
            self._visit(self.tasks[dep], seen, visiting, done)
        visiting.discard(task.id)
        seen.add(task.id)
        done.append(task)

    def validate(self) -> None:
        """Raise ``WorkflowInvalid`` for an empty workflow, unknown deps or a cycle."""
        if not self.tasks:
            raise WorkflowInvalid(f"workflow {self.name!r} has no tasks")
        self.order()

    def plan(self) -> list[dict[str, Any]]:
        """The shape of the workflow, stored with the run for ``run-status``."""
        return [t.to_plan() for t in self.order()]
