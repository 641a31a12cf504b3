"""The service's snapshot ahead of the hook (issue 25, docs/decisions/0047):
once a watched jj tree is still, the service snapshots it, and a request is
recorded from that snapshot only when the watch's barrier proves nothing
changed since the snapshot began; a write that lands during it sends the
request to a capture of its own, which holds the write (contract 2).

``settle`` is called by hand here (settle time 0: no thread), so which timer
wins never matters; the jj runs are counted by a stand-in that runs the real
jj (``DURABILITY_JJ``)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pygit2
import pytest

from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.capture.coalesce import Coalescer
from durability.capture.inprocess import lazy_store
from durability.config import Settings
from durability.service.informed import InformedCaptures
from durability.store import AttemptKey
from durability.watch.tracked import Tracker
from tests.durability.service.informedkit import make_worktree
from tests.helpers import jj, jj_path, write_script

LOCK_S = 60.0


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.worktree = make_worktree("jj", tmp_path / "repo").resolve()
        self.runs = tmp_path / "jj-runs.txt"
        #: While this file exists, the stand-in writes to the tree right after
        #: jj's snapshot (a write landing during a capture); "before": first.
        self.during = tmp_path / "write-during"
        self.runs.write_text("")
        (tmp_path / "bin").mkdir()
        jj = write_script(tmp_path / "bin" / "jj", f"""#!/bin/sh
[ "$1" = "--version" ] && exec {jj_path()} "$@"
echo run >> {self.runs}
if [ -f {self.during} ] && [ "$(cat {self.during})" = before ]; then
  echo during > {self.worktree}/src/a.txt; rm {self.during}
