"""Ingest the gap spool into the store, idempotently (contract 5, docs/DESIGN.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.gaps import calls, spool
from durability.ground.errors import DurabilityError
from durability.ground.paths import ensure_private_dir
from durability.store import EngineError, Gap, Store

__all__ = ["IngestResult", "SpoolCursor", "ingest_records", "ingest_spool", "write_gap"]


@dataclass(frozen=True)
class IngestResult:
    added: int
    torn: int
    files: int
    #: One line per spool folder that could not be read (and why).
    skipped: tuple[str, ...] = ()


class SpoolCursor:
    """Where a long-lived reader (the service) stopped in each spool file, so
    its periodic ingest reads only lines appended since, and a file that did
    not change is not even opened.  A replaced or shortened file is read
    again from the start (the store ignores gaps it already has), also one
    cut back and grown past where it was, or replaced by one that begins the
    same: the bytes just before that point must still be the ones read."""

    def __init__(self) -> None:
        self._at: dict[Path, spool.SpoolRead] = {}

    def start(self, path: Path) -> tuple[int, bytes, bytes] | None:
        """Where to read ``path`` from, the first bytes it must still begin
        with and the bytes it must still hold just before that; None:
        unchanged since the last read."""
        at = self._at.get(path)
        if at is None:
            return 0, b"", b""
        try:
            st = os.stat(path)
        except OSError:
            return 0, b"", b""  # the read says why
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == at.stamp:
            return None
        return at.end, at.head, at.tail

    def done(self, path: Path, read: spool.SpoolRead) -> None:
        self._at[path] = spool.SpoolRead([], 0, read.end, read.stamp, read.head, read.tail)

    def keep_only(self, paths: Iterable[Path]) -> None:
        """Forget files that are gone (bounded by the files that exist)."""
        keep = set(paths)
        for path in [p for p in self._at if p not in keep]:
            del self._at[path]


def ingest_spool(store: Store, directories: Path | Sequence[Path],
                 cursor: SpoolCursor | None = None) -> IngestResult:
    """Read every spool file of every folder and insert the gaps the store
    does not have; with ``cursor``, only the lines new since its last read.

    A folder reached through a symlink or owned by someone else is skipped and
    named in ``skipped`` (whoever controls it could plant gaps), never an
    error: the other folders, and the store, still hold what was recorded.
    """
    if isinstance(directories, Path):
        directories = [directories]
    added = torn = files = 0
    skipped: list[str] = []
    seen: list[Path] = []
    for directory in directories:
        try:
            if os.path.lexists(directory):
                ensure_private_dir(directory)
            paths_found = list(spool.spool_files(directory))
        except (DurabilityError, OSError) as exc:
            skipped.append(f"{directory}: {exc}")
            continue
        seen += paths_found
        for path in paths_found:
            start = cursor.start(path) if cursor is not None else (0, b"", b"")
            if start is None:
                continue  # unchanged since the last read
            try:
                read = spool.read_spool(path, *start)
            except OSError:
                continue  # unreadable now; a later ingest tries again
            files += 1
            torn += read.torn
            added += ingest_records(store, read.records)
            if cursor is not None:  # only once the store has the lines
                cursor.done(path, read)
        added += _ingest_abandoned(store, directory)
    if cursor is not None:
        cursor.keep_only(seen)
    return IngestResult(added, torn, files, tuple(skipped))


def _ingest_abandoned(store: Store, directory: Path) -> int:
    """File the announced calls whose harness is gone (a session killed and
    never resumed: no later hook of it decides them), then mark them filed."""
    found = []
    for path, entry in calls.abandoned(str(directory)):
        try:
            found.append((path, entry, calls.unfinished_gap(entry)))
        except ValueError:
            continue  # a line no hook of ours wrote: nothing to file it under
    if not found:
        return 0
    added = ingest_records(store, [record for _, _, record in found])
    calls.mark_filed([(path, entry) for path, entry, _ in found])
    return added


def ingest_records(store: Store, records: Iterable[dict[str, Any]]) -> int:
    return store.add_gaps(_gap(r) for r in records)


def _gap(r: dict[str, Any]) -> Gap:
    return Gap(
        ts_ms=int(r["ts_ms"]), run_id=str(r["run_id"]), request_id=str(r["request_id"]),
        reason=str(r["reason"]), node_id=_text(r.get("node_id")),
        iteration=_int(r.get("iteration")), attempt=_int(r.get("attempt")),
        worktree=_text(r.get("worktree")), source=_text(r.get("source")),
        tool_use_id=_text(r.get("tool_use_id")), detail=_text(r.get("detail")),
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def write_gap(
    settings: Settings, record: dict[str, object], store: Callable[[], Store] | None = None
) -> bool:
    """Spool a gap, then ingest it at once when the store is at hand.

    Whether the gap is on record: in a spool folder (the first of
    ``settings.spool_dirs`` that takes it), or in the store when none does.
    """
    try:
        spool.append_anywhere(settings.spool_dirs, record)
        spooled = True
    except (OSError, DurabilityError):
        spooled = False
    if store is not None:
        try:
            ingest_records(store(), [record])
        except EngineError:
            return spooled  # in the spool, the next ingest picks it up
        return True
    return spooled
