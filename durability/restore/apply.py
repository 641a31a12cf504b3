"""Restore a worktree to a recorded checkpoint (contract 7, docs/DESIGN.md).

Under the worktree lock: capture the current tree as a ``pre-restore``
checkpoint of the same attempt (so every restore can be undone by restoring
that seq), restore the checkpoint's tree, then snapshot again and check that
the tree now equals the checkpoint's (jj: from the snapshot that records the
files written, one jj run after the writes, not two; decision 0054).

Both backends write through one confined writer (``backends.git_restore``):
nothing outside the worktree is written or deleted, even when a folder is
swapped for a symlink during the restore, and a file whose content no
checkpoint holds is never overwritten (``restore-conflict``).  The modes of
the files replaced are kept with the pre-restore checkpoint, so an undo (a
restore to that seq) puts them back.

``paths`` limits a restore to some files and folders (``restore --path``):
the pre-restore checkpoint is still the whole tree, so undo is the same, and
the verification checks those paths against the checkpoint and everything
else against the pre-restore checkpoint (``path_checks``).  ``preview``
(``restore --dry-run``) makes the same plan and the same refusals and
changes nothing: it snapshots the tree to see it, records no checkpoint.

A restore whose ``.gitignore`` files would stop ignoring files that are on
disk and in no checkpoint refuses (``restore-would-unignore``, see
``unignore``) before writing anything, and so does its dry run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import filelock

from durability.backends import Backend, Changes, Progress, Snapshot, resolve_worktree
from durability.backends.selection import normalize
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.capture.inprocess import lazy_store
from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import (
    CaptureError,
    DurabilityError,
    LockTimeout,
    RestoreError,
    WorktreeMissing,
)
from durability.restore import path_checks, unignore
from durability.restore.guard import refuse_unrecorded, repository
from durability.store import AttemptKey, Checkpoint, Store
from durability.store.gc_rows import record_undo_point

__all__ = ["Preview", "Restored", "find_checkpoint", "preview", "recorded_root", "restore"]


@dataclass(frozen=True)
class Restored:
    worktree: str
    restored: Checkpoint
    pre_restore_seq: int
    pre_restore_commit: str
    #: The worktree-relative paths restored, or None for the whole tree.
    paths: tuple[str, ...] | None = None
    changes: Changes = field(default_factory=Changes)
    #: The attempt the pre-restore checkpoint went on (None: the restored one's).
    pre_restore_key: AttemptKey | None = None

    @property
    def undo_key(self) -> AttemptKey:
        """The attempt whose ``pre_restore_seq`` undoes this restore."""
        return self.pre_restore_key or self.restored.key


@dataclass(frozen=True)
class Preview:
    """What a restore would change (``restore --dry-run``); nothing was."""

    worktree: str
    target: Checkpoint
    paths: tuple[str, ...] | None
    changes: Changes


@dataclass(frozen=True)
class _Job:
    target: Checkpoint
    root: Path
    capturer: Capturer
    paths: tuple[str, ...] | None
    #: the store's opener (the capturer's own)
    store: Callable[[], Store]
    #: the attempt the pre-restore checkpoint goes on (None: the target's)
    pre_key: AttemptKey | None = None


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
    paths: Sequence[str] | None = None,
    progress: Progress | None = None,
    pre_restore_key: AttemptKey | None = None,
) -> Restored:
    """Restore the checkpoint named (the whole tree, or only ``paths``:
    relative to the worktree root or absolute inside it).  The pre-restore
    checkpoint goes on the target's attempt, or on ``pre_restore_key`` (the
    engine's interrupted attempt, when the target is another attempt's; a
    run of its own for ``restore --from-remote``)."""
    job = _job(settings, env, worktree, paths, run_id=run_id, node_id=node_id,
               iteration=iteration, attempt=attempt, seq=seq)
    if pre_restore_key is not None:
        job = replace(job, pre_key=pre_restore_key)
    target, root = job.target, job.root
    with _locked(job.capturer, root, settings.jj_timeout_s + 30):
        # A commit the target's repository does not hold can never be
        # restored: refuse before the pre-restore capture, which would file a
        # row (and move jj_pointer) for a worktree the attempt never used.
        backend = job.capturer.backend(root)
        want = backend.tree_id(root, target.commit_id)
        _check_exist(backend, job)
        pre = _pre_restore(job)
        assert pre.seq is not None and pre.commit_id is not None
        refuse_unrecorded(backend, root, pre.commit_id, target.commit_id, pre.skipped, job.paths)
        _check_recorded(backend, job, pre.commit_id)
        _check_unignored(backend, job, pre.commit_id)
        # From here on the pre-restore seq is this restore's undo: gc keeps
        # it for the pre-restore window, whatever row the capture landed on.
        record_undo_point(job.store(), job.pre_key or target.key, pre.seq)
        try:
            changes = backend.restore(root, target.commit_id, pre_restore=pre.commit_id,
                                      paths=job.paths, progress=progress)
            if job.paths is None:
                _verify(backend, root, target, want)
            else:
                _verify_paths(backend, job, pre.commit_id)
        except DurabilityError as exc:
            # A refusal names what is in the way; a restore that stopped or
            # failed partway (a folder swapped for a link, jj or git failing,
            # a tree that does not verify) is undone by the pre-restore seq.
            k = job.pre_key or target.key
            raise type(exc)(f"{exc.message}; the state before is seq {pre.seq} of "
                            f"{_where(k, target)}", code=exc.code) from exc
    return Restored(str(root), target, pre.seq, pre.commit_id, job.paths, changes,
                    job.pre_key)


def _where(key: AttemptKey, target: Checkpoint) -> str:
    """The pre-restore's attempt as a failure names it: node/iteration/attempt,
    with the run first when it is not the target's."""
    at = f"{key.node_id}/{key.iteration}/{key.attempt}"
    return at if key.run_id == target.run_id else f"{key.run_id} {at}"


