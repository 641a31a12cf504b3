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

from durability.ground.store_errors import WorkflowInvalid
from durability.runs.budget import Limits

__all__ = ["WORKTREE_MODES", "Task", "Workflow", "validate_id"]

F = TypeVar("F", bound=Callable[..., Any])

# The same id rules as the rest of the toolkit: no slash, so an id can never
# become a path, and nothing a shell or a file name would trip on.
_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,199}")

#: Where a task works (docs/how-to/runs.md, "Parallel tasks and worktrees"):
#: ``shared`` writes the run's worktree, ``isolated`` writes its own jj
#: workspace or git worktree merged back when it finishes, ``read`` only
#: reads the run's worktree (so it may run beside a writer).
WORKTREE_MODES = ("shared", "isolated", "read")


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
    #: ``shared``, ``isolated`` or ``read``; None: the workflow's default.
    worktree: str | None = None
    #: The engine checkpoints the worktree at the start and end of each
    #: attempt and watches it meanwhile (False: a task that never touches it).
    checkpoints: bool = True
    #: After an interruption: ``continue`` from the last checkpoint, or start
    #: ``clean`` from the tree the first attempt started from.
    on_resume: str = "continue"
    #: An agent task's spec (``durability.runs.agent.AgentSpec``; ``fn`` is it).
    agent: Any = None

    @property
    def loops(self) -> bool:
        return self.until is not None

    def to_plan(self) -> dict[str, Any]:
        return {"id": self.id, "deps": list(self.deps), "loop": self.loops,
                "approval": self.approval, "retries": self.retries}


class Workflow:
    """A set of tasks run in dependency order, at most ``max_parallel`` at once."""

    def __init__(self, name: str, *, max_parallel: int = 1, limits: Limits | None = None,
                 worktree: str = "shared", shared_worktree_ok: bool = False) -> None:
        self.name = name
        if max_parallel < 1:
            raise WorkflowInvalid(f"max_parallel must be >= 1, not {max_parallel}")
        self.max_parallel = max_parallel
        self.worktree = _mode(worktree, f"workflow {name!r}")
        #: Let writers of the shared worktree run side by side (they may undo
        #: each other's work on a resume: the workflow says it knows).
        self.shared_worktree_ok = shared_worktree_ok
        self.limits = limits or Limits()
        self.tasks: dict[str, Task] = {}

    def task(self, id: str | None = None, *, deps: Iterable[str] = (),
             output: type[BaseModel] | None = None, retries: int = 0,
             until: Callable[[Any], bool] | None = None, max_iterations: int = 100,
             approval: bool = False, worktree: str | None = None,
             checkpoints: bool = True, on_resume: str = "continue") -> Callable[[F], F]:
        """Declare the decorated callable as a task (its id defaults to its name)."""

        def decorate(fn: F) -> F:
            self.add(Task(id or fn.__name__, fn, tuple(deps), output, retries, until,
                          max_iterations, approval, worktree=worktree,
                          checkpoints=checkpoints, on_resume=on_resume))
            return fn

        return decorate

    def agent(self, id: str | None = None, *, prompt: str | Callable[..., str] | None = None,
              harness: Iterable[str] | str = ("claude",), model: str | None = None,
              output: type[BaseModel] | dict[str, Any] | None = None,
              limits: Limits | None = None, max_turns: int | None = None,
              max_tokens: int | None = None, max_cost: float | None = None,
              retries: int = 0, corrections: int = 2,
              verify: Callable[[Any, Any], object] | None = None, deps: Iterable[str] = (),
              worktree: str | None = None,
              prices: dict[str, dict[str, float]] | None = None) -> Any:
        """Declare an agent task (docs/how-to/agents.md): with ``prompt=`` it is
        added now and returned; without, the decorated function (of the
        dependencies' outputs, ``ctx.inputs``) is the prompt and names the task."""
        from durability.runs.agent import AgentSpec

        chain = (harness,) if isinstance(harness, str) else tuple(harness)
        ceilings = (limits or Limits()).merged(Limits(max_turns, max_tokens, max_cost))

        def build(task_id: str, text: str | Callable[..., str]) -> Task:
            spec = AgentSpec(text, chain, model, output, ceilings, corrections, verify, prices)
            model_out = output if isinstance(output, type) else None
            return self.add(Task(task_id, spec, tuple(deps), model_out, retries,
                                 worktree=worktree, agent=spec))

        if prompt is not None:
            if id is None:
                raise WorkflowInvalid("an agent task with prompt= needs an id")
            return build(id, prompt)

        def decorate(fn: F) -> F:
            build(id or fn.__name__, fn)
            return fn

        return decorate

    def add(self, task: Task) -> Task:
        """Add a task; its id must be new and valid."""
        validate_id(task.id, "task id")
        if task.id in self.tasks:
            raise WorkflowInvalid(f"two tasks have the id {task.id!r}")
        if task.retries < 0 or task.max_iterations < 1:
            raise WorkflowInvalid(f"task {task.id!r}: retries >= 0 and max_iterations >= 1")
        if task.worktree is not None:
            _mode(task.worktree, f"task {task.id!r}")
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
        self._check_shared_writers()

    def mode(self, task: Task) -> str:
        """Where ``task`` works: its own ``worktree=``, else the workflow's."""
        return task.worktree or self.worktree

    def _check_shared_writers(self) -> None:
        """Refuse a writer of the shared worktree that may run beside another
        writer of it.

        A resume restores the interrupted task's worktree: on a shared tree
        that rolls back whatever a parallel task wrote meanwhile, and an
        isolated task writes the shared tree too when it merges back.  Two
        tasks can run at once when ``max_parallel > 1`` and neither depends
        (directly or not) on the other; two isolated tasks may (their merges
        take turns).
        """
        if self.max_parallel < 2 or self.shared_worktree_ok:
            return
        writers = [t.id for t in self.order() if self.mode(t) != "read"]
        for i, first in enumerate(writers):
            for second in writers[i + 1:]:
                modes = {self.mode(self.tasks[first]), self.mode(self.tasks[second])}
                if "shared" in modes and self._may_overlap(first, second):
                    raise WorkflowInvalid(
                        f"tasks {first!r} and {second!r} both write the shared worktree and "
                        f"may run at once (max_parallel={self.max_parallel}): give "
                        "the shared one worktree='isolated' (or 'read' if it does not "
                        "write), order them with deps, or pass Workflow(..., "
                        "shared_worktree_ok=True) to accept that a resume may undo one's work")

    def _may_overlap(self, first: str, second: str) -> bool:
        return first not in self.ancestors(second) and second not in self.ancestors(first)

    def ancestors(self, task_id: str) -> set[str]:
        """Every task ``task_id`` depends on, directly or not."""
        found: set[str] = set()
        todo = list(self.tasks[task_id].deps)
        while todo:
            dep = todo.pop()
            if dep not in found:
                found.add(dep)
                todo.extend(self.tasks[dep].deps)
        return found

    def plan(self) -> list[dict[str, Any]]:
        """The shape of the workflow, stored with the run for ``run-status``."""
        return [{**t.to_plan(), "worktree": self.mode(t)} for t in self.order()]


def _mode(value: object, what: str) -> str:
    if value not in WORKTREE_MODES:
        raise WorkflowInvalid(f"{what}: worktree must be one of {', '.join(WORKTREE_MODES)}, "
                              f"not {value!r}")
    return str(value)
