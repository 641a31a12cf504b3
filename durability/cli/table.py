"""Plain-text tables for the CLI."""

from __future__ import annotations

import time
from collections.abc import Sequence

from engine import Attempt, Checkpoint, Gap, Session

__all__ = ["attempts_table", "checkpoints_table", "gaps_table", "printable", "sessions_table"]


def printable(text: str) -> str:
    """``text`` for a terminal: control characters escaped (labels and gap
    details come from hook payloads; a raw newline or ESC would forge rows or
    drive the terminal)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def checkpoints_table(rows: Sequence[Checkpoint]) -> str:
    header = ("NODE", "IT", "ATT", "SEQ", "COMMIT", "SOURCE", "TIME", "LABEL")
    return _table(header, [
        (r.node_id, str(r.iteration), str(r.attempt), str(r.seq), r.commit_id[:12], r.source,
         _when(r.created_at_ms), printable(_agent_prefix(r) + (r.label or "")))
        for r in rows
    ])


def _agent_prefix(r: Checkpoint) -> str:
    """``[agent_type]`` before the label of a sub-agent's checkpoint."""
    who = r.agent_type or r.agent_id
    return f"[{who}] " if who else ""


def gaps_table(rows: Sequence[Gap]) -> str:
    header = ("TIME", "REASON", "NODE/IT/ATT", "SOURCE", "TOOL USE", "DETAIL")
    return _table(header, [
        (_when(g.ts_ms), g.reason,
         f"{g.node_id}/{g.iteration}/{g.attempt}" if g.node_id else "-",
         g.source or "-", printable(g.tool_use_id or "-"), printable(g.detail or ""))
        for g in rows
    ])


def attempts_table(rows: Sequence[Attempt]) -> str:
    header = ("NODE", "IT", "ATT", "STATE", "JJ POINTER")
    return _table(header, [
        (a.node_id, str(a.iteration), str(a.attempt), a.state, a.jj_pointer or "-")
        for a in rows
    ])


def sessions_table(rows: Sequence[Session]) -> str:
    header = ("RUN", "LAST", "FIRST", "CHECKPOINTS", "GAPS", "SOURCES", "HARNESS", "WORKTREE")
    return _table(header, [
        (printable(s.run_id), _when(s.last_ms), _when(s.first_ms), str(s.checkpoints),
         str(s.gaps), s.sources or "-", s.harnesses or "-", printable(s.worktree or "-"))
        for s in rows
    ])


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell; the last one runs free."""
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *body):
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)