@contextmanager
def _locked(capturer: Capturer, root: Path, timeout_s: float) -> Iterator[None]:
    """The worktree lock, or ``LockTimeout`` (one line, exit 5) when a capture
    holds it longer than ``timeout_s``."""
    try:
        with capturer.lock(root, timeout_s=timeout_s):
            yield
    except filelock.Timeout:
        raise LockTimeout(f"the worktree lock of {root} was not free within {timeout_s:g}s; "
                          "a capture is running: try again") from None


def preview(
    settings: Settings,
    *,
    run_id: str,
    node_id: str,
    iteration: int | None = None,
    attempt: int | None = None,
    seq: int | None = None,
    worktree: str | None = None,
    env: Mapping[str, str] = os.environ,
    paths: Sequence[str] | None = None,
) -> Preview:
    """What ``restore`` with the same arguments would change, and the same
    refusals; no file is changed and no checkpoint recorded."""
    job = _job(settings, env, worktree, paths, run_id=run_id, node_id=node_id,
               iteration=iteration, attempt=attempt, seq=seq)
    target, root = job.target, job.root
    with _locked(job.capturer, root, settings.jj_timeout_s + 30):
        backend = job.capturer.backend(root)
        backend.tree_id(root, target.commit_id)
        _check_exist(backend, job)
        # The tree as it is, unrecorded (git: an unpinned commit; jj: the
        # working-copy commit jj's snapshot makes anyway).
        now = backend.snapshot(root)
        refuse_unrecorded(backend, root, now.commit_id, target.commit_id, now.skipped, job.paths)
        _check_recorded(backend, job, now.commit_id)
        _check_unignored(backend, job, now.commit_id)
        changes = backend.restore(root, target.commit_id, pre_restore=now.commit_id,
                                  paths=job.paths, dry_run=True)
    return Preview(str(root), target, job.paths, changes)


