"""A threaded restore's writers stop when the restore itself stops: on an
interrupt of the calling thread (Ctrl-C at ``durability restore``), and on a
failure of the progress callback, no writer goes on writing once
``write_all`` has returned or raised."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from durability.backends import write_pool
from durability.backends.confined import ConfinedTree

ITEMS = 1500  # three runs of 500


@pytest.fixture(autouse=True)
def three_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write_pool, "_threads", lambda count: 3)


def test_an_interrupt_stops_every_writer_before_write_all_raises(tmp_path: Path) -> None:
    done: list[int] = []
    lock = threading.Lock()
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main

    def write(_tree: ConfinedTree, item: int) -> int:
        if item == 600:  # the second run: Ctrl-C reaches the main thread
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.002)  # a file's write, long enough for the runs to overlap
        with lock:
            done.append(item)
        return item

    with ConfinedTree(tmp_path) as tree, pytest.raises(KeyboardInterrupt):
        write_pool.write_all(tree, list(range(ITEMS)), write)
    stopped_at = len(done)
    time.sleep(0.2)  # a writer still running would write about 100 more here
    assert len(done) == stopped_at
    assert stopped_at < ITEMS


def test_a_failing_progress_callback_stops_the_other_writers(tmp_path: Path) -> None:
    done: list[int] = []
    lock = threading.Lock()
    failed = threading.Event()
    steps: list[int] = []

    def write(_tree: ConfinedTree, item: int) -> int:
        if item >= 500:
            failed.wait(10)  # the other runs go on only once the callback failed
        with lock:
            done.append(item)
        return item

    def step() -> None:
        steps.append(1)
        if len(steps) == 10:
            failed.set()
            raise BrokenPipeError("stderr went away")

    with ConfinedTree(tmp_path) as tree, pytest.raises(BrokenPipeError):
        write_pool.write_all(tree, list(range(ITEMS)), write, step)
    # Each other run finishes at most the file it was writing.
    assert len([d for d in done if d >= 500]) <= 2
