"""File modes kept beside a pre-restore checkpoint, so an undo puts them back.

A git tree records a file as 644 or 755 only, so a file that was 0600 (or
0000, or 0640) comes back from a checkpoint with the umask's mode.  Before a
restore overwrites or deletes files, their permission bits are written as a
small JSON blob into the same git store as the checkpoint (the worktree's
repository, or the git store behind jj), under the ref
``refs/durability/modes/<pre-restore commit>``: tied to that commit, kept by
the same gc rules as the pins, and read back when a restore targets it.

Only files a restore replaced are kept: a file whose mode changed by other
means between two captures is restored with the tree's mode.
"""

from __future__ import annotations

import json

import pygit2

__all__ = ["PREFIX", "load", "save"]

PREFIX = "refs/durability/modes/"


def load(repo: pygit2.Repository, commit_id: str) -> dict[str, int]:
    """The modes kept under ``commit_id`` (empty when none were)."""
    try:
        blob = repo.references[PREFIX + commit_id].peel(pygit2.Blob)
        data = json.loads(blob.data)
        return {str(k): int(v) & 0o777 for k, v in data["modes"].items()}
    except (KeyError, ValueError, TypeError, AttributeError, pygit2.GitError):
        return {}


def save(repo: pygit2.Repository, commit_id: str, modes: dict[str, int]) -> None:
    """Keep ``modes`` under ``commit_id``, over any kept there before (a
    second restore from the same state may replace other files)."""
    if not modes:
        return
    merged = {**load(repo, commit_id), **modes}
    blob = repo.create_blob(json.dumps({"v": 1, "modes": merged}, sort_keys=True).encode())
    repo.references.create(PREFIX + commit_id, blob, force=True)
