"""The gap spool: one NDJSON file per run in a private folder.

A failed capture appends one line here; the service and every command that
reads gaps ingest the lines into the store (``durability.gaps.ingest``).  Standard
library only: the hook writes here when nothing else works.

Lines are ASCII JSON: a path that is not UTF-8 (a ``str`` with lone
surrogates, see ``durability.store.text``) is written as ``\\udcXX`` escapes, which read
back to the same ``str``.  A line is written whole or not at all, and when
the first folder cannot take it (full, squatted, a symlink) the next one of
``paths.spool_dirs`` is tried (``append_anywhere``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.ground.errors import DurabilityError
from durability.ground.ids import safe_filename
from durability.ground.paths import ensure_private_dir

__all__ = [
    "SUFFIX",
    "SpoolRead",
    "SpoolUnavailable",
    "append_anywhere",
    "append_gap",
    "append_last_gap",
    "find_request",
    "gap_record",
    "read_spool",
    "spool_files",
]

SUFFIX = ".gaps.ndjson"
FIELDS = (
    "ts_ms", "run_id", "node_id", "iteration", "attempt", "worktree", "source",
    "tool_use_id", "request_id", "reason", "detail",
)
# A detail is a diagnostic, not a log: keep lines small so a spool stays cheap
# to re-read.
_MAX_DETAIL = 2000


def gap_record(*, run_id: str, request_id: str, reason: str, **fields: Any) -> dict[str, Any]:
    """A spool line's fields, in the documented order."""
    record: dict[str, Any] = {name: None for name in FIELDS}
    record.update(fields, run_id=run_id, request_id=request_id, reason=reason)
    if record["ts_ms"] is None:
        record["ts_ms"] = time.time_ns() // 1_000_000
    if isinstance(record["detail"], str):
        record["detail"] = record["detail"][:_MAX_DETAIL]
    return {name: record[name] for name in FIELDS}


class SpoolUnavailable(OSError):
    """No spool folder could take the line; the message names each reason."""


def append_anywhere(
    directories: Sequence[Path], record: dict[str, Any], *, last: bool = False
) -> Path | None:
    """Append ``record`` to the first of ``directories`` that takes it whole.

    ``last`` as ``append_last_gap``.  Raises ``SpoolUnavailable`` when none
    does; the caller's last resort is the store itself.
    """
    reasons: list[str] = []
    for directory in directories:
        try:
            return append_last_gap(directory, record) if last else append_gap(directory, record)
        except (OSError, DurabilityError) as exc:
            reasons.append(f"{directory}: {exc}")
    raise SpoolUnavailable(errno.EIO, "no spool folder took the gap: " + "; ".join(reasons))


def append_gap(directory: Path, record: dict[str, Any]) -> Path:
    """Append one gap line durably; returns the spool file.

    The file is locked while appending so concurrent writers never interleave,
    and a line is started on a fresh line if a crashed writer left a torn one.
    """
    fd, path = _open_locked(directory, record)
    try:
        size = os.fstat(fd).st_size
        _write_line(fd, record, torn_tail=size > 0 and os.pread(fd, 1, size - 1) != b"\n")
    finally:
        os.close(fd)
    return path


def append_last_gap(directory: Path, record: dict[str, Any]) -> Path | None:
    """Append ``record`` unless its request already has a line, and keep the
    spool file locked until this process exits; ``None`` when it was there.

    For a process that is giving up (the hook past its budget): another of its
    threads may be filing a gap for the same request at this moment (its jj
    was just killed), and a request is recorded once.  Whoever locks first
    writes; the other finds the line, or waits on the lock until the process
    is gone.
    """
    fd, path = _open_locked(directory, record)  # never closed: that would release the lock
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    for raw in data.split(b"\n"):
        seen = _parse(raw) if raw.strip() else None
        if seen is not None and seen["request_id"] == record["request_id"]:
            return None
    _write_line(fd, record, torn_tail=bool(data) and not data.endswith(b"\n"))
    return path


def _open_locked(directory: Path, record: dict[str, Any]) -> tuple[int, Path]:
    """The run's spool file, opened for appending and exclusively locked."""
    ensure_private_dir(directory)
    path = directory / (safe_filename(str(record["run_id"])) + SUFFIX)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, path


def _write_line(fd: int, record: dict[str, Any], *, torn_tail: bool) -> None:
    """One NDJSON line, on a fresh line after a torn one, then fsync; whole
    or not at all.

    ``os.write`` may write less than asked (a nearly full filesystem, a file
    size limit): the rest is retried, and if that fails the file is cut back
    to where it was, so no torn line is left behind a gap that was never
    filed.
    """
    line = json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"
    data = memoryview((("\n" if torn_tail else "") + line).encode("ascii"))
    start = os.fstat(fd).st_size
    try:
        while data:
            written = os.write(fd, data)
            if written <= 0:  # never for a regular file, but never loop forever
                raise OSError(errno.ENOSPC, "the spool file takes no more bytes")
            data = data[written:]
        os.fsync(fd)
    except BaseException:
        _cut_back(fd, start)
        raise


