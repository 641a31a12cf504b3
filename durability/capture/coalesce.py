"""Per-worktree queues that serialise and coalesce capture requests.

Contract 2 (docs/DESIGN.md): requests that arrive while a capture of their worktree is running
wait for the *next* capture, which starts after they arrived; one capture then
answers all of them.  A batch is cut the moment a capture begins, so a request
is never answered by a capture that began before it was received.

Bursts: when requests queued up while a capture ran (parallel tool calls, many
agents on one tree), the next capture waits until arrivals have paused for
``burst_quiet_s`` (at most ``burst_max_s``), so a burst of hook processes that
trickle in over a few hundred ms (each a Python start) costs two or three jj
snapshots instead of one per arrival; unless ``answerable`` says the batch
would be answered without a capture (the service's internal watch saw
nothing change), which waits for nothing.  A request reaching an idle
worktree is captured at once: sequential tool calls never wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from durability.capture.capturer import CaptureRequest, Outcome, expired_outcome

__all__ = ["Coalescer", "coalesced_capture"]

RunBatch = Callable[[list[CaptureRequest]], list[Outcome]]


class _Queue:
    def __init__(self) -> None:
        self.pending: list[tuple[CaptureRequest, Future[Outcome]]] = []
        self.wake = threading.Condition()
        self.captures = 0
        self.last_arrival = 0.0
        #: Requests were waiting when the last capture finished.
        self.burst = False


class Coalescer:
    """One worker thread per busy worktree; idle workers exit."""

    def __init__(
        self,
        run_batch: RunBatch,
        *,
        idle_exit_s: float = 30.0,
        burst_quiet_s: float = 0.0,
        burst_max_s: float = 0.0,
        answerable: Callable[[Path], bool] | None = None,
    ) -> None:
        self._run_batch = run_batch
        self._answerable = answerable
        self._idle_exit_s = idle_exit_s
        self._burst_quiet_s = burst_quiet_s
        self._burst_max_s = burst_max_s
        self._lock = threading.Lock()
        self._queues: dict[Path, _Queue] = {}
        self._threads: dict[Path, threading.Thread] = {}
        self._stopping = False
        #: Captures run so far, all worktrees (the benchmark reads it).
        self.captures = 0
        #: Requests dropped because their deadline passed before a capture
        #: began (a stopped service woken up, a long queue).
        self.expired = 0

    def submit(self, request: CaptureRequest) -> Future[Outcome]:
        future: Future[Outcome] = Future()
        with self._lock:
            if self._stopping:
                raise RuntimeError("the service is shutting down")
            queue = self._queues.get(request.worktree)
            if queue is None:
                queue = self._queues[request.worktree] = _Queue()
                thread = threading.Thread(
                    target=self._work, args=(request.worktree, queue),
                    name=f"capture:{request.worktree}", daemon=True,
                )
                self._threads[request.worktree] = thread
                thread.start()
            with queue.wake:
                queue.pending.append((request, future))
                queue.last_arrival = time.monotonic()
                queue.wake.notify()
        return future

    def queued(self) -> int:
        """Requests received and waiting for a capture to begin (all worktrees)."""
        with self._lock:
            return sum(len(q.pending) for q in self._queues.values())

    def _take(self, worktree: Path, queue: _Queue) -> list[tuple[CaptureRequest, Future[Outcome]]]:
        """Wait for requests; an empty list means the worker should exit."""
        with queue.wake:
            while not queue.pending and not self._stopping:
                if not queue.wake.wait(self._idle_exit_s):
                    break
            if queue.burst and queue.pending and not self._can_answer(worktree):
                self._gather(queue)
        with self._lock, queue.wake:
            if not queue.pending:
                # Only forget our own queue: a new worker may already own the
                # worktree if a request came while this one was exiting.
                if self._queues.get(worktree) is queue:
                    self._queues.pop(worktree, None)
                    self._threads.pop(worktree, None)
                return []
            batch, queue.pending = queue.pending, []
        return self._drop_expired([(r, f) for r, f in batch if f.set_running_or_notify_cancel()])

    def _drop_expired(
        self, batch: list[tuple[CaptureRequest, Future[Outcome]]]
    ) -> list[tuple[CaptureRequest, Future[Outcome]]]:
        """Answer the requests whose requester gave up before this capture
        began, without capturing for them: a capture now would show the tree
        as it is now, later than their tool call, under their label."""
        live = []
        for request, future in batch:
            if request.expired():
                self.expired += 1
                future.set_result(expired_outcome(request))
            else:
                live.append((request, future))
        return live

    def _can_answer(self, worktree: Path) -> bool:
        try:
            return self._answerable is not None and self._answerable(worktree)
        except Exception:
            return False  # only a shortcut: wait out the burst as before

    def _gather(self, queue: _Queue) -> None:
        """Let a burst settle: wait until no request has arrived for the quiet
        period, or the longest wait has passed.  The caller holds ``queue.wake``."""
        start = time.monotonic()
        while not self._stopping:
            now = time.monotonic()
            left = min(queue.last_arrival + self._burst_quiet_s,
                       start + self._burst_max_s) - now
            if left <= 0:
                return
            queue.wake.wait(left)

    def _work(self, worktree: Path, queue: _Queue) -> None:
        while True:
            batch = self._take(worktree, queue)
            if not batch:
                with self._lock:
                    if self._queues.get(worktree) is not queue:
                        return
                continue
            self.captures += 1
            try:
                outcomes = self._run_batch([r for r, _ in batch])
            except BaseException as exc:  # never leave a caller waiting forever
                for _, fut in batch:
                    fut.set_exception(exc)
                continue
            for (_, fut), outcome in zip(batch, outcomes, strict=True):
                fut.set_result(outcome)
            with queue.wake:
                queue.burst = bool(queue.pending)

    def close(self, timeout_s: float = 30.0) -> None:
        """Answer what is queued, then stop every worker."""
        with self._lock:
            self._stopping = True
            queues = list(self._queues.values())
            threads = list(self._threads.values())
        for queue in queues:
            with queue.wake:
                queue.wake.notify_all()
        for thread in threads:
            thread.join(timeout_s)


def coalesced_capture(coalescer: Coalescer) -> Callable[[CaptureRequest], Outcome]:
    """A blocking capture through ``coalescer``."""

    def capture(request: CaptureRequest) -> Outcome:
        try:
            future = coalescer.submit(request)
        except RuntimeError as exc:  # shutting down
            return Outcome(request.request_id, error_code="service-unreachable",
                           error_message=str(exc))
        return future.result()

    return capture