def _job(settings: Settings, env: Mapping[str, str], worktree: str | None,
         paths: Sequence[str] | None, *, run_id: str, node_id: str, iteration: int | None,
         attempt: int | None, seq: int | None) -> _Job:
    """The checkpoint, the worktree and the paths a restore names (an
    unusable path is ``invalid-value`` before anything is locked)."""
    store_get = lazy_store(settings)
    target = find_checkpoint(store_get(), run_id=run_id, node_id=node_id, iteration=iteration,
                             attempt=attempt, seq=seq)
    root = resolve_worktree(worktree) if worktree else recorded_root(store_get(), target)
    selected = normalize(paths, root) if paths else None
    if selected is not None and "" in selected:
        selected = None  # `--path .` (or the root by any name) is the whole tree
    return _Job(target, root, Capturer(settings=settings, store=store_get, env=env), selected,
                store_get)


def recorded_root(store: Store, target: Checkpoint) -> Path:
    """The worktree a checkpoint was taken in: its recorded path, or, when
    that worktree moved to the one here, this one (``capture.moved``: its
    records follow it); else ``worktree-missing`` naming ``--worktree``."""
    from durability.capture.moved import follow

    if os.path.isdir(target.worktree):
        return resolve_worktree(target.worktree)
    try:
        here = resolve_worktree(Path.cwd())
    except DurabilityError:
        here = None
    if here is not None and follow(store, here) == target.worktree:
        return here
    raise WorktreeMissing(f"the worktree of run {target.run_id} seq {target.seq}, "
                          f"{ids.printable(target.worktree)}, does not exist; if it moved, "
                          f"name it: --worktree PATH")


def _pre_restore(job: _Job) -> Outcome:
    """Capture the tree as it is, as a checkpoint of the target's attempt
    (taken under the lock the caller holds)."""
    target = job.target
    pre = job.capturer.capture_locked([CaptureRequest(
        key=job.pre_key or target.key, worktree=job.root, source="pre-restore",
        request_id=f"pre-restore-{uuid.uuid4()}", label=f"before restore to seq {target.seq}",
    )])[0]
    if not pre.ok:
        raise CaptureError(f"pre-restore snapshot failed, nothing restored: "
                           f"{pre.error_message}", code=pre.error_code)
    return pre


def _check_exist(backend: Backend, job: _Job) -> None:
    if job.paths is not None:
        path_checks.check_exist(repository(backend, job.root), job.root, job.target, job.paths)


def _check_recorded(backend: Backend, job: _Job, current: str) -> None:
    if job.paths is not None:
        path_checks.check_recorded(repository(backend, job.root), job.target, current,
                                     job.paths)


def _check_unignored(backend: Backend, job: _Job, current: str) -> None:
    """Refuse (``restore-would-unignore``) a restore whose ignore rules would
    let the next capture record files that are ignored now."""
    unignore.refuse_unignore(
        unignore.unignored(repository(backend, job.root), job.root, current,
                                 job.target.commit_id, job.paths, backend=backend.name),
        job.target.seq)


def _after(backend: Backend, root: Path) -> Snapshot:
    """The tree the restore left: the snapshot the backend's restore ended
    with, taken under this lock after its last write (jj: the one that
    records the files written), else a new one (decision 0054)."""
    restored = backend.restored
    return restored if restored is not None else backend.snapshot(root)


def _verify(backend: Backend, root: Path, target: Checkpoint, want: str) -> None:
    """Raise ``restore-verify-failed`` naming the paths where the tree now
    differs from the checkpoint."""
    now = _after(backend, root)
    got = backend.tree_id(root, now.commit_id)
    if want == got:
        return
    wrong = path_checks.tree_differs(repository(backend, root), want, got)
    raise RestoreError(f"after restoring seq {target.seq}, {root} still differs from it "
                       f"at {path_checks.named(wrong) or 'its tree id only'}")


def _verify_paths(backend: Backend, job: _Job, before: str) -> None:
    assert job.paths is not None
    now = _after(backend, job.root)
    path_checks.verify_paths(repository(backend, job.root), job.root, job.target,
                               now=now.commit_id, before=before, paths=job.paths)
