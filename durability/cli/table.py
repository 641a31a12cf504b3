"""Plain-text tables for the CLI."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from durability.ground import ids
from durability.store import Attempt, Checkpoint, Gap, Session

if TYPE_CHECKING:  # annotations only: a listing need not load pygit2
    from durability.inspect.diff import FileChange, Totals
    from durability.inspect.timeline import Entry
    from durability.store.remote_rows import Remote

__all__ = ["attempts_table", "changes_table", "checkpoints_table", "gaps_table", "printable",
           "remotes_table", "sessions_table", "timeline_table", "totals_text", "when"]


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


def remotes_table(rows: Sequence[Remote]) -> str:
    return _table(("NAME", "URL", "WORKTREE"),
                  [(r.name, printable(r.url), printable(r.worktree)) for r in rows])


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


def when(ms: int) -> str:
    """A time as every table shows it (local time, to the second)."""
    return _when(ms)


def changes_table(files: Sequence[FileChange]) -> str:
    """What changed, one path per line: status, line counts, path."""
    return _table(("STATUS", "CHANGES", "PATH"), [
        (f.status, _file_counts(f), _change_path(f)) for f in files
    ])


def _file_counts(f: FileChange) -> str:
    if f.large:  # not compared: its sizes instead of line counts
        from durability.inspect.diff import size_text

        return (f"large {size_text(f.old_size) if f.old_size is not None else '-'} -> "
                f"{size_text(f.new_size) if f.new_size is not None else '-'}")
    return "binary" if f.binary else f"+{f.additions} -{f.deletions}"


_KINDS = {"100755": "executable", "120000": "symlink", "160000": "submodule"}


def _change_path(f: FileChange) -> str:
    path = _path(f.path) if f.old_path is None else f"{_path(f.old_path)} -> {_path(f.path)}"
    if f.old_mode and f.new_mode and f.old_mode != f.new_mode:
        path += f" (mode {f.old_mode} -> {f.new_mode})"
    elif (f.new_mode or f.old_mode) in _KINDS:
        path += f" ({_KINDS[f.new_mode or f.old_mode or '']})"
    return path


def _path(path: str) -> str:
    return printable(ids.printable(path))


def totals_text(t: Totals) -> str:
    return f"+{t.additions} -{t.deletions} {t.files} file{'' if t.files == 1 else 's'}"


def timeline_table(entries: Sequence[Entry],
                   boundaries: Callable[[Entry], Sequence[Any]] | None = None) -> str:
    """A worktree's timeline: a checkpoint per line, gaps marked ``GAP``;
    a checkpoint's label ends with the session seqs of the tool-call
    boundaries that name it (``[calls 3 4]``: ``rewind SESSION --seq 3``)."""
    header = ("TIME", "RUN", "NODE/IT/ATT", "SEQ", "SOURCE", "CHANGES", "LABEL")
    rows = [_timeline_row(e) for e in entries]
    if boundaries is not None:
        rows = [_with_calls(r, boundaries(e)) for r, e in zip(rows, entries, strict=True)]
    return _table(header, rows)


def _with_calls(row: tuple[str, ...], calls: Sequence[Any]) -> tuple[str, ...]:
    if not calls:
        return row
    seqs = " ".join(str(b.seq) for b in calls)
    return (*row[:-1], f"{row[-1]} [calls {seqs}]".strip())


def _timeline_row(e: Entry) -> tuple[str, ...]:
    if e.call is not None:  # a tool call whose checkpoint gc collected (decision 0061)
        from durability.inspect.timeline import COLLECTED_CHANGES, COLLECTED_MARK, collected_label

        b = e.call
        return (_when(b.created_at_ms), printable(b.run_id),
                f"{b.node_id}/{b.iteration}/{b.attempt}", COLLECTED_MARK, "call",
                COLLECTED_CHANGES, printable(collected_label(b)))
    if e.gap is not None:
        g = e.gap
        return (_when(g.ts_ms), printable(g.run_id),
                f"{g.node_id}/{g.iteration}/{g.attempt}" if g.node_id else "-", "GAP",
                g.source or "-", "not captured",
                printable(f"{g.reason}: {g.detail}" if g.detail else g.reason))
    c = e.checkpoint
    assert c is not None
    changes = "-" if e.base is None else "?" if e.totals is None else e.totals.text()
    return (_when(c.created_at_ms), printable(c.run_id), f"{c.node_id}/{c.iteration}/{c.attempt}",
            str(c.seq), c.source, changes, printable(_agent_prefix(c) + (c.label or "")))
