"""Missed settle windows on record (docs/RELIABILITY.md, "Missed settle windows").

A watch's settle window opens with the first event no capture has answered
yet and closes when a capture that covers it is on record.  A watcher killed
inside it (SIGKILL, a crash, power loss) would take the window with it, so
while it is open a small marker on disk says so: one file per watch in the
state folder (``Settings.window_dir``) naming the attempt, the worktree and
the time of the first unanswered event.  It costs one synced write per
window opened and one per window answered, never one per event.

The file is made whole (written under a private name, synced, renamed into
place) when the watch's first window opens, and from then on rewritten in
place: it holds two slots, each a checksummed record, written in turn, so a
write torn by a power cut leaves the slot before it whole (decision 0067).
A window opened writes the slot with the window, a window answered writes
the slot "answered"; each is one ``pwrite`` and one ``fdatasync`` of blocks
already allocated, where a file per window cost a creation, two fsyncs and
a rename to open and an unlink and a folder fsync to answer.  An engine
run's watch lives across its attempts (decision 0056): one file for the run.

The owner holds an exclusive ``flock`` on its marker for as long as the
watch lives, so whoever finds a marker can tell a live watcher (the lock is
held: leave it) from a dead one (the kernel dropped the lock with the
process), without trusting a pid that may have been reused.  A service or a
foreground watch that starts claims the dead markers (``claim_missed``),
files one ``watch-window-missed`` gap for each that holds an open window,
removes it, and then captures the tree as usual; a dead marker that holds
an answered window is removed, nothing filed.

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
import struct
import threading
import time
import zlib
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

__all__ = ["SUFFIX", "Missed", "WindowMarker", "claim_missed", "file_missed", "missed_gap",
           "open_markers"]

log = logging.getLogger("durability.watch")
SUFFIX = ".window"
# A marker is renamed into place within milliseconds of its creation; a
# temporary one this old was left by a writer that died.
_STALE_TMP_S = 60.0
# A slot: magic, its sequence number, the record's length and CRC-32, then
# the record; zeros to the slot's end.  The newest whole slot is the state.
_MAGIC = b"DWM2"
_HEAD = struct.Struct("<4sQII")
#: A slot's size: a record with this much room to grow (a longer node id
#: after a re-key), in whole pages; a record that outgrows it gets a new file.
_SLOT_ROOM = 1024
_PAGE = 4096
#: The record of an answered window.
_ANSWERED = b'{"v":2,"answered":true}'
#: The most a reader reads of a marker (two slots of the longest record).
_MAX_READ = 1 << 22


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
    """The marker of one watch's settle window (one file on disk for the
    watch, from its first window on)."""

    def __init__(self, folder: Path, worktree: Path, key: AttemptKey) -> None:
        self.folder = folder
        self.worktree = worktree
        self.key = key
        self._lock = threading.Lock()
        #: The marker on disk and its locked fd, once a window opened.
        self._current: tuple[Path, int] | None = None
        self._open = False  # whether its newest slot holds an open window
        self._seq = 0  # the newest slot's sequence number
        self._slot = 0  # the size of each of its two slots
        self._released = False
        self._warned = False

    def mark(self, opened_at_ms: int) -> None:
        """The window's first unanswered event was at ``opened_at_ms``: say so
        on disk (a window already marked for an earlier start is replaced)."""
        with self._lock:
            if self._released:
                return
            record = _encode(self.key, self.worktree, opened_at_ms, os.urandom(12).hex())
            if self._current is not None and len(record) <= self._slot - _HEAD.size:
                try:
                    self._put(record)
                except OSError as exc:
                    self._warn(exc)
                    self._drop()  # what it holds is unknown: a whole new file next
                else:
                    self._open = True
                    return
            old = self._current
            try:
                self._current = self._write(record)
            except (OSError, DurabilityError) as exc:
                self._warn(exc)
                return
            self._open = True
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
            if self._current is None or not self._open:
                return
            try:
                self._put(_ANSWERED)
            except OSError as exc:
                # The slot may be torn: remove the file instead (synced), so
                # the answered window never comes back as a gap.
                log.warning("cannot rewrite the settle window marker of %s: %s",
                            self.worktree, exc)
                self._drop()
            else:
                self._open = False

    def release(self) -> None:
        """The watch ended: let go of the marker's lock, leaving it on disk
        for the next start to file when it holds an unanswered window, and
        removing it when it does not."""
        with self._lock:
            self._released = True
            old, self._current = self._current, None
            if old is None:
                return
            if self._open:
                os.close(old[1])
            else:
                _remove(*old)

    def _put(self, record: bytes) -> None:
        """Write ``record`` into the slot not holding the newest state, and
        sync it: a write torn by a power cut leaves the newest state whole."""
        assert self._current is not None
        seq = self._seq + 1
        data = _slot_bytes(record, seq, self._slot)
        fd = self._current[1]
        if os.pwrite(fd, data, (seq % 2) * self._slot) != len(data):
            raise OSError("short write")
        os.fdatasync(fd)
        self._seq = seq

    def _drop(self) -> None:
        """Remove the marker on disk (its content is not known whole)."""
        old, self._current = self._current, None
        self._open = False
        if old is not None:
            _remove(*old)

    def _write(self, record: bytes) -> tuple[Path, int]:
        """Write under a private name, locked, synced, then rename: a marker
        under its final name is always whole and always locked by its owner.
        Its second slot holds ``record`` as seq 1 (seq n lives in slot
        n % 2); both slots' blocks are written, so the rewrites in place
        (``_put``) allocate nothing."""
        ensure_private_dir(self.folder)
        token = os.urandom(12).hex()
        final = self.folder / f"{_digest(self.worktree)}.{token}{SUFFIX}"
        tmp = self.folder / f".{token}.tmp"
        slot = -(-(len(record) + _HEAD.size + _SLOT_ROOM) // _PAGE) * _PAGE
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = bytes(slot) + _slot_bytes(record, 1, slot)
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.fsync(fd)
            os.rename(tmp, final)
            _sync_dir(self.folder)
        except BaseException:
            tmp.unlink(missing_ok=True)
            os.close(fd)
            raise
        self._seq, self._slot = 1, slot
        return final, fd

    def _warn(self, exc: Exception) -> None:
        if not self._warned:  # once per watch: the capture itself goes on
            self._warned = True
            log.warning("cannot keep the settle window of %s on disk: %s", self.worktree, exc)


def _slot_bytes(record: bytes, seq: int, size: int) -> bytes:
    head = _HEAD.pack(_MAGIC, seq, len(record), zlib.crc32(record))
    return (head + record).ljust(size, b"\0")


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
            _remove(path, fd)  # its window was answered, or it is not whole: nothing to file
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
    """The open window a marker holds, or None: it holds an answered one, or
    is not one we wrote whole (logged)."""
    try:
        data = os.pread(fd, _MAX_READ, 0)
        record = _state(data)
        if record is None:
            raise ValueError("no whole slot")
        if record == _ANSWERED:
            return None
        raw: Any = json.loads(record)
        key = AttemptKey(str(raw["run_id"]), str(raw["node_id"]), int(raw["iteration"]),
                         int(raw["attempt"]))
        return Missed(key, Path(str(raw["worktree"])), int(raw["opened_at_ms"]),
                      int(raw["pid"]), str(raw["token"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable settle window marker %s removed: %s", path, exc)
        return None


def _state(data: bytes) -> bytes | None:
    """The record a marker's bytes hold now: a version 1 marker's whole
    JSON, else the newest whole slot's (``_ANSWERED`` for none open), or
    None when no slot is whole."""
    return data if data[:1] == b"{" else _newest(data)


def _newest(data: bytes) -> bytes | None:
    """The record of the newest whole slot of a marker's two, or None."""
    size = len(data) // 2
    if size < _HEAD.size:
        return None
    best: tuple[int, bytes] | None = None
    for at in (0, size):
        magic, seq, length, crc = _HEAD.unpack_from(data, at)
        record = data[at + _HEAD.size:at + _HEAD.size + length]
        if (magic == _MAGIC and _HEAD.size + length <= size and zlib.crc32(record) == crc
                and (best is None or seq > best[0])):
            best = (seq, record)
    return best[1] if best is not None else None


def open_markers(folder: Path) -> list[Path]:
    """The markers in ``folder`` that hold an open window, live or dead
    (read without their lock: a slot being written is not yet whole, and
    the one before it is read)."""
    found: list[Path] = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_READ)
        except OSError:
            continue  # answered and removed meanwhile
        record = _state(data)
        if record is not None and record != _ANSWERED:
            found.append(path)
    return found


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
