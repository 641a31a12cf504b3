"""Plain-text tables for the CLI."""

from __future__ import annotations

import time
from collections.abc import Sequence

from engine import Checkpoint

__all__ = ["checkpoints_table", "printable"]


def printable(text: str) -> str:
    """``text`` for a terminal: control characters escaped (labels and gap
    details come from hook payloads; a raw newline or ESC would forge rows or
    drive the terminal)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def checkpoints_table(rows: Sequence[Checkpoint]) -> str:
    header = ("NODE", "IT", "ATT", "SEQ", "COMMIT", "SOURCE", "TIME", "LABEL")
    body = [
        (r.node_id, str(r.iteration), str(r.attempt), str(r.seq), r.commit_id[:12], r.source,
         time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at_ms / 1000)),
         printable(r.label or ""))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header) - 1)]
    lines = []
    for row in (header, *body):
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)
