"""``rewind``: the tree to a boundary's checkpoint (a confined restore, with
its pre-restore undo point and verification) and the conversation to a new
session that ends right after the boundary's tool call.

Order: the boundary is found, the conversation is planned (a format not
tested refuses here, before anything changed), the new session is written
(all or nothing: a write that fails refuses before the tree changed), then
the code is restored (should that fail, the new session is removed); the
original transcript is only read.

A boundary whose checkpoint gc dropped (decision 0057) refuses its code half
with ``checkpoint-collected`` when it is found, before anything is planned
or written: no other checkpoint stands in for it (that would be a tree the
call never left).  Its conversation half (``--conversation-only``) needs no
checkpoint and still runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from durability.config import Settings
from durability.ground.errors import DurabilityError, InvalidInput
from durability.restore.apply import Preview, Restored, preview, restore
from durability.rewind.conversation import (
    ConversationPlan,
    Written,
    gemini_call_ids,
    plan,
    transcript_of,
    write,
)
from durability.store import NotFound, Store
from durability.store.boundaries import Boundary, boundaries, find_boundary, set_call_ids

__all__ = ["COLLECTED_CODE", "Rewound", "rewind"]

#: A rewind of the files to a boundary whose checkpoint gc dropped.
COLLECTED_CODE = "checkpoint-collected"


@dataclass(frozen=True)
class Rewound:
    """What a rewind did (or, ``dry_run``, would do)."""

    session: str
    boundary: Boundary
    dry_run: bool
    #: The code half: done (``restored``), previewed (``preview``), or neither
    #: (--conversation-only).
    restored: Restored | None = None
    preview: Preview | None = None
    #: The conversation half: planned (always, unless --code-only) and written (unless dry run).
    conversation: ConversationPlan | None = None
    written: Written | None = None


def rewind(settings: Settings, store: Store, session: str, *, seq: int | None = None,
           call: str | None = None, code: bool = True, conversation: bool = True,
           dry_run: bool = False, env: Mapping[str, str] = os.environ) -> Rewound:
    """Rewind ``session`` to its boundary ``seq``, or to tool call ``call``."""
    if (seq is None) == (call is None):
        raise InvalidInput("give --seq N or --call TOOL_CALL_ID (one of them)")
    if not (code or conversation):
        raise InvalidInput("--code-only and --conversation-only exclude each other")
    # Gemini's hooks name no call: its chat file does, once the batch ran.
    # Recorded for --call and the listings, but not by a dry run, which
    # changes nothing: it only uses them.
    every = boundaries(store, session)
    named = gemini_call_ids(every)
    if named and not dry_run:
        set_call_ids(store, session, named)
    every = [replace(x, tool_use_id=named[x.seq]) if x.seq in named else x for x in every]
    b = next((x for x in reversed(every)
              if (x.seq == seq if seq is not None else x.tool_use_id == call)), None)
    if b is None:
        b = find_boundary(store, session, seq=seq, call=call)  # not-found, naming the span
    if code:
        _check_kept(store, b, every)
    planned = plan(b, transcript_of(every, b), every) if conversation else None
    if dry_run:
        seen = preview(settings, env=env, run_id=b.run_id, node_id=b.node_id,
                       iteration=b.iteration, attempt=b.attempt,
                       seq=b.checkpoint_seq) if code else None
        return Rewound(session, b, True, preview=seen, conversation=planned)
    # The new session first: a write that fails then refuses before the
    # tree changed; a restore that fails takes the new session back.
    written = write(planned) if planned is not None else None
    try:
        done = restore(settings, env=env, run_id=b.run_id, node_id=b.node_id,
                       iteration=b.iteration, attempt=b.attempt,
                       seq=b.checkpoint_seq) if code else None
    except BaseException:
        if written is not None:
            Path(written.path).unlink(missing_ok=True)
        raise
    return Rewound(session, b, False, restored=done, conversation=planned, written=written)


def _check_kept(store: Store, b: Boundary, every: list[Boundary]) -> None:
    """Refuse (``checkpoint-collected``) a boundary whose checkpoint row is
    gone: marked collected, or dropped since it was read."""
    try:
        if not b.collected:
            store.checkpoint(b.key, b.checkpoint_seq)
            return
    except NotFound:
        pass
    kept = [x.seq for x in every if not x.collected and x.seq != b.seq]
    before = [n for n in kept if n < b.seq]
    after = [n for n in kept if n > b.seq]
    near = [f"seq {n}" for n in ([before[-1]] if before else []) + ([after[0]] if after else [])]
    hint = (f"; the nearest boundaries with files: {' and '.join(near)}" if near else
            "; no boundary of this session has its files any more")
    call = f"tool call {b.tool_use_id}" if b.tool_use_id else "a call without an id"
    raise DurabilityError(
        f"boundary seq {b.seq} of session {b.run_id} ({call}) names checkpoint seq "
        f"{b.checkpoint_seq} of {b.key.node_id}/{b.key.iteration}/{b.key.attempt}, which gc "
        f"dropped under the retention policy: its files cannot be restored; "
        f"--conversation-only still rewinds the conversation{hint}", code=COLLECTED_CODE)
