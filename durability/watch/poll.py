"""The polling fallback of a watch, for when inotify cannot be trusted
(watch limit reached, a filesystem without events).

Every ``interval_s`` it fingerprints the tree (path, size, mtime, inode of
every entry, skipping ``.jj/``, ``.git/`` and ignored folders) and touches the
debouncer when the fingerprint changed.  The fingerprint is a running hash,
so memory stays constant whatever the size of the tree.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from durability.watch.ignore import IgnoreRules

__all__ = ["Poller", "fingerprint"]

# A huge tree is polled less often: at least this many times the cost of one
# walk between walks, so polling never takes more than ~10% of a core.
_BUDGET = 10.0


def fingerprint(worktree: Path, rules: IgnoreRules) -> str | None:
    """A digest of the tree's metadata; None when the worktree is gone."""
    digest = hashlib.blake2b(digest_size=16)
    stack = [str(worktree)]
    if not os.path.isdir(worktree):
        return None
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                found = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue  # deleted while walking: the parent's mtime changed anyway
        for entry in found:
            _add(digest, entry, rules, stack)
    return digest.hexdigest()


def _add(digest: hashlib.blake2b, entry: os.DirEntry[str], rules: IgnoreRules,
         stack: list[str]) -> None:
    try:
        is_dir = entry.is_dir(follow_symlinks=False)  # from the listing: no stat
    except OSError:
        return
    # Its folder triggers: the walk only enters folders that do.  An ignored
    # entry costs no stat.
    if not rules.triggers(entry.path, is_dir=is_dir, parent_checked=True):
        return
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return
    digest.update(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode(
        "utf-8", "surrogateescape"))
    if is_dir:
        stack.append(entry.path)


class Poller:
    """A thread that polls one worktree until stopped."""

    def __init__(self, worktree: Path, rules: IgnoreRules, *, interval_s: float,
                 on_change: Callable[[], None], on_missing: Callable[[], None],
                 name: str) -> None:
        self.worktree = worktree
        self.rules = rules
        self.interval_s = interval_s
        self._on_change = on_change
        self._on_missing = on_missing
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        last, cost = self._measure()
        while not self._stop.wait(max(self.interval_s, _BUDGET * cost)):
            now, cost = self._measure()
            if now is None:
                self._on_missing()
                return
            if now != last:
                last = now
                self._on_change()

    def _measure(self) -> tuple[str | None, float]:
        start = time.monotonic()
        return fingerprint(self.worktree, self.rules), time.monotonic() - start
