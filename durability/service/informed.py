"""The service's captures, informed by its internal watches
(``durability.watch.tracked``): a capture of a worktree seen before stages
only the paths that changed (git), and a call after which nothing changed is
answered with the previous checkpoint without running jj or scanning (both
backends).  Why the quiet answer keeps contract 2: docs/DESIGN.md.

Ahead of the hook (jj, whose commits name no attempt): once a watched tree
has been still for ``settle_s``, the service snapshots it; a request whose
barrier then proves nothing changed since that snapshot began is recorded
from it (``Capturer.record_snapshot``), so the hook waits for no jj run.
The latest snapshot of a still tree also answers a new attempt's request
(another session, sub-agent or simultaneous call) the same way.  Why this
keeps contract 2: docs/DESIGN.md and docs/decisions/0047.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import filelock
import pygit2

from durability.backends.base import MOVING, Snapshot
from durability.backends.git import index_seen
from durability.backends.index_lock import Identity, identity
from durability.backends.jj import repo_dir
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.ground.errors import DurabilityError
from durability.ground.ids import missing_repository_part
from durability.store import AttemptKey, EngineError, NotFound, Store
from durability.store.clock import SYSTEM_TIMER, Timer
from durability.watch.changed import Informed
from durability.watch.tracked import Tracker

__all__ = ["InformedCaptures"]

log = logging.getLogger("durability.service")

# The quiet answer takes the worktree lock only if it is free at once: a
# capture by another process holds it, and then the full path waits its turn.
_LOCK_WAIT_S = 0.05
# A warming scan waits this long for the worktree lock (another process's
# capture), then leaves the scan to the first request.
_WARM_LOCK_S = 5.0
# Attempts remembered per worktree while its tree stays the same.
_KEYS_PER_WORKTREE = 64
# A snapshot ahead of the hook that nobody used (the tree moved on first)
# doubles the stillness the next one waits for, up to this: a tool that
# writes for minutes costs a few wasted jj runs, not one per pause.
_SETTLE_MAX_S = 1.0


class InformedCaptures:
    """Runs the coalescer's batches: informed, quiet, or a full capture."""

    def __init__(self, capturer: Capturer, tracker: Tracker, store: Callable[[], Store],
                 *, rescan_s: float = 60.0, timer: Timer = SYSTEM_TIMER,
                 settle_s: float = 0.0) -> None:
        self.capturer = capturer
        self.rescan_s = rescan_s
        #: Decides when a rescan is due (a test moves it).
        self.timer = timer
        #: Per worktree: when its last full capture began (monotonic).
        self._full_at: dict[Path, float] = {}
        self.tracker = tracker
        self._store = store
        self._lock = threading.Lock()
        #: Per worktree, per attempt: the answer of the last capture, valid
        #: for as long as no event arrives (the tree is still the one it saw).
        self._answers: dict[Path, dict[AttemptKey, Outcome]] = {}
        #: Per jj worktree: jj's operation heads right after that capture.
        self._ops: dict[Path, tuple[str, ...] | None] = {}
        #: Per git worktree: its private index file and that file's identity
        #: as that capture left it (another process's write changes it).
        self._indexes: dict[Path, tuple[Path, Identity | None]] = {}
        #: Per jj worktree: the snapshot of its tree as of the last take
        #: (a capture's, or one taken ahead of the hook), while quiet.
        self._snaps: dict[Path, Snapshot] = {}
        #: One batch or snapshot ahead at a time per worktree, so a take and
        #: the snapshot that follows it are never split by another take.
        self._busy: dict[Path, threading.Lock] = {}
        #: Batches answered without a capture, captured with changed paths
        #: only, and captured with a full scan (the ping shows them).
        self.quiet = 0
        self.informed = 0
        self.full = 0
        #: Snapshots taken ahead of the hook, and batches answered from a
        #: snapshot without a jj run of their own.
        self.ahead = 0
        self.from_snapshot = 0
        self.settle_s = settle_s
        self._settler: _Settler | None = None
        if settle_s > 0:
            self._settler = _Settler(self, settle_s, timer)
            tracker.on_change = self._settler.changed

    def close(self) -> None:
        """Stop snapshotting ahead (the tracker is closed by its owner)."""
        if self._settler is not None:
            self._settler.stop()

    def _busy_lock(self, worktree: Path) -> threading.Lock:
        with self._lock:
            return self._busy.setdefault(worktree, threading.Lock())

    def answerable(self, worktree: Path) -> bool:
        """Whether a request for ``worktree`` would likely be answered from
        what is known, with no capture (a hint: the coalescer then waits out
        no burst; the answer itself is decided behind a barrier)."""
        with self._lock:
            known = worktree in self._snaps or bool(self._answers.get(worktree))
        return known and not self.tracker.stirred(worktree)

    def run_batch(self, requests: list[CaptureRequest], *, lock_timeout_s: float) -> list[Outcome]:
        with self._busy_lock(requests[0].worktree):
            return self._run_batch(requests, lock_timeout_s=lock_timeout_s)

    def _run_batch(self, requests: list[CaptureRequest], *,
                   lock_timeout_s: float) -> list[Outcome]:
        worktree = requests[0].worktree
        informed = self._prepare(worktree)
        if informed is not None and self._tracked_ignored_changed(worktree):
            # A file the ignore rules match but the tree holds changed: no
            # event counted it, a full capture takes it.
            informed = None
        if informed is not None and self._rescan_due(worktree):
            # Some writes make no event at all (an mmap write, a hard link
            # made from outside): a full capture now and then bounds how long
            # one can go untaken.
            informed = None
        if informed is not None and informed.quiet:
            answers = self._quiet_answers(worktree, requests)
            if answers is not None:
                self.quiet += 1
                return answers
            answers = self._snapshot_answers(worktree, requests)
            if answers is not None:
                self.from_snapshot += 1
                return answers
        else:
            self._forget(worktree)  # the tree moved on: no earlier answer stands
        requests = [_with_paths(r, informed) for r in requests]
        if informed is not None and informed.paths is not None:
            self.informed += 1
        else:
            self.full += 1
            with self._lock:
                self._full_at[worktree] = self.timer.monotonic()
        outcomes = self.capturer.capture(requests, lock_timeout_s=lock_timeout_s)
        self._remember(worktree, requests, outcomes)
        return outcomes

    def _prepare(self, worktree: Path, *, barrier: bool = True) -> Informed | None:
        """The internal watch's word, or None: a capture never fails because
        of the watch that only makes it cheaper."""
        try:
            return self.tracker.prepare(worktree, barrier=barrier)
        except Exception:
            # Whatever it took is covered: this capture scans the whole tree.
            log.exception("internal watch of %s failed; capturing the whole tree", worktree)
            return None

    def _tracked_ignored_changed(self, worktree: Path) -> bool:
        """Whether an ignored path that changed is in the last checkpoint's
        tree (tracked all the same: ``git add -f``, or before the rule)."""
        roots = self.tracker.ignored_changed(worktree)
        if roots is not None and not roots:
            return False
        with self._lock:
            known = list(self._answers.get(worktree, {}).values())
        commit_id = next((o.commit_id for o in known if o.commit_id), None)
        if roots is None or commit_id is None:
            return True  # cannot tell: capture
        try:
            # The repository holding the checkpoints (a git worktree's private
            # store, decision 0049), not necessarily the worktree's own.
            from durability.backends import backend_name
            from durability.backends.base import backend_type

            store = backend_type(backend_name(worktree)).checkpoint_repository(worktree)
            tree = store[commit_id].peel(pygit2.Commit).tree
        except Exception:  # no repository, or the commit is gone: capture
            return True
        return any(_in_tree(tree, root) for root in roots)

    def _rescan_due(self, worktree: Path) -> bool:
        if self.rescan_s <= 0:
            return False
        with self._lock:
            at = self._full_at.get(worktree)
        return at is None or self.timer.monotonic() - at >= self.rescan_s

    def stats(self) -> dict[str, Any]:
        """The counters the ping answer carries under ``informed``."""
        t = self.tracker
        return {"quiet": self.quiet, "informed": self.informed, "full": self.full,
                "ahead": self.ahead, "from_snapshot": self.from_snapshot,
                "worktrees": len(t.worktrees()), "watches": t.watches(), "armed": t.armed,
                "evicted": t.evicted, "refused": t.refused, "rearmed": t.rearmed}

    # -- the quiet answer ----------------------------------------------------

    def _quiet_answers(self, worktree: Path,
                       requests: list[CaptureRequest]) -> list[Outcome] | None:
        """Each request's answer from the last capture, or None (capture).

        Exactly what the full path would answer on an unchanged tree: a
        request already on record is answered from its record, one past its
        deadline expires, and every other dedups onto its attempt's latest
        checkpoint, which must still be the one remembered (another process
        may have recorded one since)."""
        with self._lock:
            known = dict(self._answers.get(worktree, {}))
            ops = self._ops.get(worktree)
            index = self._indexes.get(worktree)
        if any(r.key not in known for r in requests):
            return None
        if ops is not None and _op_heads(worktree) != ops:
            # A jj command (describe, new, a commit in another workspace)
            # may have moved @ without touching a file: jj must answer.
            return None
        try:
            lock = self.capturer.lock(worktree, _LOCK_WAIT_S)
            lock.acquire()
        except (filelock.Timeout, DurabilityError, OSError):
            return None
        try:
            if index is not None and identity(index[0]) != index[1]:
                # Another process wrote the git private index (a restore, a
                # capture without the service): what it tracks now (a
                # restored file the rules ignore) no event says (decision 0064).
                return None
            answers = []
            for request in requests:
                answer = self.capturer.settled(request) or self._dedup(request, known[request.key])
                if answer is None:
                    return None
                answers.append(answer)
            return answers
        finally:
            lock.release()

    def _snapshot_answers(self, worktree: Path,
                          requests: list[CaptureRequest]) -> list[Outcome] | None:
        """Each request recorded from the worktree's latest snapshot (jj),
        or None (capture).  Only when the barrier just proved nothing changed
        since the take before that snapshot began (the caller saw quiet), and
        jj's operation heads are still the ones after it."""
        with self._lock:
            snap = self._snaps.get(worktree)
            ops = self._ops.get(worktree)
        if snap is None or ops is None or _op_heads(worktree) != ops:
            return None
        try:
            lock = self.capturer.lock(worktree, _LOCK_WAIT_S)
            lock.acquire()
        except (filelock.Timeout, DurabilityError, OSError):
            return None
        try:
            outcomes = self.capturer.record_snapshot(requests, snap)
        finally:
            lock.release()
        self._remember(worktree, requests, outcomes, snap)
        return outcomes

    # -- a head start -----------------------------------------------------------

    def warm(self, worktree: Path) -> bool:
        """Arm the internal watch of ``worktree`` now and, for git, scan it
        whole (a capture that records nothing: an unpinned commit), so the
        first request for it is an informed capture, not a full scan and an
        arming of its own (decision 0062).  False when nothing was done (it
        cannot be watched, its lock is held, the scan failed): the first
        request then does it all, as without this.

        Contract 2 holds as for any capture: the take comes before the scan
        begins, so a change made before it is in the scan and one made
        after it is in the take of the request's capture, behind its barrier."""
        with self._busy_lock(worktree):
            if worktree in self.tracker.worktrees():
                return False  # a request came first: it did all this
            informed = self._prepare(worktree)  # arms; the first take names nothing
            if informed is None:
                return False
            if (worktree / ".jj").is_dir():
                return True  # jj reads its whole tree on every snapshot: the watch was the cost
            self.tracker.ignored_changed(worktree)  # the scan takes them all
            began = self.timer.monotonic()
            if self._locked_snapshot(worktree, _WARM_LOCK_S, "scanning") is None:
                return False
            with self._lock:
                self._full_at[worktree] = began
            return True

    # -- ahead of the hook -----------------------------------------------------

    def settle(self, worktree: Path, *, barrier: bool = True) -> bool:
        """Snapshot ``worktree`` now (its tree has been still), so the next
        request is recorded from it if nothing changes first.  False when
        nothing was taken (not a watched jj worktree, busy, quiet already,
        or it failed: then the next request captures, as without this).

        ``barrier=False`` (the settle thread, woken by an event already
        delivered): the take it starts from waits for no barrier (1-2.5 ms
        sooner).  A change made before it whose event is still on its way is
        in the snapshot, which starts after the take, and its late event only
        makes the request's take (behind its barrier) not quiet: a capture."""
        if not (worktree / ".jj").is_dir() or worktree not in self.tracker.worktrees():
            return False
        if missing_repository_part(worktree) is not None:
            # Being deleted: the change that woke us may be an rm -rf's first
            # file, and a jj run now writes where it is removing.
            return False
        busy = self._busy_lock(worktree)
        if not busy.acquire(blocking=False):
            return False  # a batch is capturing it: that capture is as good
        try:
            return self._settle(worktree, barrier)
        finally:
            busy.release()

    def _settle(self, worktree: Path, barrier: bool) -> bool:
        informed = self._prepare(worktree, barrier=barrier)  # the take this snapshot starts from
        if informed is None:
            return False
        if informed.quiet:
            return False  # nothing changed since the last take: what we hold stands
        self._forget(worktree)
        # The snapshot is full (jj scans everything), so ignored paths that
        # changed so far are in it, and the rescan clock starts again.
        self.tracker.ignored_changed(worktree)
        began = self.timer.monotonic()
        snap = self._locked_snapshot(worktree, _LOCK_WAIT_S, "snapshot ahead of the hook of")
        if snap is None:
            return False
        if any(s.reason == MOVING for s in snap.skipped):
            self.tracker.lost(worktree)
            return False
        ops = _op_heads(worktree)
        with self._lock:
            self._snaps[worktree] = snap
            self._ops[worktree] = ops
            self._full_at[worktree] = began
        self.ahead += 1
        return True

    def _locked_snapshot(self, worktree: Path, wait_s: float, what: str) -> Snapshot | None:
        """A snapshot of ``worktree`` that records nothing, under its lock
        (waited for ``wait_s``); None when the lock or the snapshot failed,
        and then the take before it counts as lost (it found changes that
        nobody captured): the next request scans whole."""
        try:
            lock = self.capturer.lock(worktree, wait_s)
            lock.acquire()
        except (filelock.Timeout, DurabilityError, OSError):
            self.tracker.lost(worktree)
            return None
        try:
            if missing_repository_part(worktree) is not None:  # being deleted meanwhile
                self.tracker.lost(worktree)
                return None
            return self.capturer.backend(worktree).snapshot(worktree)
        except Exception as exc:
            log.info("%s %s failed: %s", what, worktree, exc)
            self.tracker.lost(worktree)
            return None
        finally:
            lock.release()

    def _dedup(self, request: CaptureRequest, last: Outcome) -> Outcome | None:
        try:
            latest = self._store().checkpoint(request.key)
        except (NotFound, EngineError):
            return None
        if (latest.seq, latest.commit_id) != (last.seq, last.commit_id):
            return None
        return Outcome(request.request_id, last.seq, last.commit_id, deduped=True,
                       skipped=last.skipped)

    # -- bookkeeping ---------------------------------------------------------

    def _remember(self, worktree: Path, requests: list[CaptureRequest],
                  outcomes: list[Outcome], snap: Snapshot | None = None) -> None:
        if not any(o.fresh for o in outcomes):
            # No snapshot ran (it failed, or every request was answered from
            # the record or expired): the paths taken were never staged.
            self.tracker.lost(worktree)
            self._forget(worktree)
            return
        usable = [(r.key, o) for r, o in zip(requests, outcomes, strict=True)
                  if o.fresh and not any(s.reason == MOVING for s in o.skipped)]
        ops = _op_heads(worktree)
        seen = index_seen(worktree)
        if ops is None and seen is None:
            # A git worktree whose index this process no longer holds open:
            # another process's write of it could not be told, so no quiet
            # answer rests on this capture.
            usable = []
        if snap is None and ops is not None:
            snap = self.capturer.snapshots.get(worktree)
            if snap is not None and (any(s.reason == MOVING for s in snap.skipped)
                                     or all(o.commit_id != snap.commit_id for o in outcomes)):
                snap = None  # not this batch's snapshot, or a tree still moving
        with self._lock:
            self._ops[worktree] = ops
            if seen is not None:
                self._indexes[worktree] = seen
            else:
                self._indexes.pop(worktree, None)
            if snap is not None:
                self._snaps[worktree] = snap
            else:
                self._snaps.pop(worktree, None)
            known = self._answers.setdefault(worktree, {})
            for request in requests:
                known.pop(request.key, None)
            known.update(usable)
            while len(known) > _KEYS_PER_WORKTREE:
                known.pop(next(iter(known)))
            tracked = set(self.tracker.worktrees())
            for gone in [w for w in self._answers if w not in tracked]:
                del self._answers[gone]
                self._ops.pop(gone, None)
            for gone in [w for w in self._indexes if w not in tracked]:
                del self._indexes[gone]
            for gone in [w for w in self._full_at if w not in tracked]:
                del self._full_at[gone]
            for gone in [w for w in self._snaps if w not in tracked]:
                del self._snaps[gone]

    def _forget(self, worktree: Path) -> None:
        with self._lock:
            self._answers.pop(worktree, None)
            self._ops.pop(worktree, None)
            self._indexes.pop(worktree, None)
            self._snaps.pop(worktree, None)


