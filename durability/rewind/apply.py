"""``rewind``: the tree to a boundary's checkpoint (a confined restore, with
its pre-restore undo point and verification) and the conversation to a new
session that ends right after the boundary's tool call.

Order: the boundary is found, the conversation is planned (a format not
tested refuses here, before anything changed), the new session is written
(all or nothing: a write that fails refuses before the tree changed), then
the code is restored (should that fail, the new session is removed); the
original transcript is only read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from durability.config import Settings
from durability.ground.errors import InvalidInput
from durability.restore.apply import Preview, Restored, preview, restore
from durability.rewind.conversation import (
    ConversationPlan,
    Written,
    gemini_call_ids,
    plan,
    transcript_of,
    write,
)
from durability.store import Store
from durability.store.boundaries import Boundary, boundaries, find_boundary, set_call_ids

__all__ = ["Rewound", "rewind"]


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
