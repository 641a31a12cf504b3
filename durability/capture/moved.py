"""A worktree moved (``mv proj proj2``) keeps its records.

Records are keyed by machine and path, so a moved worktree would start an
empty history at its new path while its own lay under the old one.  Each
worktree's repository holds its identity (``ids.read_worktree_identity``: a
random id and the path its records are under, in the repository's private
folder, which moves with it).  The move is *certain*, and this machine's
records of the old path are re-keyed to the new one, only when:

- the worktree here holds our identity file, naming another path;
- that path holds no worktree with the same id (it is gone, or another
  repository is there now): a copy (``cp -r``), whose original is still in
  place with the same id, is a new worktree, and gets an id of its own;
- this machine has records of that path.

Otherwise nothing is re-keyed, and a worktree without an identity gets one.
Never fatal: a folder that cannot take the file, or a store that cannot be
written, leaves the records where they are.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from durability.ground import ids
from durability.store import EngineError, Store

__all__ = ["follow"]


def follow(store: Store, root: Path, *, create: bool = True) -> str | None:
    """Make the identity of the worktree at ``root`` name ``root``, re-keying
    this machine's records if it moved here (see the module's docstring);
    returns the path it moved from when records were re-keyed.  Without
    ``create`` (a reader: ``log``), a worktree with no identity, or a copy,
    is left as it is."""
    here = str(root)
    found = ids.read_worktree_identity(root)
    try:
        if found is None:
            if create:
                ids.write_worktree_identity(root, uuid.uuid4().hex, here)
            return None
        ident, was = found
        if was == here:
            return None
        there = ids.read_worktree_identity(was) if os.path.isdir(was) else None
        if there is not None and there[0] == ident:  # a copy: the original is still there
            if create:
                ids.write_worktree_identity(root, uuid.uuid4().hex, here)
            return None
        if not store.knows_worktree(was):
            if create:
                ids.write_worktree_identity(root, ident, here)
            return None
        store.move_worktree(was, here)
        ids.write_worktree_identity(root, ident, here)
        return was
    except (OSError, EngineError):
        return None
