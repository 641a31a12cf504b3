"""Capture backends: one per kind of worktree.

A worktree is captured through jj when it is a jj working copy, with pygit2
when it is a plain git working tree (a linked ``git worktree add`` tree and
submodules included); ``DURABILITY_BACKEND=jj|git`` forces one.  A colocated
jj repository on a machine without jj is captured through its git side.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from durability.backends.base import (
    MOVING,
    Backend,
    Changes,
    Progress,
    Skipped,
    Snapshot,
    Stamp,
)
from durability.ground.errors import (
    DurabilityError,
    InvalidBackend,
    NotAJjRepo,
    NotARepo,
    WorktreeMissing,
)
from durability.ground.ids import backend_choice, find_worktree_root, is_git_root, is_jj_root

__all__ = ["MOVING", "Backend", "Changes", "Progress", "Skipped", "Snapshot", "Stamp",
           "backend_for", "backend_name", "capture_settings", "resolve_worktree"]


def capture_settings(env: Mapping[str, str], max_new_file_size: int) -> dict[str, str]:
    """What a capture under ``env`` depends on beyond the worktree, as the
    variable each comes from and its value (``jj``: the binary it resolves,
    or the error that finding it gives; ``DURABILITY_HOST_ID``: the machine
    id it records under, ``durability.store.host.host_id``): the service reports its
    own in its ping answer and doctor compares them with its shell's."""
    from durability.backends.jj import find_jj

    try:
        jj = find_jj(env).path
    except DurabilityError as exc:
        jj = f"{exc.code}: {exc}"
    from durability.store.host import host_id

    # The machine id is part of every worktree's key: a service recording
    # under another one than the CLI's is a store the CLI does not see.
    return {"jj": jj, "DURABILITY_BACKEND": env.get("DURABILITY_BACKEND") or "",
            "DURABILITY_MAX_NEW_FILE_SIZE": str(max_new_file_size),
            "DURABILITY_HOST_ID": host_id(env)}


def resolve_worktree(
    path: str | os.PathLike[str], env: Mapping[str, str] = os.environ
) -> Path:
    """The root of the worktree containing ``path`` (absolute, symlinks resolved)."""
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise WorktreeMissing(f"worktree {path} does not exist or is not a folder")
    forced = _forced(env)
    found = find_worktree_root(path, forced)
    if found is None:
        raise _not_a_repo(str(path), forced)
    return found[0]


def backend_name(worktree: Path, env: Mapping[str, str] = os.environ) -> str:
    """``jj`` or ``git``: how the worktree rooted at ``worktree`` is captured."""
    forced = _forced(env)
    if forced is not None:
        return forced
    if is_jj_root(worktree):
        if is_git_root(worktree) and not _jj_installed(env):
            return "git"  # colocated, and no jj here: the git side is captured instead
        return "jj"
    if is_git_root(worktree):
        return "git"
    if not worktree.is_dir():
        raise WorktreeMissing(f"worktree {worktree} does not exist")
    raise _not_a_repo(str(worktree), None)


def backend_for(
    worktree: Path, *, timeout_s: float, env: Mapping[str, str] = os.environ,
    max_new_file_size: int | None = None, deadline: float | None = None,
) -> Backend:
    """The backend that captures ``worktree`` (``max_new_file_size``: jj's
    limit on a new file, default ``config.DEFAULT_MAX_NEW_FILE_SIZE``; each jj
    command's ``timeout_s`` is cut to ``deadline``, a ``time.monotonic()``)."""
    if backend_name(worktree, env) == "git":
        from durability.backends.git import GitBackend

        return GitBackend()
    from durability.backends.jj import JjBackend, find_jj

    return JjBackend(find_jj(env), timeout_s=timeout_s, max_new_file_size=max_new_file_size,
                     deadline=deadline)


def _jj_installed(env: Mapping[str, str]) -> bool:
    """Whether a jj can be found.  A colocated repository is also a git working
    tree: without jj it is captured with pygit2 (doctor warns) rather than
    filing a ``jj-missing`` gap on every tool call."""
    from durability.backends.jj import find_jj
    from durability.ground.errors import JjMissing

    try:
        find_jj(env)
    except JjMissing:
        return False
    except DurabilityError:
        return True  # there, but unusable (too old): say so through the jj backend
    return True


def _forced(env: Mapping[str, str]) -> str | None:
    try:
        return backend_choice(env)
    except ValueError as exc:
        raise InvalidBackend(str(exc)) from None


def _not_a_repo(path: str, forced: str | None) -> Exception:
    if forced == "jj":
        return NotAJjRepo(f"{path} is not inside a jj working copy (DURABILITY_BACKEND=jj)")
    if forced == "git":
        return NotARepo(f"{path} is not inside a git working tree (DURABILITY_BACKEND=git)")
    return NotARepo(f"{path} is not inside a jj working copy or a git working tree")
