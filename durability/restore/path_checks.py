"""What a ``restore --path`` checks before it writes and after.

Before: every path must be in the checkpoint (a file or a folder) or in the
worktree now; a path in neither is ``not-found`` and nothing is changed.  A
path found only on disk must also be in the tree just captured: otherwise it
is ignored (or left out of the capture), a restore would never delete it, and
the request is refused the same way.

After: the restored paths must equal the checkpoint, and every other path
must equal the pre-restore checkpoint (nothing else moved).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pygit2

from durability.backends.confined import ConfinedTree
from durability.backends.selection import covers, touches
from durability.ground.errors import RestoreError
from durability.ground.ids import printable
from durability.store import Checkpoint, NotFound

__all__ = ["check_exist", "check_recorded", "named", "tree_differs", "verify_paths"]

#: Paths named in a failed verification; the rest are counted.
_NAMED = 5


def check_exist(repo: pygit2.Repository, root: Path, target: Checkpoint,
                paths: Sequence[str]) -> None:
    """Refuse (``not-found``) a path neither the checkpoint nor the disk has."""
    want = _tree(repo, target.commit_id)
    with ConfinedTree(root) as tree:
        # lstat from the root without following links: a path reached
        # through a symlinked folder is not in the worktree.
        missing = [p for p in paths if p and p not in want and tree.lstat(p) is None]
    if missing:
        raise NotFound(f"{_named(missing)}: not in seq {target.seq} and not in the worktree "
                       "now; nothing restored")


def check_recorded(repo: pygit2.Repository, target: Checkpoint, current: str,
                   paths: Sequence[str]) -> None:
    """Refuse (``not-found``) a path in neither the checkpoint nor ``current``
    (the tree just captured): on disk, but ignored or left out."""
    want, have = _tree(repo, target.commit_id), _tree(repo, current)
    missing = [p for p in paths if p and p not in want and p not in have]
    if missing:
        raise NotFound(f"{_named(missing)}: not in seq {target.seq}, and the worktree's copy "
                       "is not recorded (ignored or left out), which a restore never deletes; "
                       "nothing restored")


def verify_paths(repo: pygit2.Repository, root: Path, target: Checkpoint, *, now: str,
                 before: str, paths: Sequence[str]) -> None:
    """Raise ``restore-verify-failed`` unless ``now`` equals the checkpoint at
    ``paths`` and equals ``before`` everywhere else."""
    tree = _tree(repo, now)
    wrong = _differ(tree, _tree(repo, target.commit_id), lambda p: covers(paths, p))
    if wrong:
        raise RestoreError(f"after restoring seq {target.seq} at {_named(paths)}, {root} still "
                           f"differs from it at {_named(wrong)}")
    moved = _differ(tree, _tree(repo, before), lambda p: not touches(paths, p))
    if moved:
        raise RestoreError(f"after restoring seq {target.seq} at {_named(paths)}, {root} "
                           f"changed outside those paths at {_named(moved)}")


def tree_differs(repo: pygit2.Repository, want: str, got: str) -> list[str]:
    """The paths where tree ``got`` differs from tree ``want``."""
    return _differ(repo[got].peel(pygit2.Tree), repo[want].peel(pygit2.Tree), lambda p: True)


def named(paths: Sequence[str]) -> str:
    """Up to five of ``paths``, then a count."""
    return _named(paths)


def _differ(a: pygit2.Tree, b: pygit2.Tree, keep: Callable[[str], bool]) -> list[str]:
    return sorted({d.new_file.path for d in a.diff_to_tree(b).deltas if keep(d.new_file.path)})


def _tree(repo: pygit2.Repository, commit_id: str) -> pygit2.Tree:
    return repo[commit_id].peel(pygit2.Commit).tree


def _named(paths: Sequence[str]) -> str:
    shown = ", ".join(printable(p) or "." for p in paths[:_NAMED])
    return shown + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")
