"""Contract 2 (docs/DESIGN.md): requests that arrive while a capture of their worktree runs are
all answered by the *next* capture, never by the running one.

Three levels: the ``Coalescer`` with a ``run_batch`` that blocks on an event
(exact batch boundaries), a real ``Capturer`` whose backend is held mid-capture,
and a real service whose jj is held by a gate file.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from durability.backends import Backend, Changes, Progress, Snapshot, Stamp, resolve_worktree
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.capture.coalesce import Coalescer
from durability.capture.inprocess import lazy_store
from durability.config import Settings
from durability.ground import client
from durability.store import AttemptKey, Store
from tests.helpers import GatedJj, commit_manifest, ping, start_service, wait_for

KEY = AttemptKey("run-c", "node", 0, 1)


def _request(worktree: Path, name: str) -> CaptureRequest:
    return CaptureRequest(key=KEY, worktree=worktree, source="hook", request_id=name)


class HeldBatches:
    """A ``run_batch`` that records each batch and blocks until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0

    def __call__(self, requests: list[CaptureRequest]) -> list[Outcome]:
        with self.lock:
            self.batches.append([r.request_id for r in requests])
            number = len(self.batches)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        self.entered.release()
        self.release.wait(30)
        with self.lock:
            self.running -= 1
        return [Outcome(r.request_id, seq=number, commit_id=f"{number:040x}") for r in requests]

    def wait_entered(self) -> None:
        assert self.entered.acquire(timeout=30), "no capture started"


@pytest.fixture
def held() -> Iterator[tuple[Coalescer, HeldBatches]]:
    run = HeldBatches()
    coalescer = Coalescer(run)
    yield coalescer, run
    run.release.set()
    coalescer.close()


def test_requests_during_a_capture_wait_for_the_next_one(
    held: tuple[Coalescer, HeldBatches], tmp_path: Path
) -> None:
    coalescer, run = held
    first = coalescer.submit(_request(tmp_path, "a"))
    run.wait_entered()  # capture 1 is running, holding only "a"
    later = [coalescer.submit(_request(tmp_path, n)) for n in ("b", "c", "d")]
    assert coalescer.queued() == 3
    assert not first.done() and not any(f.done() for f in later)
    run.release.set()
    assert first.result(30).seq == 1
    assert [f.result(30).seq for f in later] == [2, 2, 2]
    assert run.batches == [["a"], ["b", "c", "d"]]
    assert coalescer.captures == 2
    assert coalescer.queued() == 0


def test_every_request_is_answered_by_a_capture_that_began_after_it(
    held: tuple[Coalescer, HeldBatches], tmp_path: Path
) -> None:
    coalescer, run = held
    started_before: dict[str, int] = {}
    futures: dict[str, Future[Outcome]] = {}
    run.release.set()  # captures run freely; batches form by timing alone
    for i in range(60):
        name = f"r{i}"
        with run.lock:
            started_before[name] = len(run.batches)
        futures[name] = coalescer.submit(_request(tmp_path, name))
    answers = {name: f.result(30) for name, f in futures.items()}
    for name, outcome in answers.items():
        assert outcome.seq is not None
        # Batch numbers count from 1: an answer from batch n means capture n
        # began after the request, i.e. after `started_before` captures.
        assert outcome.seq > started_before[name], name
        assert name in run.batches[outcome.seq - 1]
    assert sorted(n for b in run.batches for n in b) == sorted(futures)
    assert coalescer.captures == len(run.batches) <= 60


def test_worktrees_are_captured_independently(
    held: tuple[Coalescer, HeldBatches], tmp_path: Path
) -> None:
    coalescer, run = held
    one = coalescer.submit(_request(tmp_path / "one", "x"))
    two = coalescer.submit(_request(tmp_path / "two", "y"))
    run.wait_entered()
    run.wait_entered()  # both captures run at once: one worktree does not block another
    assert run.max_running == 2
    run.release.set()
    assert one.result(30).ok and two.result(30).ok


