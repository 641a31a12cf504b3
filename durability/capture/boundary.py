"""Every answered hook call is a boundary (issue 24,
docs/decisions/0042-boundaries.md): the one call each answering path makes
once it has its answers, whether a capture recorded a new checkpoint, deduped
onto the latest, was answered from the record, or the service answered from
a watch's capture without running one.  A capture that recorded a new
checkpoint row (or deduped onto one) recorded its call's boundary in the same
write (decision 0070); what is left here is the rest: answers from the
record or from the watch, and a boundary part the database refused.

It fails open: the capture is answered and recorded whatever happens here; a
boundary that cannot be written costs only the rewind to that one call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from durability.capture.capturer import CaptureRequest, Outcome
from durability.store import EngineError, Store
from durability.store.boundaries import record_boundaries as _record

__all__ = ["record_boundaries"]

log = logging.getLogger("durability.capture")


def record_boundaries(store: Callable[[], Store], requests: Sequence[CaptureRequest],
                      outcomes: Sequence[Outcome]) -> int:
    """Record the boundary of each request that reports a tool call and was
    answered with a checkpoint; how many were new (0 when the store failed)."""
    new = [b for r, o in zip(requests, outcomes, strict=True)
           if o.ok and o.seq is not None and o.commit_id is not None
           and not o.boundary  # recorded with its checkpoint (decision 0070)
           and (b := r.boundary(o.seq, o.commit_id)) is not None]
    if not new:
        return 0
    try:
        return _record(store(), new)
    except EngineError as exc:
        log.warning("tool-call boundaries not recorded: %s", exc)
        return 0
