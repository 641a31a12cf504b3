"""What a capture backend provides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["Backend", "Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """One captured state of a worktree, pinned against garbage collection."""

    commit_id: str
    change_id: str | None = None
    operation_id: str | None = None


class Backend(Protocol):
    """A way to capture and restore one kind of worktree."""

    name: str

    def snapshot(self, worktree: Path) -> Snapshot:
        """Capture the worktree as it is now and pin the commit (contracts 1, 4)."""
        ...

    def restore(self, worktree: Path, commit_id: str) -> None:
        """Make the worktree's files equal to ``commit_id``'s tree."""
        ...

    def tree_id(self, worktree: Path, commit_id: str) -> str:
        """The id of ``commit_id``'s tree, for verifying a restore."""
        ...
