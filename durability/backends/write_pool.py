"""Writing a large restore's files from several threads.

Most of what writing a file costs is system calls (unlink, open, write,
fstat, close), which Python makes without holding the interpreter lock: with
a few threads, one thread's system calls overlap another's Python work and
the restore uses more than one core, as ``git checkout`` does with
``checkout.workers`` and as jj's own restore does.  A restore of 20,000 files
spends most of its time here (see ``bench/bench_restore.py``).

The writes, sorted by path, are cut into contiguous runs, one per thread, so
each thread writes whole folders (or long runs of one folder) and reuses its
folder descriptors.  Each thread has its own ``ConfinedTree`` made from the
restore's root descriptor (``ConfinedTree.sibling``): descriptors are never
shared between threads, and every thread is confined exactly as one alone
would be.  Two threads making the same missing folder is fine
(``ConfinedTree`` opens a folder made meanwhile like any other).

The first failure (a refusal, a write error, the progress callback
failing, an interrupt of the calling thread) stops the other threads at
their next file; it is raised once all have stopped, as a serial restore
would raise it.  What was written before stays written: a restore that stops
partway is undone by its pre-restore checkpoint, parallel or not.

Small restores (under ``PARALLEL_FROM`` writes) use no threads: there is
nothing to win, and their order stays strictly by path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from durability.backends.confined import ConfinedTree

__all__ = ["MAX_THREADS", "PARALLEL_FROM", "write_all"]

T = TypeVar("T")
R = TypeVar("R")

#: Fewer writes than this are made from the calling thread alone.
PARALLEL_FROM = 512
#: Threads at most: past a few, they mostly wait for the interpreter lock.
MAX_THREADS = 4


def write_all(tree: ConfinedTree, items: Sequence[T], write: Callable[[ConfinedTree, T], R],
              step: Callable[[], None] | None = None) -> list[R]:
    """``write(tree, item)`` for every item, in order within each thread's
    run; the results in the order of ``items``.  ``step`` is called (under a
    lock) after each item."""
    threads = _threads(len(items))
    if threads == 1:
        results = []
        for item in items:
            results.append(write(tree, item))
            if step is not None:
                step()
        return results
    return _parallel(tree, items, write, step, threads)


def _threads(count: int) -> int:
    if count < PARALLEL_FROM:
        return 1
    return max(1, min(MAX_THREADS, os.cpu_count() or 1, count // (PARALLEL_FROM // 2)))


def _parallel(tree: ConfinedTree, items: Sequence[T], write: Callable[[ConfinedTree, T], R],
              step: Callable[[], None] | None, threads: int) -> list[R]:
    size = -(-len(items) // threads)
    runs = [range(start, min(start + size, len(items))) for start in range(0, len(items), size)]
    results: list[R | None] = [None] * len(items)
    stop = threading.Event()
    progress_lock = threading.Lock()

    def work(run: range) -> None:
        with tree.sibling() as own:
            for i in run:
                if stop.is_set():
                    return
                try:
                    results[i] = write(own, items[i])
                    if step is not None:
                        with progress_lock:
                            step()
                except BaseException:
                    # The progress callback's failure too (stderr gone).
                    stop.set()
                    raise

    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="restore-write") as pool:
        try:
            futures = [pool.submit(work, run) for run in runs]
            wait(futures)
        except BaseException:
            # Interrupted (Ctrl-C reaches this thread): the writers stop at
            # their next file and the pool's exit waits for them, so none
            # writes once the restore has given up (and let go of its locks).
            stop.set()
            raise
    for future in futures:
        error = future.exception()
        if error is not None:
            raise error
    return results  # type: ignore[return-value]  # every slot written when none failed
