"""Gaps for paths a capture left out (``Snapshot.skipped``).

A capture that could read all but a few paths still records its checkpoint;
each path it left out is also a gap (reason ``unreadable-path`` or
``file-too-large``) naming the path, so the record says what the checkpoint
does not hold.  The same path is left out again by every capture until it is
fixed, so its gap is filed once per path per attempt: its request id is
derived from the attempt, worktree, reason and path (the store keeps one row
per request id), and a gap already in the store or in the run's spool file is
not written again.  Captures of one worktree hold its lock, so two of them
never file the same gap at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from durability.backends.base import MOVING, Skipped
from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.ground.ids import printable, safe_filename
from durability.store import EngineError, Store

if TYPE_CHECKING:
    from pathlib import Path

    from durability.store import AttemptKey


class CaptureRequest(Protocol):
    """What of a capture request its path gaps name (``capture.CaptureRequest``
    has these; the gaps room does not import the capture room)."""

    @property
    def key(self) -> AttemptKey: ...
    @property
    def worktree(self) -> Path: ...
    @property
    def source(self) -> str: ...
    @property
    def tool_use_id(self) -> str | None: ...

__all__ = ["file_path_gaps", "path_gap_id"]


def path_gap_id(request: CaptureRequest, skipped: Skipped) -> str:
    """The request id of ``skipped``'s gap for ``request``'s attempt."""
    key = request.key
    text = "\0".join((key.run_id, key.node_id, str(key.iteration), str(key.attempt),
                      str(request.worktree), skipped.reason, skipped.path))
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{skipped.reason}-{digest[:32]}"


def file_path_gaps(
    settings: Settings, store: Callable[[], Store] | None, request: CaptureRequest,
    skipped: Sequence[Skipped],
) -> int:
    """File the gaps of ``skipped`` not yet on record; how many were new.
    A path still moving is no gap (the agent was busy; the next capture
    takes it)."""
    skipped = [s for s in skipped if s.reason != MOVING]
    if not skipped:
        return 0
    wanted = {path_gap_id(request, s): s for s in skipped}
    known = _known_ids(settings, store, request.key.run_id)
    new = 0
    for request_id, item in sorted(wanted.items(), key=lambda kv: kv[1]):
        if request_id in known:
            continue
        record = spool.gap_record(
            run_id=request.key.run_id, request_id=request_id, reason=item.reason,
            node_id=request.key.node_id, iteration=request.key.iteration,
            attempt=request.key.attempt, worktree=str(request.worktree),
            source=request.source, tool_use_id=request.tool_use_id,
            detail=_detail(item),
        )
        write_gap(settings, record, store)
        new += 1
    return new


def _detail(item: Skipped) -> str:
    if item.reason == "file-too-large":
        return (f"{item.path}: new file over snapshot.max-new-file-size, left out of the "
                f"checkpoint (raise DURABILITY_MAX_NEW_FILE_SIZE to capture it)")
    if _not_utf8(item.path):
        return (f"{printable(item.path)}: its name is not UTF-8, which jj cannot record; "
                f"left out of the checkpoint (rename it to capture it)")
    return f"{item.path}: cannot be read, left out of the checkpoint"


def _not_utf8(path: str) -> bool:
    """Whether ``path`` came from bytes that are not UTF-8 (``os.fsdecode``
    keeps them as lone surrogates)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _known_ids(settings: Settings, store: Callable[[], Store] | None, run_id: str) -> set[str]:
    """Request ids of the run's gaps already in the store or its spool file."""
    known: set[str] = set()
    if store is not None:
        try:
            known |= {g.request_id for g in store().gaps(run_id)}
        except EngineError:
            pass  # the spool still says what was filed
    path = settings.spool_dir / (safe_filename(run_id) + spool.SUFFIX)
    try:
        known |= {str(r["request_id"]) for r in spool.read_spool(path).records}
    except OSError:
        pass  # no spool file yet (or unreadable: then the store decides)
    return known