def _cut_back(fd: int, size: int) -> None:
    """Undo a partial append; freeing space cannot fail for lack of it."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass  # the reader skips and counts a torn line: still no false record


#: How much of a spool file's start identifies it (a file replaced by
#: another can get the same inode number).
_HEAD = 256


@dataclass
class SpoolRead:
    records: list[dict[str, Any]]
    torn: int
    #: Where the complete lines read end: the next read of new lines starts
    #: here (an unfinished last line is read again then).
    end: int = 0
    #: The file as read: (device, inode, size, mtime in ns), and its first
    #: bytes; a later read from ``end`` checks it still is this file.
    stamp: tuple[int, int, int, int] = (0, 0, 0, 0)
    head: bytes = b""
    #: The bytes just before ``end``: a file cut back and grown again, or
    #: replaced by one that begins the same, no longer has them there.
    tail: bytes = b""


def read_spool(path: Path, start: int = 0, head: bytes = b"", tail: bytes = b"") -> SpoolRead:
    """Parse one spool file from byte ``start`` (the ``end`` of an earlier
    read whose file began with ``head``, or 0); a line that is not a complete
    JSON object with a run id, request id and reason is torn: skipped and
    counted.  A file that no longer begins with ``head``, or no longer holds
    ``tail`` just before ``start``, is read whole."""
    records: list[dict[str, Any]] = []
    torn = 0
    with open(path, "rb") as f:
        # Shared lock: a line being appended right now is not mistaken for torn.
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        st = os.fstat(f.fileno())
        first = os.pread(f.fileno(), _HEAD, 0)
        if not _same_file(f.fileno(), st.st_size, start, first, head, tail):
            start = 0
        f.seek(start)
        data = f.read()
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")[:-1] if complete else []
    if complete < len(data):
        # No final newline: a writer died mid-line, or is writing right now.
        torn += 1
    for raw in lines:
        if not raw.strip():
            continue
        record = _parse(raw)
        if record is None:
            torn += 1
        else:
            records.append(record)
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    # What was read before ``start`` ended with ``tail`` (checked above).
    before = ((tail if start else b"") + data[:complete])[-_HEAD:]
    return SpoolRead(records, torn, start + complete, stamp, first, before)


def _same_file(fd: int, size: int, start: int, first: bytes, head: bytes, tail: bytes) -> bool:
    """Whether the file still holds, up to ``start``, what an earlier read
    took: it begins with ``head`` and ``tail`` ends right at ``start`` (a file
    cut back and grown again, or replaced by one that begins the same, does
    not)."""
    if start > size or not head or not first.startswith(head[:len(first)]):
        return False
    return not tail or os.pread(fd, len(tail), start - len(tail)) == tail


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    for key in ("run_id", "request_id", "reason"):
        if not isinstance(record.get(key), str) or not record[key]:
            return None
    if not isinstance(record.get("ts_ms"), int):
        return None
    return record


def _usable(directory: Path, name: str) -> Path | None:
    """``directory/name`` when it is a regular file in a spool folder that
    ingestion would read (not a symlink, not another owner's folder)."""
    path = directory / name
    try:
        if not os.path.isfile(path) or path.is_symlink():
            return None
        ensure_private_dir(directory)
    except (OSError, DurabilityError):
        return None
    return path


def has_spool_file(directories: Sequence[Path], run_id: str) -> bool:
    """Whether ``run_id`` has a spool file that ingestion would read: a
    session whose only records are gaps not ingested yet is a session."""
    name = safe_filename(run_id) + SUFFIX
    return any(_usable(directory, name) is not None for directory in directories)


def find_request(directories: Sequence[Path], run_id: str,
                 request_id: str) -> dict[str, Any] | None:
    """The line a run's spool files hold for ``request_id``, if any.

    A hook past its budget files its gap here only (its watchdog has no time
    for the store), so whoever is about to record a checkpoint for the same
    request looks here first: a request is a gap or a checkpoint, never both.
    Cheap when the run has no spool file (a stat per folder), and a file is
    parsed only when the id's text is in it.  A folder that ingestion would
    skip (a symlink, another owner's) is skipped here too.
    """
    name = safe_filename(run_id) + SUFFIX
    needle = json.dumps(request_id).encode()
    for directory in directories:
        path = _usable(directory, name)
        if path is None:
            continue
        try:
            with open(path, "rb") as f:
                # Shared lock: a line being appended now is read whole, once written.
                fcntl.flock(f.fileno(), fcntl.LOCK_SH)
                data = f.read()
        except OSError:
            continue
        if needle not in data:
            continue
        for raw in data.split(b"\n"):
            record = _parse(raw) if raw.strip() else None
            if record is not None and record["request_id"] == request_id:
                return record
    return None


def spool_files(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for path in sorted(directory.iterdir()):
        if path.name.endswith(SUFFIX) and path.is_file() and not path.is_symlink():
            yield path
