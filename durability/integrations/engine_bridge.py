"""The worktree actions the engine asks for, done with Layer 2.

``engine`` never imports ``durability``; it calls a ``WorktreeOps``.  This is
that interface, implemented with checkpoints: before an interrupted attempt
re-runs, its worktree goes back to the attempt's last checkpoint (through
``durability.capture.restore``, which takes a ``pre-restore`` checkpoint first), and
every attempt gets the environment that makes its hooks and wrappers record
on its own attempt row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext

from durability.capture.restore import restore
from durability.config import Settings
from engine import AttemptKey, Store
from engine.worktree import attempt_variables

__all__ = ["DurabilityOps"]

class DurabilityOps:
    """``engine.worktree.WorktreeOps`` over jj checkpoints."""

    def __init__(self, settings: Settings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env

    def restore_attempt(self, key: AttemptKey, worktree: str) -> str | None:
        """Restore ``worktree`` to ``key``'s last checkpoint of its own.

        ``pre-restore`` checkpoints are skipped: they record the tree a
        restore replaced, so restoring twice lands on the same state.
        """
        with Store(self.settings.database) as store:
            own = [c for c in store.checkpoints(key.run_id, key.node_id)
                   if c.key == key and c.source != "pre-restore"]
        if not own:
            return None
        target = own[-1]
        done = restore(self.settings, run_id=key.run_id, node_id=key.node_id,
                       iteration=key.iteration, attempt=key.attempt, seq=target.seq,
                       worktree=worktree, env=self.env)
        return (f"restored {done.worktree} to {key.node_id} iteration {key.iteration} "
                f"attempt {key.attempt} seq {target.seq} (undo: seq {done.pre_restore_seq})")

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
