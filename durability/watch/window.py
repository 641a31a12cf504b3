"""Missed settle windows on record (docs/RELIABILITY.md, "Missed settle windows").

A watch's settle window opens with the first event no capture has answered
yet and closes when a capture that covers it is on record.  A watcher killed
inside it (SIGKILL, a crash, power loss) would take the window with it, so
while it is open a small marker is on disk: one JSON file per window in the
state folder (``Settings.window_dir``) naming the attempt, the worktree and
the time of the first unanswered event.  It costs one file write per window,
never one per event, and is removed once the capture answering it is
recorded.

The owner holds an exclusive ``flock`` on its marker for as long as the
window is open, so whoever finds a marker can tell a live watcher (the lock
is held: leave it) from a dead one (the kernel dropped the lock with the
process), without trusting a pid that may have been reused.  A service or a
foreground watch that starts claims the dead markers (``claim_missed``),
files one ``watch-window-missed`` gap for each, removes it, and then
captures the tree as usual.

A file rather than a row of the store: the lock that says "its owner is
alive" belongs to a file, and writing a marker must never wait on the
store's write lock (up to its busy timeout under capture load).
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.ground.errors import DurabilityError
from durability.ground.paths import ensure_private_dir
from durability.store import AttemptKey, Store, now_ms

__all__ = ["SUFFIX", "Missed", "WindowMarker", "claim_missed", "file_missed", "missed_gap"]

log = logging.getLogger("durability.watch")
SUFFIX = ".window"
# A marker is renamed into place within milliseconds of its creation; a
# temporary one this old was left by a writer that died.
_STALE_TMP_S = 60.0


def _digest(worktree: Path) -> str:
    return hashlib.sha256(os.fsencode(worktree)).hexdigest()[:32]


@dataclass(frozen=True)
class Missed:
    """A settle window whose watcher died before answering it."""

    key: AttemptKey
    worktree: Path
    opened_at_ms: int
    pid: int
    token: str

    @property
    def request_id(self) -> str:
        """The gap's request id: one per window, so filing it twice is once."""
        return f"watch-window-{self.token}"


class WindowMarker:
    """The marker of one watch's open settle window (at most one on disk)."""

    def __init__(self, folder: Path, worktree: Path, key: AttemptKey) -> None:
        self.folder = folder
        self.worktree = worktree
        self.key = key
        self._lock = threading.Lock()
        self._current: tuple[Path, int] | None = None  # the marker on disk, its locked fd
        self._released = False
        self._warned = False

    def mark(self, opened_at_ms: int) -> None:
        """The window's first unanswered event was at ``opened_at_ms``: say so
        on disk (a marker already there for an earlier start is replaced)."""
        with self._lock:
            if self._released:
                return
            old = self._current
            try:
                self._current = self._write(opened_at_ms)
            except (OSError, DurabilityError) as exc:
                self._warn(exc)
                return
            if old is not None:
                _remove(*old)

    def rekey(self, key: AttemptKey) -> None:
        """Windows opened from now on are ``key``'s (the watch passed to
        another attempt; the one open, if any, was answered by its park)."""
        with self._lock:
            self.key = key

    def clear(self) -> None:
        """The window was answered (a checkpoint, or a gap, is on record)."""
        with self._lock:
            old, self._current = self._current, None
            if old is not None:
                _remove(*old)

    def release(self) -> None:
        """The watch ended without answering its window: let go of the
        marker's lock and leave it on disk, for the next start to file."""
        with self._lock:
            self._released = True
            old, self._current = self._current, None
            if old is not None:
                os.close(old[1])

    def _write(self, opened_at_ms: int) -> tuple[Path, int]:
        """Write under a private name, locked, synced, then rename: a marker
        under its final name is always whole and always locked by its owner."""
        ensure_private_dir(self.folder)
        token = os.urandom(12).hex()
        final = self.folder / f"{_digest(self.worktree)}.{token}{SUFFIX}"
        tmp = self.folder / f".{token}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, _encode(self.key, self.worktree, opened_at_ms, token))
            os.fsync(fd)
            os.rename(tmp, final)
            _sync_dir(self.folder)
        except BaseException:
            tmp.unlink(missing_ok=True)
            os.close(fd)
            raise
        return final, fd

    def _warn(self, exc: Exception) -> None:
        if not self._warned:  # once per watch: the capture itself goes on
            self._warned = True
            log.warning("cannot keep the settle window of %s on disk: %s", self.worktree, exc)