def test_a_failing_batch_fails_its_requests_and_the_worker_goes_on(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def run_batch(requests: list[CaptureRequest]) -> list[Outcome]:
        calls.append([r.request_id for r in requests])
        if len(calls) == 1:
            raise RuntimeError("backend exploded")
        return [Outcome(r.request_id, seq=1, commit_id="0" * 40) for r in requests]

    coalescer = Coalescer(run_batch)
    try:
        with pytest.raises(RuntimeError, match="exploded"):
            coalescer.submit(_request(tmp_path, "a")).result(30)
        assert coalescer.submit(_request(tmp_path, "b")).result(30).seq == 1
    finally:
        coalescer.close()
    assert calls == [["a"], ["b"]]


def test_close_answers_what_is_queued_then_refuses(
    held: tuple[Coalescer, HeldBatches], tmp_path: Path
) -> None:
    coalescer, run = held
    first = coalescer.submit(_request(tmp_path, "a"))
    run.wait_entered()
    queued = coalescer.submit(_request(tmp_path, "b"))
    closer = threading.Thread(target=coalescer.close)
    closer.start()
    wait_for(lambda: _stopping(coalescer))
    run.release.set()
    closer.join(30)
    assert first.result(30).seq == 1 and queued.result(30).seq == 2
    with pytest.raises(RuntimeError):
        coalescer.submit(_request(tmp_path, "c"))


def _stopping(coalescer: Coalescer) -> bool:
    return bool(coalescer._stopping)


def test_idle_workers_exit_and_come_back_one_at_a_time(tmp_path: Path) -> None:
    done: list[str] = []
    lock = threading.Lock()
    running = [0, 0]  # now, most ever

    def run_batch(requests: list[CaptureRequest]) -> list[Outcome]:
        with lock:
            running[0] += 1
            running[1] = max(running)
            done.extend(r.request_id for r in requests)
        threading.Event().wait(0.001)
        with lock:
            running[0] -= 1
        return [Outcome(r.request_id, seq=1, commit_id="0" * 40) for r in requests]

    # Workers exit after 10 ms idle, so submissions keep racing a worker that
    # is on its way out: there must never be two workers for one worktree.
    coalescer = Coalescer(run_batch, idle_exit_s=0.01)
    try:
        for i in range(10):
            assert coalescer.submit(_request(tmp_path, f"r{i}")).result(30).ok
            wait_for(lambda: not _workers(coalescer), timeout=30)

        def submit_slowly(i: int) -> bool:
            threading.Event().wait((i % 7) * 0.003)
            return coalescer.submit(_request(tmp_path, f"s{i}")).result(30).ok

        with ThreadPoolExecutor(4) as pool:
            assert all(pool.map(submit_slowly, range(300)))
    finally:
        coalescer.close()
    assert len(done) == 310
    assert running[1] == 1


def _workers(coalescer: Coalescer) -> list[Any]:
    with coalescer._lock:
        return [t for t in coalescer._threads.values() if t.is_alive()]


# -- a real Capturer, held mid-capture ---------------------------------------


class HeldBackend:
    """Wraps the real jj backend: the first snapshot waits after jj has run."""

    def __init__(self, inner: Backend, entered: threading.Event,
                 release: threading.Event) -> None:
        self.inner = inner
        self.name = inner.name
        self.stamps_commits = inner.stamps_commits
        self.entered = entered
        self.release = release
        self.calls = 0

    def snapshot(self, worktree: Path, stamps: Sequence[Stamp] = (), *,
                 changed_paths: Collection[str] | None = None) -> Snapshot:
        snap = self.inner.snapshot(worktree, stamps, changed_paths=changed_paths)
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.release.wait(60)
        return snap

    def restore(self, worktree: Path, commit_id: str, *, pre_restore: str | None = None,
                paths: Sequence[str] | None = None, dry_run: bool = False,
                progress: Progress | None = None) -> Changes:
        return self.inner.restore(worktree, commit_id, pre_restore=pre_restore, paths=paths,
                                  dry_run=dry_run, progress=progress)

    def tree_id(self, worktree: Path, commit_id: str) -> str:
        return self.inner.tree_id(worktree, commit_id)


class HeldCapturer(Capturer):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings=settings, store=lazy_store(settings))
        self.entered = threading.Event()
        self.release = threading.Event()
        self._held: HeldBackend | None = None

    def backend(self, worktree: Path) -> Backend:
        if self._held is None:
            self._held = HeldBackend(super().backend(worktree), self.entered, self.release)
        return self._held


