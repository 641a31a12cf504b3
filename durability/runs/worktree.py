"""The worktree actions a run needs, as an interface.

``engine`` knows nothing of jj: ``durability`` implements ``WorktreeOps``
(restore through its checkpoints, the environment its hooks read) and the
CLI hands it to the engine.  ``NullWorktreeOps`` serves runs without a
worktree and tests of the engine alone.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

from durability.store.models import AttemptKey, Checkpoint

__all__ = ["NullWorktreeOps", "WorktreeOps", "attempt_variables"]


class WorktreeOps(Protocol):
    def restore_checkpoint(self, target: Checkpoint, worktree: str,
                           interrupted: AttemptKey) -> str:
        """Put ``worktree`` back to ``target`` (a checkpoint of any attempt of
        the run) before ``interrupted``'s task re-runs; the ``pre-restore``
        checkpoint goes on ``interrupted``.  A one-line description."""
        ...

    def attempt_checkpoints(self, key: AttemptKey,
                            worktree: str) -> AbstractContextManager[object]:
        """Entered around an attempt in its thread: record the starting tree
        as a checkpoint, watch the worktree with the attempt's identity, and
        on exit (however the attempt ended) take the final capture."""
        ...

    def run_checkpoints(self, run_id: str) -> AbstractContextManager[object]:
        """Entered around one drive of a run: what ``attempt_checkpoints``
        keeps between the run's attempts (their worktree's watch) ends on
        exit, before the run's row says how it stopped."""
        ...

    def attempt_env(self, key: AttemptKey, worktree: str | None) -> dict[str, str]:
        """The environment a process started by the attempt should get, so
        its hooks record checkpoints on the attempt's row."""
        ...

    def attempt_context(
        self, key: AttemptKey, worktree: str | None
    ) -> AbstractContextManager[object]:
        """Entered around the task in its thread: the ambient attempt that
        in-process wrappers attach their captures to."""
        ...


def attempt_variables(key: AttemptKey, worktree: str | None) -> dict[str, str]:
    """The ``DURABILITY_*`` variables naming an attempt."""
    env = {
        "DURABILITY_RUN_ID": key.run_id,
        "DURABILITY_NODE_ID": key.node_id,
        "DURABILITY_ITERATION": str(key.iteration),
        "DURABILITY_ATTEMPT": str(key.attempt),
    }
    if worktree:
        env["DURABILITY_WORKTREE"] = worktree
    return env


class NullWorktreeOps:
    """No worktree actions: nothing restored or captured, the attempt's variables only."""

    def restore_checkpoint(self, target: Checkpoint, worktree: str,
                           interrupted: AttemptKey) -> str:
        return f"not restored: no worktree actions (target seq {target.seq})"

    def attempt_checkpoints(self, key: AttemptKey,
                            worktree: str) -> AbstractContextManager[object]:
        return nullcontext()

    def run_checkpoints(self, run_id: str) -> AbstractContextManager[object]:
        return nullcontext()

    def attempt_env(self, key: AttemptKey, worktree: str | None) -> dict[str, str]:
        return {**os.environ, **attempt_variables(key, worktree)}

    def attempt_context(
        self, key: AttemptKey, worktree: str | None
    ) -> AbstractContextManager[object]:
        return nullcontext()
