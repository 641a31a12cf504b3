"""The git repository that holds a worktree's checkpoints, opened to read.

A git worktree's checkpoints are commits in its own repository; a jj working
copy's are commits in the git store behind jj (``.git`` when colocated, else
``.jj/repo/store/git``): ``Backend.checkpoint_repository`` says which.  Either way the
repository object's working folder is set to the worktree, so the worktree
itself can be compared with a checkpoint (``worktree_diff``) without
capturing it: nothing is staged, no index is written.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from pathlib import Path

import pygit2
from pygit2 import _pygit2
from pygit2.enums import DiffOption
from pygit2.ffi import ffi

from durability.backends import backend_name
from durability.backends.base import backend_type
from durability.ground.errors import GitFailed, WorktreeMissing
from durability.store import NotFound

__all__ = ["WORKDIR_FLAGS", "commit_tree", "open_checkpoints", "worktree_diff"]

#: The worktree as a capture sees it: untracked files count (their content
#: too, so they get line counts), a file that became a link is a change.
WORKDIR_FLAGS = (DiffOption.INCLUDE_UNTRACKED | DiffOption.RECURSE_UNTRACKED_DIRS
                 | DiffOption.SHOW_UNTRACKED_CONTENT | DiffOption.INCLUDE_TYPECHANGE)


def open_checkpoints(worktree: str | Path, env: Mapping[str, str] = os.environ
                     ) -> pygit2.Repository:
    """The repository holding ``worktree``'s checkpoints, its working folder
    set to ``worktree``."""
    root = Path(worktree)
    if not root.is_dir():
        raise WorktreeMissing(f"worktree {root} does not exist: its checkpoints cannot be read "
                              f"(moved? from its new place its records follow it; a restore "
                              f"names it with --worktree PATH)")
    backend = backend_type(backend_name(root, env))
    try:
        repo = backend.checkpoint_repository(root)
        if repo.workdir is None or Path(repo.workdir).resolve() != root.resolve():
            # A non-colocated jj store is bare, and a second jj workspace's
            # store belongs to the first: read the worktree that was captured.
            repo.workdir = str(root)
        # jj's own folder is no part of a jj worktree; git skips only .git.
        _ignore(repo, "/.jj/")
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot open the repository of {root}: {exc}") from exc
    return repo


def commit_tree(repo: pygit2.Repository, commit_id: str, what: str) -> pygit2.Tree:
    """The tree of checkpoint commit ``commit_id`` (``what`` names it in errors)."""
    try:
        return repo[commit_id].peel(pygit2.Commit).tree
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise NotFound(f"{what}: commit {commit_id[:12]} is not in the repository "
                       f"{repo.path}") from exc


def worktree_diff(repo: pygit2.Repository, tree: pygit2.Tree) -> pygit2.Diff:
    """``tree`` against the files in the worktree now (git's ignore rules)."""
    try:
        return tree.diff_to_workdir(WORKDIR_FLAGS)
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot read the worktree {repo.workdir}: {exc}") from exc


def _ignore(repo: pygit2.Repository, rule: str) -> None:
    """Add an ignore rule to this repository object only (libgit2's
    ``git_ignore_add_rule``: in memory, no file written).  pygit2 does not
    wrap it, so it is called through ctypes on the libgit2 pygit2 loaded, as
    ``backends.git_repo`` does for the private index."""
    func = ctypes.CDLL(_pygit2.__file__).git_ignore_add_rule
    func.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    func.restype = ctypes.c_int
    if func(int(ffi.cast("uintptr_t", repo._repo)), rule.encode()) != 0:
        raise GitFailed(f"libgit2 refused the ignore rule {rule!r}")
