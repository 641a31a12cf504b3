"""What the browser shows, read without Textual: the sessions, one session's
timeline (checkpoints with what each changed, gaps where they happened, tool
calls whose checkpoint gc collected: decision 0061), and the text of a
checkpoint's diff.

Everything comes from ``inspect`` (the same bases and sizes as ``log``, the
same diff as ``show``: a file over ``LARGE_FILE_BYTES`` is named with its
sizes, never read) and the store; nothing here writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from durability.ground import ids
from durability.inspect.timeline import (
    COLLECTED_CHANGES,
    COLLECTED_MARK,
    Entry,
    collected_label,
    describe,
    run_timeline,
)
from durability.store import AttemptKey, Checkpoint, Session, Store
from durability.store.boundaries import Boundary, by_checkpoint

__all__ = ["DIFF_LINES", "DIFF_LINE_CHARS", "Row", "collected_text", "diff_text", "session_rows",
           "timeline_rows"]

#: Lines of a diff the pane shows; the rest is named, with the command
#: that prints it whole.
DIFF_LINES = 4000
#: Characters of one diff line the pane shows: a minified file is a single
#: line of megabytes, and laying that out held the browser for seconds.
DIFF_LINE_CHARS = 2000


@dataclass(frozen=True)
class Row:
    """One line of a session's timeline: a checkpoint, a gap, or a tool call
    whose checkpoint gc collected (``collected``: nothing to restore or
    diff, its conversation alone can be rewound)."""

    key: str  # unique within the table
    cells: tuple[str, ...]
    checkpoint: Checkpoint | None = None
    gap_reason: str | None = None
    #: The tool calls whose boundary is this checkpoint, oldest first (issue 24).
    boundaries: tuple[Boundary, ...] = ()
    collected: Boundary | None = None


#: The timeline table's columns.
TIMELINE_COLUMNS = ("SEQ", "TIME", "NODE/IT/ATT", "SOURCE", "CHANGES", "LABEL")
#: The sessions table's columns.
SESSION_COLUMNS = ("RUN", "LAST", "CHECKPOINTS", "GAPS", "WORKTREE")


def session_rows(store: Store) -> list[tuple[str, tuple[str, ...]]]:
    """Every session, newest first: (run id, cells)."""
    return [(s.run_id, _session_cells(s)) for s in store.sessions()]


def _session_cells(s: Session) -> tuple[str, ...]:
    return (_text(s.run_id), _when(s.last_ms), str(s.checkpoints), str(s.gaps),
            _text(s.worktree or "-"))


def timeline_rows(store: Store, run_id: str, env: Mapping[str, str] = os.environ
                  ) -> list[Row]:
    """The checkpoints, gaps and collected calls of ``run_id``, newest first,
    each checkpoint with the tool-call boundaries it is (its label ends
    ``[calls 1 2]``)."""
    calls = by_checkpoint(store, [run_id])
    return [_row(i, e, calls)
            for i, e in enumerate(run_timeline(store, run_id, env=env, collected=True))]


def _row(index: int, e: Entry,
         calls: Mapping[tuple[AttemptKey, int], list[Boundary]] | None = None) -> Row:
    if e.call is not None:
        b = e.call
        return Row(f"call-{index}", (COLLECTED_MARK, _when(b.created_at_ms),
                                     f"{b.node_id}/{b.iteration}/{b.attempt}", "call",
                                     COLLECTED_CHANGES, _text(collected_label(b))), collected=b)
    if e.gap is not None:
        g = e.gap
        where = f"{g.node_id}/{g.iteration}/{g.attempt}" if g.node_id else "-"
        label = f"{g.reason}: {g.detail}" if g.detail else g.reason
        return Row(f"gap-{index}", ("GAP", _when(g.ts_ms), where, g.source or "-",
                                    "not captured", _text(label)), gap_reason=g.reason)
    c = e.checkpoint
    assert c is not None
    changes = "-" if e.base is None else "?" if e.totals is None else e.totals.text()
    who = c.agent_type or c.agent_id
    label = (f"[{who}] " if who else "") + (c.label or "")
    mine = tuple((calls or {}).get((c.key, c.seq), ()))
    if mine:  # as `log` says it: the session seqs of the calls this checkpoint is the state after
        label += f" [calls {' '.join(str(b.seq) for b in mine)}]"
    return Row(f"cp-{index}", (str(c.seq), _when(c.created_at_ms),
                               f"{c.node_id}/{c.iteration}/{c.attempt}", c.source, changes,
                               _text(label)), checkpoint=c, boundaries=mine)


def collected_text(b: Boundary) -> str:
    """What the diff pane says of a collected call (there is no diff)."""
    call = f"tool call {b.tool_use_id}" if b.tool_use_id else "a tool call without an id"
    return (f"GC: boundary seq {b.seq} of session {_text(b.run_id)}, {_text(call)} "
            f"({_text(b.tool_name or '?')}): gc collected its checkpoint (seq "
            f"{b.checkpoint_seq} of {b.node_id}/{b.iteration}/{b.attempt}) under the retention "
            "policy, so its files cannot be restored or shown.  w rewinds its conversation "
            "only (a new session; the files stay as they are).")


def diff_text(store: Store, checkpoint: Checkpoint, *, lines: int = DIFF_LINES,
              env: Mapping[str, str] = os.environ) -> str:
    """What ``checkpoint`` changed against its base, as ``durability diff``
    prints it (uncoloured; control characters escaped)."""
    shown = describe(store, checkpoint, env=env)
    c = checkpoint
    if shown.changes is None or shown.base is None:
        return (f"seq {c.seq} is the first checkpoint of {_text(c.worktree)}: nothing "
                "earlier to compare with.")
    t = shown.changes.totals()
    base = shown.base
    against = (f"seq {base.seq}" if base.key == c.key else
               f"seq {base.seq} of run {base.run_id} ({base.node_id}/{base.iteration}/"
               f"{base.attempt})")
    head = [f"seq {c.seq}: +{t.additions} -{t.deletions}, {t.files} "
            f"file{'' if t.files == 1 else 's'} against {_text(against)}", ""]
    body: list[str] = []
    for patch in shown.changes.patches():
        body += [_text(_cut(line).expandtabs(4)) for line in
                 patch.decode("utf-8", "surrogateescape").splitlines()]
        if len(body) > lines:
            break
    if len(body) > lines:
        body = [*body[:lines], f"... cut at {lines} lines: durability diff "
                f"{_text(c.run_id)} --node {_text(c.node_id)} --iteration {c.iteration} "
                f"--attempt {c.attempt} --seq {c.seq} prints it whole"]
    if not body:
        body = ["(no file changed)"]
    return "\n".join(head + body)


def _cut(line: str) -> str:
    if len(line) <= DIFF_LINE_CHARS:
        return line
    return f"{line[:DIFF_LINE_CHARS]} ... {len(line) - DIFF_LINE_CHARS:,} more characters"


def _text(value: str) -> str:
    return ids.printable(value)


def _when(ms: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
