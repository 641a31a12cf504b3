"""Capture a worktree and record the checkpoint: the one code path shared by
the service, the in-process fallback, the CLI and restore.

A capture runs under a per-worktree file lock (contract 1 in docs/DESIGN.md: never two captures
of one worktree at once, across processes too) and records every request it
answers while still holding the lock, so checkpoint order is capture order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from durability.backends import Backend, Skipped, Snapshot, Stamp, backend_for
from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import ingest_records, write_gap
from durability.ground.errors import CaptureError, DurabilityError, InsecurePath, LockTimeout
from durability.ground.paths import ensure_private_dir
from durability.store import (
    AttemptKey,
    Checkpoint,
    EngineError,
    NewCheckpoint,
    NotFound,
    RecordRefused,
    Store,
    now_ms,
)
from durability.store.boundaries import CallInfo, NewBoundary
from durability.store.db import Connection
from durability.store.models import Recorded

__all__ = ["EXPIRED", "CaptureRequest", "Capturer", "Outcome", "expired_outcome"]


@dataclass(frozen=True)
class CaptureRequest:
    """One request for a snapshot of a worktree on behalf of an attempt."""

    key: AttemptKey
    worktree: Path
    source: str
    request_id: str
    tool_use_id: str | None = None
    label: str | None = None
    #: The harness that reported the call and, for a sub-agent, its identity.
    harness: str | None = None
    agent_id: str | None = None
    agent_type: str | None = None
    session_id: str | None = None
    #: Worktree-relative paths a watcher saw change since its previous request
    #: (None: unknown).  Only a watcher that can prove it missed nothing (no
    #: queue overflow, an event barrier up to this request) may set it; the
    #: first request of a watch must leave it None.  See docs/explanation/git-backend.md.
    changed_paths: frozenset[str] | None = None
    #: The requester's deadline (ms since the epoch): past it the requester
    #: has given up waiting and records the request itself, so no capture may
    #: begin for it here, nor a gap be filed (docs/RELIABILITY.md).
    not_after_ms: int | None = None
    #: A hook's tool call: set, an answered request is also the call's
    #: boundary (``capture.boundary``, issue 24).
    call: CallInfo | None = None

    def boundary(self, seq: int, commit_id: str) -> NewBoundary | None:
        """The call's boundary, naming checkpoint ``seq`` (``commit_id``) of
        its attempt; None for a request that reports no tool call."""
        call = self.call
        if call is None:
            return None
        return NewBoundary(
            key=self.key, request_id=self.request_id, checkpoint_seq=seq, commit_id=commit_id,
            worktree=str(self.worktree), harness=self.harness, tool_use_id=self.tool_use_id,
            tool_name=call.tool_name, event=call.event, transcript_path=call.transcript_path,
            transcript_bytes=call.transcript_bytes)

    def expired(self) -> bool:
        return self.not_after_ms is not None and now_ms() > self.not_after_ms


#: The error code of a request answered past its deadline: nothing recorded.
EXPIRED = "expired"


@dataclass(frozen=True)
class Outcome:
    """The answer to one request: a seq and commit, or an error code."""

    request_id: str
    seq: int | None = None
    commit_id: str | None = None
    deduped: bool = False
    error_code: str | None = None
    error_message: str | None = None
    gap_recorded: bool = False
    #: Paths the checkpoint left out (each filed as a gap once per attempt).
    skipped: tuple[Skipped, ...] = ()
    #: Answered by a snapshot taken for this batch (not the record of an
    #: earlier one): the service's internal watch reads it, the wire never.
    fresh: bool = False
    #: The call's boundary was recorded with the checkpoint, in its write
    #: (decision 0070): ``capture.boundary`` has nothing left to record.
    boundary: bool = False

    @property
    def ok(self) -> bool:
        return self.error_code is None

    @classmethod
    def from_answer(cls, request_id: str, answer: Mapping[str, Any]) -> Outcome:
        """The outcome a service answer carries: the one place the wire's
        answer is read (the hook's fast path reads its two flags by hand)."""
        if answer.get("ok"):
            skipped = tuple(Skipped(str(s["path"]), str(s["reason"]))
                            for s in answer.get("skipped") or ())
            return cls(request_id, seq=int(answer["seq"]), commit_id=str(answer["commit_id"]),
                       deduped=bool(answer.get("deduped")), skipped=skipped)
        error = answer.get("error") or {}
        return cls(request_id, error_code=str(error.get("code") or "internal-error"),
                   error_message=str(error.get("message")),
                   gap_recorded=bool(answer.get("gap_recorded")))

    def to_dict(self) -> dict[str, Any]:
        """The outcome as the socket and the CLI's JSON show it.

        A plain dict, not a model of ``durability.output``: the service
        answers every hook with it and the hook's in-process capture builds
        it, paths that never load pydantic (measured: 0.13 us here against
        3.3 us to build and dump a model, and pydantic's ~60 ms import)."""
        if self.ok:
            done: dict[str, Any] = {"seq": self.seq, "commit_id": self.commit_id,
                                    "deduped": self.deduped}
            if self.skipped:  # only then: a complete capture's answer is unchanged
                done["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
            return done
        return {"error": {"code": self.error_code, "message": self.error_message},
                "gap_recorded": self.gap_recorded}


def _boundary_part(request: CaptureRequest) -> tuple[
        Callable[[Connection, Recorded, str, int], object] | None, list[bool]]:
    """For a request that reports a tool call: the part of its checkpoint's
    write that records the call's boundary (decision 0070), and a list that
    holds True once that part finished (a part the database refused is
    undone alone, and the boundary is then recorded on its own, as before)."""
    if request.call is None:
        return None, []
    finished: list[bool] = []

    def part(conn: Connection, done: Recorded, host: str, now: int) -> None:
        from durability.store.boundaries import insert_boundary

        boundary = request.boundary(done.seq, done.commit_id)
        assert boundary is not None
        insert_boundary(conn, host, boundary, now)
        finished.append(True)

    return part, finished


class Capturer:
    """Takes snapshots and records them; files a gap for every failure."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Callable[[], Store],
        env: Mapping[str, str] = os.environ,
        deadline: float | None = None,
    ) -> None:
        self.settings = settings
        self._store = store
        self._env = env
        #: When the requester must have its answer (``time.monotonic()``), if
        #: it has a budget (the hook): jj's timeout is cut to fit it.
        self._deadline = deadline
        #: Per worktree, its last snapshot (the service's internal watch may
        #: answer a later request from it: ``service.informed``).
        self.snapshots: dict[Path, Snapshot] = {}

    def lock(self, worktree: Path, timeout_s: float, *,
             held: list[int] | None = None) -> filelock.BaseFileLock:
        """The cross-process lock that serialises captures of ``worktree``
        (an ``flock``).  ``held`` collects the locked descriptor when it is
        taken, for a child that must keep the lock if this process dies
        first (``proc.run``'s ``hold``)."""
        ensure_private_dir(self.settings.lock_dir)
        digest = hashlib.sha256(os.fsencode(worktree)).hexdigest()[:32]
        return filelock.FileLock(self.settings.lock_dir / f"{digest}.lock", timeout=timeout_s,
                                 on_acquired=None if held is None else held.append)

    def backend(self, worktree: Path) -> Backend:
        # jj's timeout is cut to the deadline by the backend as each jj
        # command starts: whatever ran before (the worktree lock, the store's
        # opening, which on PostgreSQL includes psycopg's import, the jj
        # --version check) comes out of jj's share.
        return backend_for(worktree, timeout_s=self.settings.jj_timeout_s, env=self._env,
                           max_new_file_size=self.settings.max_new_file_size,
                           deadline=self._deadline)

    def capture(self, requests: list[CaptureRequest], *, lock_timeout_s: float) -> list[Outcome]:
        """One snapshot of the requests' worktree answers all of them."""
        worktree = requests[0].worktree
        try:
            lock = self.lock(worktree, lock_timeout_s)
            lock.acquire()
        except filelock.Timeout:
            err = LockTimeout(f"worktree {worktree} stayed locked for {lock_timeout_s:g}s")
            return [self.fail(r, err) for r in requests]
        except (InsecurePath, OSError) as exc:
            # The lock folder lives in the state folder: if it cannot be made,
            # neither can the record.
            unusable = DurabilityError(f"state folder unusable: {exc}", code="store-unavailable")
            return [self.fail(r, unusable) for r in requests]
        try:
            return self.capture_locked(requests)
        finally:
            lock.release()

    def capture_locked(self, requests: list[CaptureRequest]) -> list[Outcome]:
        """As ``capture``, for a caller that already holds the worktree lock.

        Under the lock, before the snapshot begins: a request past its
        deadline is not captured (its requester has moved on, and the tree
        may already hold later calls), and a request already on record (a
        late answer of the service the hook gave up on) is answered from the
        record instead of captured again.
        """
        settled = {id(r): o for r in requests if (o := self.settled(r)) is not None}
        todo = [r for r in requests if id(r) not in settled]
        if todo:
            self._follow(todo[0].worktree)
        if todo:
            settled.update(zip(map(id, todo), self._snapshot(todo), strict=True))
        return [settled[id(r)] for r in requests]

    def _follow(self, worktree: Path) -> None:
        """A worktree moved here keeps its records (``capture.moved``)."""
        from durability.capture.moved import follow

        try:
            follow(self._store(), worktree)
        except EngineError:
            pass  # no store at hand: the record fails (or not) on its own

    def _snapshot(self, requests: list[CaptureRequest]) -> list[Outcome]:
        worktree = requests[0].worktree
        try:
            backend = self.backend(worktree)
            stamps = self._stamps(requests, backend.stamps_commits)
            snap = backend.snapshot(worktree, stamps, changed_paths=_changed_paths(requests))
        except CaptureError as exc:
            return [self.fail(r, exc) for r in requests]
        self.snapshots[worktree] = snap
        return [self._record(r, snap) for r in requests]

    def record_snapshot(self, requests: list[CaptureRequest], snap: Snapshot) -> list[Outcome]:
        """Answer ``requests`` with ``snap``, taken earlier of a tree that
        has not changed since it began (the caller proves it and holds the
        worktree lock): what ``capture_locked`` answers, without the jj run."""
        settled = {id(r): o for r in requests if (o := self.settled(r)) is not None}
        todo = [r for r in requests if id(r) not in settled]
        if todo:
            self._follow(todo[0].worktree)
        settled.update((id(r), self._record(r, snap)) for r in todo)
        return [settled[id(r)] for r in requests]

    def settled(self, request: CaptureRequest) -> Outcome | None:
        """The answer to a request that must not be captured now, if any."""
        if request.expired():
            return expired_outcome(request)
        try:
            found = self._store().request_record(request.request_id)
        except EngineError:
            return None  # no record to consult: capture, and let the record fail alone
        if isinstance(found, Checkpoint):
            return Outcome(request.request_id, found.seq, found.commit_id)
        if found is not None:
            return Outcome(request.request_id, error_code=found.reason,
                           error_message=f"already on record as a {found.reason} gap",
                           gap_recorded=True)
        return None

    def _stamps(self, requests: list[CaptureRequest], with_seq: bool) -> list[Stamp]:
        """One stamp per attempt in the batch, named after its first request
        (the one the store gives a new seq; the others dedup onto it)."""
        by_key: dict[AttemptKey, list[CaptureRequest]] = {}
        for request in requests:
            by_key.setdefault(request.key, []).append(request)
        return [
            Stamp(key=key, source=rs[0].source, request_ids=tuple(r.request_id for r in rs),
                  tool_use_id=rs[0].tool_use_id, label=rs[0].label,
                  seq=self._next_seq(key) if with_seq else None)
            for key, rs in by_key.items()
        ]

    def _next_seq(self, key: AttemptKey) -> int | None:
        """The seq the store will give this attempt's next checkpoint.

        Seq is the store's (contract 3), assigned after the capture.  A
        backend that writes a seq into its commit (git trailers) reads it here,
        under the worktree lock that every capture of this worktree holds, so
        no other capture can take it in between; the commit also carries the
        request ids, and the store's row stays the authority if the two ever
        differ (a row lost to a store failure, a replayed request).
        """
        try:
            return self._store().checkpoint(key).seq + 1
        except NotFound:
            return 1
        except EngineError:
            return None

    def _record(self, request: CaptureRequest, snap: Snapshot) -> Outcome:
        new = NewCheckpoint(
            key=request.key, commit_id=snap.commit_for(request.key), change_id=snap.change_id,
            operation_id=snap.operation_id, worktree=str(request.worktree),
            source=request.source, request_id=request.request_id,
            tool_use_id=request.tool_use_id, label=request.label, harness=request.harness,
            agent_id=request.agent_id, agent_type=request.agent_type,
            session_id=request.session_id,
        )
        spooled = self._spooled_gap(request)
        if spooled is not None:
            return spooled
        then, recorded = _boundary_part(request)
        try:
            done = self._store().record_checkpoint(new, then=then)
        except RecordRefused as exc:
            # Already a gap (filed by whoever gave up first): that is its record.
            return Outcome(request.request_id, error_code=exc.gap_reason,
                           error_message=str(exc), gap_recorded=True)
        except EngineError as exc:
            # The commit is captured and pinned; only the row is missing.  Say
            # which commit, so the gap itself points at the lost state.
            # Not ingested now: the store just failed, and waiting out its
            # busy timeout a second time would only delay the answer.
            if snap.skipped:
                from durability.gaps.skipped import file_path_gaps

                file_path_gaps(self.settings, None, request, snap.skipped)
            return self.fail(request, exc, detail=f"commit {new.commit_id}: {exc}",
                             ingest=False)
        if snap.skipped:
            from durability.gaps.skipped import file_path_gaps

            file_path_gaps(self.settings, self._store, request, snap.skipped)
        return Outcome(request.request_id, done.seq, done.commit_id, done.deduped,
                       skipped=snap.skipped, fresh=True, boundary=bool(recorded))

    def _spooled_gap(self, request: CaptureRequest) -> Outcome | None:
        """The request's answer when its requester already filed it as a gap
        in the spool (a hook's watchdog, past its budget, writes only there)
        and the store does not know yet: the gap is ingested first, so the
        store refuses the checkpoint as it refuses one for a gap it holds."""
        record = spool.find_request(self.settings.spool_dirs, request.key.run_id,
                                    request.request_id)
        if record is None:
            return None
        try:
            ingest_records(self._store(), [record])
        except EngineError:
            # The store is unreachable now: the spooled gap stays the record
            # (the service's next ingest moves it), no checkpoint beside it.
            return Outcome(request.request_id, error_code=str(record["reason"]),
                           error_message=f"request {request.request_id} is already on "
                                         f"record as a {record['reason']} gap",
                           gap_recorded=True)
        return None

    def fail(
        self, request: CaptureRequest, error: Exception, *, detail: str | None = None,
        ingest: bool = True,
    ) -> Outcome:
        """File a gap for a request that could not be captured (none past
        its deadline: its requester files that one)."""
        if request.expired():
            return expired_outcome(request)
        code = getattr(error, "code", "internal-error")
        record = spool.gap_record(
            run_id=request.key.run_id, request_id=request.request_id, reason=code,
            node_id=request.key.node_id, iteration=request.key.iteration,
            attempt=request.key.attempt, worktree=str(request.worktree),
            source=request.source, tool_use_id=request.tool_use_id,
            detail=detail or str(error),
        )
        recorded = write_gap(self.settings, record, self._store if ingest else None)
        return Outcome(request.request_id, error_code=code, error_message=str(error),
                       gap_recorded=recorded)


def expired_outcome(request: CaptureRequest) -> Outcome:
    """The answer to a request past its deadline: nothing recorded for it."""
    return Outcome(request.request_id, error_code=EXPIRED, error_message=(
        f"request {request.request_id} passed its deadline before it was recorded; "
        "its requester records it"))


def _changed_paths(requests: list[CaptureRequest]) -> frozenset[str] | None:
    """What changed since the batch's requesters last asked: the union of
    their paths, or None (scan everything) when any of them does not know."""
    union: set[str] = set()
    for request in requests:
        if request.changed_paths is None:
            return None
        union |= request.changed_paths
    return frozenset(union)
