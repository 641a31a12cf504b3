"""Capture backends: one per kind of worktree."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from durability.backends.base import Backend, Snapshot
from durability.errors import NotAJjRepo, WorktreeMissing
from durability.ids import find_jj_root

__all__ = ["Backend", "Snapshot", "backend_for", "resolve_worktree"]


def resolve_worktree(path: str | os.PathLike[str]) -> Path:
    """The root of the worktree containing ``path`` (absolute, symlinks resolved)."""
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise WorktreeMissing(f"worktree {path} does not exist or is not a folder")
    root = find_jj_root(path)
    if root is None:
        raise NotAJjRepo(f"{path} is not inside a jj working copy")
    return root


def backend_for(
    worktree: Path, *, timeout_s: float, env: Mapping[str, str] = os.environ
) -> Backend:
    """The backend that captures ``worktree``."""
    from durability.backends.jj import JjBackend, find_jj

    return JjBackend(find_jj(env), timeout_s=timeout_s)
