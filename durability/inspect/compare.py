"""Two checkpoints compared, or a checkpoint and the worktree as it is now.

Both read the git repository that holds the worktree's checkpoints
(``repository.open_checkpoints``).  The worktree side is read straight from
the files: nothing is captured or staged, no checkpoint is recorded, and the
user's index and HEAD are left alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pygit2

from durability.ground.errors import InvalidInput
from durability.inspect.diff import Changes, between_trees
from durability.inspect.repository import commit_tree, open_checkpoints, worktree_diff
from durability.store import Checkpoint

__all__ = ["checkpoints", "in_repository", "with_worktree"]


def checkpoints(old: Checkpoint, new: Checkpoint, *, paths: Sequence[str] = (),
                env: Mapping[str, str] = os.environ) -> Changes:
    """What changed from checkpoint ``old`` to checkpoint ``new``."""
    if old.worktree != new.worktree:
        raise InvalidInput(f"seq {old.seq} and seq {new.seq} are checkpoints of different "
                           f"worktrees ({old.worktree}, {new.worktree})")
    return in_repository(open_checkpoints(old.worktree, env), old, new, paths)


def in_repository(repo: pygit2.Repository, old: Checkpoint, new: Checkpoint,
                  paths: Sequence[str] = ()) -> Changes:
    """``checkpoints`` in a repository already open."""
    return between_trees(commit_tree(repo, old.commit_id, _name(old)),
                         commit_tree(repo, new.commit_id, _name(new)), paths, repo.odb)


def with_worktree(old: Checkpoint, *, paths: Sequence[str] = (),
                  env: Mapping[str, str] = os.environ) -> Changes:
    """What changed from checkpoint ``old`` to the files of its worktree now."""
    repo = open_checkpoints(old.worktree, env)
    return Changes(worktree_diff(repo, commit_tree(repo, old.commit_id, _name(old))), paths,
                   repo.odb)


def _name(c: Checkpoint) -> str:
    return f"seq {c.seq} of run {c.run_id}"
