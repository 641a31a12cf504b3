"""Restore a worktree to a recorded checkpoint (contract 7, docs/DESIGN.md).

Under the worktree lock: capture the current tree as a ``pre-restore``
checkpoint of the same attempt (so every restore can be undone by restoring
that seq), restore the checkpoint's tree, then snapshot again and check that
the tree now equals the checkpoint's.

Both backends write through one confined writer (``backends.git_restore``):
nothing outside the worktree is written or deleted, even when a folder is
swapped for a symlink during the restore, and a file whose content no
checkpoint holds is never overwritten (``restore-conflict``).  The modes of
the files replaced are kept with the pre-restore checkpoint, so an undo (a
restore to that seq) puts them back.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from durability.backends import Backend, resolve_worktree
from durability.capture.capturer import Capturer, CaptureRequest
from durability.capture.inprocess import lazy_store
from durability.capture.restore_guard import refuse_unrecorded
from durability.config import Settings
from durability.errors import CaptureError, RestoreError
from engine import AttemptKey, Checkpoint, Store

__all__ = ["Restored", "find_checkpoint", "restore"]


@dataclass(frozen=True)
class Restored:
    worktree: str
    restored: Checkpoint
    pre_restore_seq: int
    pre_restore_commit: str


def find_checkpoint(
    store: Store,
    *,
    run_id: str,
    node_id: str,
    iteration: int | None = None,
    attempt: int | None = None,
    seq: int | None = None,
) -> Checkpoint:
    """The checkpoint named by the options: latest attempt and seq by default."""
    if attempt is None:
        key = store.latest_attempt(run_id, node_id, iteration)
    else:
        key = AttemptKey(run_id, node_id, iteration or 0, attempt)
    return store.checkpoint(key, seq)


def restore(
    settings: Settings,
    *,
    run_id: str,
    node_id: str,
    iteration: int | None = None,
    attempt: int | None = None,
    seq: int | None = None,
    worktree: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> Restored:
    store_get = lazy_store(settings)
    target = find_checkpoint(store_get(), run_id=run_id, node_id=node_id, iteration=iteration,
                             attempt=attempt, seq=seq)
    root = resolve_worktree(worktree or target.worktree)
    capturer = Capturer(settings=settings, store=store_get, env=env)
    with capturer.lock(root, timeout_s=settings.jj_timeout_s + 30):
        # A commit the target's repository does not hold can never be
        # restored: refuse before the pre-restore capture, which would file a
        # row (and move jj_pointer) for a worktree the attempt never used.
        backend = capturer.backend(root)
        want = backend.tree_id(root, target.commit_id)
        pre = capturer.capture_locked([CaptureRequest(
            key=target.key, worktree=root, source="pre-restore",
            request_id=f"pre-restore-{uuid.uuid4()}", label=f"before restore to seq {target.seq}",
        )])[0]
        if not pre.ok:
            raise CaptureError(f"pre-restore snapshot failed, nothing restored: "
                               f"{pre.error_message}", code=pre.error_code)
        assert pre.seq is not None and pre.commit_id is not None
        refuse_unrecorded(backend, root, pre.commit_id, target.commit_id, pre.skipped)
        try:
            backend.restore(root, target.commit_id, pre_restore=pre.commit_id)
        except RestoreError as exc:
            # A refusal names what is in the way; one that stopped partway
            # (a folder swapped for a link) is undone by the pre-restore seq.
            raise RestoreError(f"{exc.message}; the state before is seq {pre.seq}",
                               code=exc.code) from exc
        _verify(backend, root, target, want)
    return Restored(str(root), target, pre.seq, pre.commit_id)


def _verify(backend: Backend, root: Path, target: Checkpoint, want: str) -> None:
    now = backend.snapshot(root)
    got = backend.tree_id(root, now.commit_id)
    if want != got:
        raise RestoreError(
            f"after restoring seq {target.seq}, {root} has tree {got[:12]}, expected {want[:12]}"
        )
