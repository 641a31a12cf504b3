"""The worktree actions the engine asks for, done with Layer 2.

``durability.runs`` never imports the rest of ``durability``; it calls a ``WorktreeOps``.  This is
that interface, implemented with checkpoints: every attempt checkpoints its
worktree at its start and end and is watched meanwhile (``attempt_watch``);
before an interrupted task re-runs, its worktree goes back to the checkpoint
the engine chose (``durability.runs.attempt_checkpoints.restore_target``, through
``durability.restore.apply``, which takes a ``pre-restore`` checkpoint
first); and every attempt gets the environment that makes its hooks and
wrappers record on its own attempt row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext

from durability.config import Settings
from durability.restore.apply import restore
from durability.runs.worktree import attempt_variables
from durability.store import AttemptKey, Checkpoint
from durability.worktree_ops.attempt_watch import AttemptWatches

__all__ = ["DurabilityOps"]

class DurabilityOps:
    """``durability.runs.worktree.WorktreeOps`` over jj checkpoints."""

    def __init__(self, settings: Settings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env
        self.watches = AttemptWatches(settings, env)

    def restore_checkpoint(self, target: Checkpoint, worktree: str,
                           interrupted: AttemptKey) -> str:
        """Restore ``worktree`` to ``target``; the ``pre-restore`` checkpoint
        (the undo point) goes on the interrupted attempt, so the attempt
        whose checkpoint is the target keeps its ``jj_pointer``."""
        self.watches.release_stale(interrupted.run_id, worktree)
        done = restore(self.settings, run_id=target.run_id, node_id=target.node_id,
                       iteration=target.iteration, attempt=target.attempt, seq=target.seq,
                       worktree=worktree, env=self.env, pre_restore_key=interrupted)
        k = interrupted
        return (f"restored {done.worktree} to {target.node_id} iteration {target.iteration} "
                f"attempt {target.attempt} seq {target.seq} (undo: {k.node_id} iteration "
                f"{k.iteration} attempt {k.attempt} seq {done.pre_restore_seq})")

    def attempt_checkpoints(self, key: AttemptKey,
                            worktree: str) -> AbstractContextManager[object]:
        """Start checkpoint, watch, final capture (``attempt_watch``)."""
        return self.watches.around(key, worktree)

    @contextmanager
    def run_checkpoints(self, run_id: str) -> Iterator[None]:
        """Around a drive: the watches the run's attempts kept armed between
        them end with it (``AttemptWatches.close_run``)."""
        try:
            yield
        finally:
            self.watches.close_run(run_id)

    def attempt_env(self, key: AttemptKey, worktree: str | None) -> dict[str, str]:
        """The caller's environment plus the attempt's DURABILITY_* variables."""
        return {**self.env, **self.settings.to_env(), **attempt_variables(key, worktree)}

    def attempt_context(
        self, key: AttemptKey, worktree: str | None
    ) -> AbstractContextManager[object]:
        """The ambient attempt of in-process wrappers while the task runs."""
        if worktree is None:
            return nullcontext()
        from durability.integrations import wrap

        return wrap.attempt(key.run_id, key.node_id, worktree=worktree,
                            iteration=key.iteration, attempt=key.attempt,
                            settings=self.settings)
