"""What a task receives: who it is, its inputs, and ways to report progress,
notice a stop request and signal an exhausted quota."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from durability.ground.store_errors import QuotaExhausted, TaskStopped
from durability.store.models import AttemptKey

__all__ = ["TaskContext"]


@dataclass
class TaskContext:
    """One attempt of one task.

    Execution is at-least-once: an attempt interrupted before its output was
    recorded runs again.  A side effect outside the worktree (a payment, a
    pull request, a message) should carry ``idempotency_key`` so the second
    try is recognised by whatever receives it.
    """

    run_id: str
    node_id: str
    iteration: int
    attempt: int
    worktree: str | None
    #: The environment for processes the task starts (DURABILITY_* included).
    env: dict[str, str]
    #: The recorded outputs of the task's dependencies, by task id.
    inputs: Mapping[str, Any]
    #: A loop's output from the previous iteration (None on iteration 0).
    previous: Any = None
    _report: Callable[[int, int, float], None] = field(default=lambda *_: None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _stop_code: list[str] = field(default_factory=list, repr=False)
    #: An agent task's engine handle (``durability.runs.agent.AgentEnv``).
    _agent: Any = field(default=None, repr=False)

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.run_id, self.node_id, self.iteration, self.attempt)

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts of the same task iteration."""
        return f"{self.run_id}/{self.node_id}/{self.iteration}"

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def check(self) -> None:
        """Raise ``TaskStopped`` if the run was cancelled or lost meanwhile."""
        if self._stop.is_set():
            code = self._stop_code[0] if self._stop_code else "RUN_CANCELLED"
            raise TaskStopped(f"{self.node_id}: told to stop", code=code)

    def progress(self, *, turns: int = 0, tokens: int = 0, cost: float = 0.0) -> None:
        """Count spending as it happens; raises ``BudgetExceeded`` when a limit
        is crossed and ``TaskStopped`` when the run was told to stop."""
        self._report(turns, tokens, cost)
        self.check()

    def sleep(self, seconds: float) -> None:
        """Wait, waking early (with ``TaskStopped``) when told to stop."""
        self._stop.wait(seconds)
        self.check()

    def quota_exhausted(self, reset_at_ms: int | None = None,
                        message: str = "provider quota exhausted") -> NoReturn:
        """Park the run until ``reset_at_ms`` (or until a person resumes it)."""
        raise QuotaExhausted(message, reset_at_ms=reset_at_ms)

    def stop(self, code: str) -> None:
        """Ask the task to stop (called by the engine)."""
        if not self._stop_code:
            self._stop_code.append(code)
        self._stop.set()