class _Settler:
    """The thread that snapshots watched jj worktrees ahead of the hook,
    once each has been still for its settle time."""

    def __init__(self, captures: InformedCaptures, settle_s: float, timer: Timer) -> None:
        self._captures = captures
        self._settle_s = settle_s
        self._timer = timer
        self._cond = timer.condition()
        #: Worktree -> when its tree last changed.
        self._pending: dict[Path, float] = {}
        #: Worktree -> the stillness its next snapshot waits for.
        self._wait: dict[Path, float] = {}
        #: Worktree -> whether it is a jj worktree (git commits name their
        #: attempt: no snapshot can be taken before the request).
        self._jj: dict[Path, bool] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="informed-settle", daemon=True)
        self._thread.start()

    def changed(self, worktree: Path) -> None:
        """A change of ``worktree``'s tree (on the observer thread)."""
        jj = self._jj.get(worktree)
        if jj is None:
            jj = self._jj[worktree] = (worktree / ".jj").is_dir()
        if not jj:
            return
        with self._cond:
            self._pending[worktree] = self._timer.monotonic()
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(10)

    def _loop(self) -> None:
        while True:
            with self._cond:
                due = self._due()
                while not due and not self._stopping:
                    self._timer.wait_on(self._cond, self._next_wait())
                    due = self._due()
                if self._stopping:
                    return
            for worktree in due:
                self._one(worktree)

    def _due(self) -> list[Path]:
        """The worktrees still long enough now (taken off the list); the
        caller holds the condition."""
        now = self._timer.monotonic()
        due = [w for w, at in self._pending.items()
               if now - at >= self._wait.get(w, self._settle_s)]
        for worktree in due:
            del self._pending[worktree]
        return due

    def _next_wait(self) -> float | None:
        if not self._pending:
            return None
        now = self._timer.monotonic()
        return max(min(at + self._wait.get(w, self._settle_s) - now
                       for w, at in self._pending.items()), 0.001)

    def _one(self, worktree: Path) -> None:
        captures = self._captures
        used = captures.from_snapshot + captures.quiet
        try:
            took = captures.settle(worktree, barrier=False)
        except Exception:
            log.exception("snapshot ahead of the hook of %s failed", worktree)
            return
        with self._cond:
            if took and worktree in self._pending:
                # Changed again during it: unused, and the next one waits longer.
                self._wait[worktree] = min(self._wait.get(worktree, self._settle_s) * 2,
                                           _SETTLE_MAX_S)
            elif took or captures.from_snapshot + captures.quiet != used:
                self._wait.pop(worktree, None)


def _in_tree(tree: Any, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


def _op_heads(worktree: Path) -> tuple[str, ...] | None:
    """jj's operation heads for a jj worktree (one listing), else None.

    Read after a capture, they can include a jj command that ran in the few
    milliseconds after its snapshot: a later quiet answer then names the
    snapshot's commit, whose tree is still the tree on disk."""
    if not (worktree / ".jj").is_dir():
        return None
    try:
        return tuple(sorted(os.listdir(repo_dir(worktree) / "op_heads" / "heads")))
    except OSError:
        return (os.urandom(8).hex(),)  # unreadable: equal to nothing, never quiet


def _with_paths(request: CaptureRequest, informed: Informed | None) -> CaptureRequest:
    """``request`` with the internal watch's changed paths, unless it brings
    its own (a user's watch: the union is staged) or nothing is known."""
    if request.changed_paths is not None or informed is None or informed.paths is None:
        return request
    return dataclasses.replace(request, changed_paths=informed.paths)