def test_real_capture_answers_late_requests_with_the_next_snapshot(
    repo: Path, settings: Settings
) -> None:
    root = resolve_worktree(repo)
    capturer = HeldCapturer(settings)
    coalescer = Coalescer(lambda reqs: capturer.capture(reqs, lock_timeout_s=60))
    try:
        first = coalescer.submit(_request(root, "first"))
        assert capturer.entered.wait(60)
        (root / "written-during-capture.txt").write_text("late\n")
        late = [coalescer.submit(_request(root, f"late-{i}")) for i in range(3)]
        capturer.release.set()
        a = first.result(60)
        answers = [f.result(60) for f in late]
    finally:
        capturer.release.set()
        coalescer.close()
    assert a.ok and a.seq == 1
    assert [o.seq for o in answers] == [2, 2, 2]
    assert [o.deduped for o in answers] == [False, True, True]
    assert "written-during-capture.txt" not in commit_manifest(root, str(a.commit_id))
    assert "written-during-capture.txt" in commit_manifest(root, str(answers[0].commit_id))
    assert coalescer.captures == 2
    assert [c.seq for c in Store(settings.database).checkpoints(KEY.run_id)] == [1, 2]


# -- end to end: a real service whose jj is held ----------------------------


def _capture_wire(worktree: Path, request_id: str) -> dict[str, Any]:
    return {"v": 1, "op": "capture", "request_id": request_id, "run_id": KEY.run_id,
            "node_id": KEY.node_id, "iteration": 0, "attempt": 1, "worktree": str(worktree),
            "source": "hook", "tool_use_id": request_id, "timeout_ms": 120_000}


def test_service_answers_requests_sent_during_a_capture_with_the_next_capture(
    repo: Path, tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedJj(tmp_path / "gated", when="after")  # jj has snapshotted, then waits
    monkeypatch.setenv("DURABILITY_JJ", str(gated.path))
    service = start_service(tmp_path)
    sock = settings.socket_path

    def send(request_id: str) -> dict[str, Any]:
        return client.call(sock, _capture_wire(repo, request_id), timeout_s=120)

    try:
        with ThreadPoolExecutor(4) as pool:
            gated.close()
            first = pool.submit(send, "first")
            gated.wait_held(1)
            (repo / "during.txt").write_text("written while capture 1 runs\n")
            late = [pool.submit(send, f"late-{i}-{uuid.uuid4().hex[:6]}") for i in range(3)]
            wait_for(lambda: (ping(sock) or {}).get("queued") == 3, timeout=60)
            gated.open()
            a = first.result(120)
            answers = [f.result(120) for f in late]
        captures = (ping(sock) or {}).get("captures")
    finally:
        gated.open()
        service.stop()
    assert a["ok"] and a["seq"] == 1, a
    assert all(r["ok"] for r in answers), answers
    assert {r["seq"] for r in answers} == {2}
    assert {r["commit_id"] for r in answers} != {a["commit_id"]}
    assert "during.txt" not in commit_manifest(repo, a["commit_id"])
    assert "during.txt" in commit_manifest(repo, answers[0]["commit_id"])
    assert captures == 2


def test_a_burst_is_gathered_into_one_capture_after_the_running_one(tmp_path: Path) -> None:
    """Requests that queued during a capture start a burst: the next capture
    waits for arrivals to pause, so a request arriving just after the first
    capture ended joins the same batch instead of costing a capture of its own."""
    run = HeldBatches()
    coalescer = Coalescer(run, burst_quiet_s=2.0, burst_max_s=30.0)
    try:
        a = coalescer.submit(_request(tmp_path, "a"))
        run.wait_entered()
        b = coalescer.submit(_request(tmp_path, "b"))
        wait_for(lambda: coalescer.queued() == 1)
        run.release.set()  # capture 1 ends with b waiting: a burst
        assert a.result(timeout=30).seq == 1
        c = coalescer.submit(_request(tmp_path, "c"))  # well inside the quiet period
        assert b.result(timeout=30).seq == c.result(timeout=30).seq == 2
        assert run.batches == [["a"], ["b", "c"]]
    finally:
        run.release.set()
        coalescer.close()


def test_a_request_at_an_idle_worktree_is_not_held_for_a_burst(tmp_path: Path) -> None:
    """Sequential tool calls never wait for the burst window (here 60 s)."""
    run = HeldBatches()
    run.release.set()
    coalescer = Coalescer(run, burst_quiet_s=60.0, burst_max_s=60.0)
    try:
        for name in ("x", "y", "z"):
            assert coalescer.submit(_request(tmp_path, name)).result(timeout=20).ok
        assert run.batches == [["x"], ["y"], ["z"]]
    finally:
        coalescer.close()