def _encode(key: AttemptKey, worktree: Path, opened_at_ms: int, token: str) -> bytes:
    record = {"v": 1, "run_id": key.run_id, "node_id": key.node_id,
              "iteration": key.iteration, "attempt": key.attempt,
              "worktree": os.fsdecode(worktree), "opened_at_ms": opened_at_ms,
              "pid": os.getpid(), "token": token}
    # ASCII: a worktree path that is not UTF-8 travels as \\udcXX escapes.
    return json.dumps(record, ensure_ascii=True).encode("ascii")


def _remove(path: Path, fd: int) -> None:
    """Unlink while still holding the lock (nobody can claim it meanwhile)."""
    try:
        path.unlink(missing_ok=True)
        _sync_dir(path.parent)
    except OSError as exc:
        log.warning("cannot remove the settle window marker %s: %s", path, exc)
    finally:
        os.close(fd)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def claim_missed(folder: Path, file: Callable[[Missed], bool],
                 worktree: Path | None = None) -> list[Missed]:
    """File the windows whose watcher died (all, or those of ``worktree``)
    with ``file``; each marker is removed once ``file`` says its gap is on
    record, and kept (for the next start) when it is not.

    The marker stays locked while its gap is filed and is removed after: a
    crash in between files it again, under the same request id, so it is
    still one gap.  Returns the windows filed.
    """
    filed: list[Missed] = []
    for path, fd in _dead_markers(folder, worktree):
        found = _read(path, fd)
        if found is None:
            _remove(path, fd)  # not a marker we wrote whole: nothing to file
            continue
        try:
            recorded = file(found)
        except BaseException:
            os.close(fd)
            raise
        if not recorded:
            os.close(fd)
            continue
        _remove(path, fd)
        filed.append(found)
    return filed


def _dead_markers(folder: Path, worktree: Path | None) -> Iterator[tuple[Path, int]]:
    """Markers under their final name whose owner's lock is gone, locked now."""
    if not os.path.lexists(folder):
        return
    ensure_private_dir(folder)  # a squatted or symlinked folder is refused, not read
    prefix = _digest(worktree) + "." if worktree is not None else ""
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".tmp"):
            _drop_stale_tmp(path)
            continue
        if not (path.name.endswith(SUFFIX) and path.name.startswith(prefix)):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile (answered), or not a plain file
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Its owner may have answered and removed it between our open and lock.
            if os.stat(path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                raise FileNotFoundError(path)
        except OSError:  # locked: its watcher is alive; or gone
            os.close(fd)
            continue
        yield path, fd


def _drop_stale_tmp(path: Path) -> None:
    """A marker its writer died before renaming (never a window on record):
    removed once it is old enough that no live writer can still own it."""
    try:
        if time.time() - os.stat(path, follow_symlinks=False).st_mtime > _STALE_TMP_S:
            path.unlink()
    except OSError:
        pass  # gone meanwhile


def _read(path: Path, fd: int) -> Missed | None:
    try:
        raw: Any = json.loads(os.pread(fd, 65536, 0))
        key = AttemptKey(str(raw["run_id"]), str(raw["node_id"]), int(raw["iteration"]),
                         int(raw["attempt"]))
        return Missed(key, Path(str(raw["worktree"])), int(raw["opened_at_ms"]),
                      int(raw["pid"]), str(raw["token"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable settle window marker %s removed: %s", path, exc)
        return None


def file_missed(settings: Settings, *, found_by: str, worktree: Path | None = None,
                store: Callable[[], Store] | None = None) -> list[Missed]:
    """One ``watch-window-missed`` gap per window whose watcher died; the
    windows, so the caller can catch their worktrees up."""
    found_at = now_ms()

    def file(missed: Missed) -> bool:
        return write_gap(settings, missed_gap(missed, found_at=found_at, found_by=found_by),
                         store)

    return claim_missed(settings.window_dir, file, worktree)


def missed_gap(missed: Missed, *, found_at: int, found_by: str) -> dict[str, Any]:
    """The gap of a missed window: dated when the window opened (where the
    hole in the record begins); the detail says when it was found."""
    k = missed.key
    detail = (f"settle window opened at {_iso(missed.opened_at_ms)} (first unanswered event; "
              f"opened_at_ms={missed.opened_at_ms}) was never captured: its watcher (pid "
              f"{missed.pid}) stopped first; found at {_iso(found_at)} (found_at_ms={found_at}) "
              f"by {found_by}; the next checkpoint catches the tree up")
    return spool.gap_record(
        ts_ms=missed.opened_at_ms, run_id=k.run_id, request_id=missed.request_id,
        reason="watch-window-missed", node_id=k.node_id, iteration=k.iteration,
        attempt=k.attempt, worktree=os.fsdecode(missed.worktree), source="watch",
        detail=detail)


def _iso(ms: int) -> str:
    stamp = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
