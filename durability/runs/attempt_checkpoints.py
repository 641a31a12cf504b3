"""Attempts checkpoint themselves, and where an interrupted task resumes.

While a task attempt runs in a worktree the engine keeps a watch on the
worktree with the attempt's identity (``WorktreeOps.attempt_checkpoints``):
the starting tree is recorded as a checkpoint (source ``attempt``, label
``attempt start``) before the task's code runs, and a final capture (label
``attempt end``) is taken when the attempt ends in any state, before its row
is closed, so ``jj_pointer`` is where the tree ended up.

``restore_target`` picks the checkpoint a re-run starts from
(docs/how-to/runs.md, "Where a re-run starts"); it reads only checkpoint rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from durability.runs.worktree import WorktreeOps
from durability.store.models import AttemptKey, Checkpoint

__all__ = [
    "ATTEMPT_SOURCE",
    "END_LABEL",
    "ON_RESUME",
    "START_LABEL",
    "Target",
    "checkpointed",
    "restore_target",
]

#: The source of the checkpoints the engine takes itself.
ATTEMPT_SOURCE = "attempt"
START_LABEL = "attempt start"
END_LABEL = "attempt end"
#: How a task re-runs after an interruption: from its last checkpoint, or
#: from the tree its first attempt started from.
ON_RESUME = ("continue", "clean")


@contextmanager
def checkpointed(ops: WorktreeOps, key: AttemptKey, worktree: str | None,
                 enabled: bool) -> Iterator[None]:
    """Around one attempt: the ops' start checkpoint, watch and final capture
    (nothing without a worktree, or for a task declared ``checkpoints=False``)."""
    if worktree is None or not enabled:
        yield
        return
    with ops.attempt_checkpoints(key, worktree):
        yield


@dataclass(frozen=True)
class Target:
    """Where a re-run starts: a checkpoint, and why it was chosen."""

    checkpoint: Checkpoint
    #: ``newest`` (continue), ``first-start`` (clean), or ``newest (clean
    #: would drop ...)`` when clean fell back to keep a parallel task's work.
    reason: str


def restore_target(checkpoints: Sequence[Checkpoint], *, node_id: str, iteration: int,
                   worktree: str, on_resume: str) -> Target | None:
    """The checkpoint ``node_id``'s next attempt at ``iteration`` starts from.

    ``checkpoints`` are the run's (any order).  Only those of ``worktree``
    count, and never ``pre-restore`` ones (they hold the tree a restore
    replaced).  continue: the newest of them, whichever attempt took it (so
    a parallel task that finished keeps its files), and never older than the
    task's own newest checkpoint of any earlier attempt (the floor).  clean:
    the tree the iteration's first attempt started from, unless another task
    checkpointed this worktree after it, whose work clean would drop: then
    continue's target.  None when there is nothing to go back to.
    """
    usable = sorted((c for c in checkpoints if c.worktree == worktree
                     and c.source != "pre-restore"), key=_order)
    if not usable:
        return None
    # The task's own checkpoints are among ``usable``, so the newest is never
    # older than the floor (a double crash still restores).
    newest = usable[-1]
    own = [c for c in usable if c.node_id == node_id and c.iteration == iteration]
    if on_resume != "clean":
        return Target(newest, "newest")
    start = _first_start(own)
    if start is None:
        return Target(newest, "newest (no start checkpoint of the first attempt)")
    others = [c for c in usable if (c.node_id, c.iteration) != (node_id, iteration)
              and _order(c) > _order(start)]
    if others:
        return Target(newest, f"newest (clean would drop the work of {others[-1].node_id})")
    return Target(start, "first-start")


def _first_start(own: list[Checkpoint]) -> Checkpoint | None:
    if not own:
        return None
    first = min(c.attempt for c in own)
    found = [c for c in own if c.attempt == first and c.source == ATTEMPT_SOURCE
             and c.label == START_LABEL]
    return min(found, key=_order) if found else None


def _order(c: Checkpoint) -> tuple[int, int, int]:
    # Captures of one worktree are serialised by its lock and each takes more
    # than a millisecond, so the record time orders them; within one attempt
    # the seq does.
    return (c.created_at_ms, c.attempt, c.seq)
