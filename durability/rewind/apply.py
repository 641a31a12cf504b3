"""``rewind``: the tree to a boundary's checkpoint (a confined restore, with
its pre-restore undo point and verification) and the conversation to a new
session that ends right after the boundary's tool call.

Order: the boundary is found, the conversation is planned (a format not
tested refuses here, before anything changed), the code is restored, then
the new session is written; the original transcript is only read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

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
    named = gemini_call_ids(boundaries(store, session))
    if named:  # Gemini's hooks name no call: its chat file does, once the batch ran
        set_call_ids(store, session, named)
    b = find_boundary(store, session, seq=seq, call=call)
    every = boundaries(store, session)
    planned = plan(b, transcript_of(every, b), every) if conversation else None
    if dry_run:
        seen = preview(settings, env=env, run_id=b.run_id, node_id=b.node_id,
                       iteration=b.iteration, attempt=b.attempt,
                       seq=b.checkpoint_seq) if code else None
        return Rewound(session, b, True, preview=seen, conversation=planned)
    done = restore(settings, env=env, run_id=b.run_id, node_id=b.node_id, iteration=b.iteration,
                   attempt=b.attempt, seq=b.checkpoint_seq) if code else None
    written = None
    if planned is not None:
        try:
            written = write(planned)
        except DurabilityError as exc:
            if done is None:
                raise
            undo = done.undo_key
            raise DurabilityError(f"{exc.message}; the code was rewound: undo with durability "
                                  f"restore {undo.run_id} --node {undo.node_id} --iteration "
                                  f"{undo.iteration} --attempt {undo.attempt} --seq "
                                  f"{done.pre_restore_seq}", code=exc.code) from exc
    return Rewound(session, b, False, restored=done, conversation=planned, written=written)
