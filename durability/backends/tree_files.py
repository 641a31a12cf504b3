"""Make a jj worktree's files equal to a commit's tree, straight from the git store.

Every jj restore goes this way rather than through ``jj restore``: jj's own
checkout resolves plain paths, so a folder swapped for a symlink during it
sends writes and deletes outside the worktree.  jj checkpoints are git
commits in the git store behind jj (``.git`` when colocated, else
``.jj/repo/store/git``), so their trees are read from there with pygit2 and
written with the git backend's confined writer (``git_restore.apply_plan``):
the same plan, the same refusals (a symlinked folder, a file no checkpoint
holds), the same kept modes.  The next jj snapshot records the result; it also
works for a commit jj itself can no longer name (``jj op abandon`` + gc),
which its pin kept in the git store.

The plan starts from ``current``, the commit of a snapshot just taken under
the worktree lock (the pre-restore checkpoint): only paths that differ
between it and the target are touched, and files in neither tree (ignored,
untracked) are left alone.

A commit holding jj conflicts is stored in git as a tree of ``.jjconflict-*``
folders, not as the files jj materializes with conflict markers: restoring
to or from one is refused (``restore-conflict``) rather than guessed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pygit2

from durability.backends.base import Changes, Progress
from durability.backends.space import disk_full
from durability.backends.tree_writer import Plan, apply_plan, changes, plan_trees, select
from durability.ground.errors import JjFailed, PathTooLong, RestoreError

__all__ = ["write_commit"]


def write_commit(git: Path, worktree: Path, target: str, current: str, *,
                 pre_restore: str | None = None, paths: Sequence[str] | None = None,
                 dry_run: bool = False, progress: Progress | None = None) -> Changes:
    """Turn ``worktree`` from ``current``'s tree into ``target``'s (at
    ``paths`` only, when given; nothing for a dry run); what that changes."""
    try:
        repo = pygit2.Repository(str(git))
        want = repo[target].peel(pygit2.Commit).tree
        have = repo[current].peel(pygit2.Commit).tree
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise JjFailed(f"cannot read commit {target} from {git}: {exc}") from exc
    for commit_id, tree in ((target, want), (current, have)):
        _refuse_conflicted(commit_id, tree)
    plan = select(plan_trees(have, want), paths)
    _refuse_too_long(worktree, plan)
    try:
        # No stat data: jj's own snapshot reads what was written.
        apply_plan(repo, worktree, plan, target=target, pre_restore=pre_restore,
                   dry_run=dry_run, progress=progress, stat_written=False)
    except (OSError, pygit2.GitError) as exc:
        full = disk_full(exc, [worktree, git])
        if full is not None:
            raise full from exc
        raise JjFailed(f"cannot write {target}'s files into {worktree}: {exc}") from exc
    return changes(plan)


def _refuse_too_long(worktree: Path, plan: Plan) -> None:
    """jj reads the worktree by path strings: a path past the system's limit
    (PATH_MAX) would fail its every snapshot from then on.  Refused before
    anything is written; the git backend reads and writes by descriptors
    and takes such a tree."""
    try:
        limit = os.pathconf(worktree, "PC_PATH_MAX")
    except (OSError, ValueError):
        limit = 4096
    base = len(os.fsencode(str(worktree))) + 1
    for _, new in plan.writes:
        size = base + len(os.fsencode(new.path))
        if size >= limit:
            raise PathTooLong(
                f"nothing restored: {_shortened(new.path)} is {size} bytes long with the "
                f"worktree's path, past the {limit - 1} a path may have here, and jj cannot "
                "snapshot it (a git worktree can hold it)")


def _shortened(path: str) -> str:
    return path if len(path) <= 120 else f"{path[:60]}...{path[-40:]}"


def _refuse_conflicted(commit_id: str, tree: pygit2.Tree) -> None:
    if any((entry.name or "").startswith(".jjconflict") for entry in tree):
        raise RestoreError(
            f"nothing restored: commit {commit_id[:12]} holds jj conflicts, which a restore "
            f"does not write; resolve them or run `jj restore --from {commit_id[:12]}`",
            code="restore-conflict")
