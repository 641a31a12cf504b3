"""A restore never overwrites a path its pre-restore capture left out.

The pre-restore checkpoint is what makes a restore undoable.  When that
capture left paths out (a file it could not read, a new file over jj's size
limit), their current content is in no checkpoint: a restore that would
write or delete such a path (or anything under or above it) is refused with
``restore-conflict`` naming them, before anything is changed.  A restore that
leaves them alone proceeds: everything it overwrites was captured.  A
``--path`` restore is refused only for what its paths cover.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pygit2

from durability.backends import MOVING, Backend, Skipped
from durability.backends.selection import touches
from durability.ground.errors import GitFailed, RestoreError

__all__ = ["refuse_unrecorded", "repository"]


def refuse_unrecorded(backend: Backend, root: Path, pre_commit: str, target_commit: str,
                      skipped: Sequence[Skipped], paths: Sequence[str] | None = None) -> None:
    """Raise ``restore-conflict`` if going from ``pre_commit`` to
    ``target_commit`` (at ``paths`` only, when given) touches a path in
    ``skipped``."""
    if not skipped:
        return
    repo = repository(backend, root)
    before = repo[pre_commit].peel(pygit2.Commit).tree
    after = repo[target_commit].peel(pygit2.Commit).tree
    changed: set[str] = set()
    for delta in before.diff_to_tree(after).deltas:
        changed.update(p for p in (delta.old_file.path, delta.new_file.path)
                       if paths is None or touches(paths, p))
    hits = sorted({s for s in skipped if any(_overlap(s.path, c) for c in changed)})
    if any(s.reason == MOVING for s in hits):
        raise RestoreError(
            "the worktree was still changing while the pre-restore checkpoint was taken, so "
            f"what is there now is in no checkpoint ({_names(hits)}); nothing was changed: "
            "try again once it settles", code="restore-conflict")
    if hits:
        shown = ", ".join(f"{s.path} ({s.reason})" for s in hits[:10])
        more = f" and {len(hits) - 10} more" if len(hits) > 10 else ""
        raise RestoreError(
            f"restore would overwrite {len(hits)} path(s) the pre-restore checkpoint could "
            f"not capture: {shown}{more}; nothing was changed", code="restore-conflict")


def _names(hits: Sequence[Skipped]) -> str:
    shown = [s.path or "the whole tree" for s in hits if s.reason == MOVING][:10]
    return ", ".join(shown)


def _overlap(a: str, b: str) -> bool:
    """Whether skipped path ``a`` and changed path ``b`` are one, or one holds
    the other; ``""`` (the whole tree still moving) holds every path."""
    return a in ("", b) or b.startswith(a + "/") or a.startswith(b + "/")


def repository(backend: Backend, root: Path) -> pygit2.Repository:
    """The git store that holds ``root``'s checkpoints (for jj, the one behind jj)."""
    try:
        return backend.checkpoint_repository(root)
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot open the repository of {root}: {exc}") from exc