fi
{jj_path()} "$@"; rc=$?
if [ -f {self.during} ]; then echo during > {self.worktree}/src/a.txt; rm {self.during}; fi
exit $rc
""")
        env = {**os.environ, "DURABILITY_JJ": str(jj)}
        settings = Settings.from_env(env)
        self.capturer = Capturer(settings=settings, store=lazy_store(settings), env=env)
        self.tracker = Tracker()
        self.captures = InformedCaptures(self.capturer, self.tracker, lazy_store(settings))

    def jj_runs(self) -> int:
        return len(self.runs.read_text().split())

    def request(self, run: str = "run-1") -> CaptureRequest:
        return CaptureRequest(key=AttemptKey(run, "session"), worktree=self.worktree,
                              source="hook", request_id=str(uuid.uuid4()))

    def batch(self, *requests: CaptureRequest) -> list[Outcome]:
        outcomes = self.captures.run_batch(list(requests), lock_timeout_s=LOCK_S)
        assert all(o.ok for o in outcomes), outcomes
        return outcomes

    def file(self, commit_id: str | None, path: str = "src/a.txt") -> bytes:
        assert commit_id is not None
        repo = pygit2.Repository(str(self.worktree))
        tree = repo[commit_id].peel(pygit2.Commit).tree
        return bytes(repo[tree[path].id].data)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    try:
        yield s
    finally:
        s.captures.close()
        s.tracker.close()


def test_a_request_after_a_settled_snapshot_is_recorded_from_it_without_a_jj_run(
        setup: Setup) -> None:
    setup.batch(setup.request())  # first sight: a full capture, and the watch is armed
    (setup.worktree / "src" / "a.txt").write_text("edited by the tool\n")
    assert setup.captures.settle(setup.worktree)
    runs = setup.jj_runs()
    [answer] = setup.batch(setup.request())
    assert setup.jj_runs() == runs  # the hook waited for no jj run
    assert setup.captures.from_snapshot == 1 and setup.captures.ahead == 1
    assert not answer.deduped
    assert setup.file(answer.commit_id) == b"edited by the tool\n"
    # Another attempt's request on the still tree: the same snapshot, its own row.
    [other] = setup.batch(setup.request("run-2"))
    assert setup.jj_runs() == runs
    assert other.commit_id == answer.commit_id and other.seq == 1


def test_a_new_attempt_on_a_still_tree_is_answered_from_the_last_capture(
        setup: Setup) -> None:
    setup.batch(setup.request())
    (setup.worktree / "src" / "a.txt").write_text("v2\n")
    [first] = setup.batch(setup.request())  # captured: jj runs
    runs = setup.jj_runs()
    [second] = setup.batch(setup.request("sub-agent"))
    assert setup.jj_runs() == runs
    assert second.commit_id == first.commit_id
    assert setup.file(second.commit_id) == b"v2\n"


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_write_during_the_settled_snapshot_is_not_answered_from_it(
        setup: Setup, when: str) -> None:
    setup.batch(setup.request())
    (setup.worktree / "src" / "a.txt").write_text("the tool's write\n")
    setup.during.write_text(when)  # the stand-in writes once more around its jj run
    assert setup.captures.settle(setup.worktree)
    assert not setup.during.exists()
    runs = setup.jj_runs()
    [answer] = setup.batch(setup.request())
    assert setup.captures.from_snapshot == 0
    assert setup.jj_runs() == runs + 1  # a capture of its own
    assert setup.file(answer.commit_id) == b"during\n"


def test_a_jj_command_after_the_settled_snapshot_sends_the_request_to_jj(
        setup: Setup) -> None:
    setup.batch(setup.request())
    (setup.worktree / "src" / "a.txt").write_text("v2\n")
    assert setup.captures.settle(setup.worktree)
    # The user describes @ (no file changes, jj's operation heads move).
    jj(setup.worktree, "describe", "-m", "by hand")
    runs = setup.jj_runs()
    setup.batch(setup.request())
    assert setup.captures.from_snapshot == 0 and setup.jj_runs() == runs + 1


def test_a_still_tree_takes_no_snapshot_ahead(setup: Setup) -> None:
    setup.batch(setup.request())
    runs = setup.jj_runs()
    assert not setup.captures.settle(setup.worktree)  # nothing changed since the capture
    assert setup.jj_runs() == runs and setup.captures.ahead == 0


def test_a_tree_being_deleted_takes_no_snapshot_ahead(setup: Setup) -> None:
    """The change that wakes the settle thread may be an ``rm -rf``'s first
    file: once the delete has reached the repository, no barrier and no jj
    run write where it is removing (its "Directory not empty")."""
    setup.batch(setup.request())
    (setup.worktree / "src" / "a.txt").unlink()
    (setup.worktree / ".git" / "config").unlink()  # the delete's next entries
    runs = setup.jj_runs()
    before = {name: os.lstat(setup.worktree / ".git" / name).st_mtime_ns
              for name in [".", *os.listdir(setup.worktree / ".git")]}
    assert not setup.captures.settle(setup.worktree)
    assert setup.jj_runs() == runs and setup.captures.ahead == 0
    after = {name: os.lstat(setup.worktree / ".git" / name).st_mtime_ns
             for name in [".", *os.listdir(setup.worktree / ".git")]}
    assert after == before  # not even a barrier made and removed


def test_simultaneous_calls_the_watch_can_answer_wait_out_no_burst() -> None:
    """A burst waits for quiet before its capture, unless the batch would be
    answered without one: here the quiet period is longer than any test."""
    release = threading.Event()
    batches: list[int] = []

    def run_batch(requests: list[CaptureRequest]) -> list[Outcome]:
        batches.append(len(requests))
        if len(batches) == 1:
            release.wait(30)
        return [Outcome(r.request_id, 1, "0" * 40) for r in requests]

    def request(i: int) -> CaptureRequest:
        return CaptureRequest(key=AttemptKey(f"run-{i}", "session"), worktree=Path("/w"),
                              source="hook", request_id=f"r{i}")

    coalescer = Coalescer(run_batch, burst_quiet_s=3600, burst_max_s=3600,
                          answerable=lambda worktree: True)
    try:
        first = coalescer.submit(request(0))
        while not batches:
            release.wait(0.01)
        later: list[Future[Outcome]] = [coalescer.submit(request(i)) for i in range(1, 8)]
        release.set()
        assert first.result(30).ok
        assert all(f.result(30).ok for f in later)  # not after an hour of quiet
        assert sum(batches) == 8 and len(batches) == 2
    finally:
        release.set()
        coalescer.close()


def test_an_event_late_for_the_take_without_barrier_sends_the_request_to_jj(
        setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settle thread's take waits for no barrier (decision 0060): a
    write whose event is still on its way is in the snapshot (which starts
    after the take), and its event, arriving late, makes the request's own
    take (behind its barrier) not quiet: a capture of its own, holding it."""
    from durability.watch import tracked

    gate = threading.Event()
    gate.set()
    real = tracked._Tracked.on_event

    def held(self: tracked._Tracked, event: object) -> None:
        gate.wait(30)  # the observer thread waits here while the gate is shut
        real(self, event)

    monkeypatch.setattr(tracked._Tracked, "on_event", held)
    setup.batch(setup.request())  # armed (with the gated handler) and captured
    a = setup.worktree / "src" / "a.txt"
    a.write_text("the tool's first write\n")
    for _ in range(300):
        if setup.tracker.stirred(setup.worktree):
            break
        threading.Event().wait(0.01)
    assert setup.tracker.stirred(setup.worktree), "the first write's event never arrived"
    gate.clear()  # the next events stay on their way
    a.write_text("the tool's last write\n")
    threading.Event().wait(0.2)  # read by the observer, held at the gate
    assert setup.captures.settle(setup.worktree, barrier=False)
    # The take saw the first write only; the last one's event is still held.
    assert not setup.tracker.stirred(setup.worktree)
    gate.set()
    runs = setup.jj_runs()
    [answer] = setup.batch(setup.request())
    assert setup.captures.from_snapshot == 0, "answered from a take the late event missed"
    assert setup.jj_runs() == runs + 1
    assert setup.file(answer.commit_id) == b"the tool's last write\n"
