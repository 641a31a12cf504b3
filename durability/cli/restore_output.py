"""What ``durability restore`` prints: the lines of a dry run, and its
JSON (the models ``output.RestoredOut`` and ``output.PreviewOut``;
documented in docs/how-to/restore.md; the shapes are tested).

A dry run's order is part of its format, whatever order a backend's plan
came in: the paths to write, then those to delete, then those left, each
group by path (``_ordered``; the JSON sorts them alike)."""

from __future__ import annotations

from typing import Any

from durability.backends import Changes
from durability.ground import ids
from durability.restore.apply import Preview, Restored

__all__ = ["preview_dict", "preview_lines", "restored_dict"]

#: The width of the action column of a dry run's lines.
_COLUMN = 10


def restored_dict(done: Restored) -> dict[str, Any]:
    """``restore --json``."""
    from durability import output

    return output.RestoredOut.of(done).dump()


def preview_dict(seen: Preview) -> dict[str, Any]:
    """``restore --dry-run --json``."""
    from durability import output

    return output.PreviewOut.of(seen).dump()


def preview_lines(seen: Preview) -> list[str]:
    """``restore --dry-run``: a heading, one line per path, a count."""
    changes = _ordered(seen.changes)
    at = f" at {', '.join(map(ids.printable, seen.paths))}" if seen.paths else ""
    lines = [f"dry run, nothing changed: restoring {ids.printable(seen.worktree)}{at} to seq "
             f"{seen.target.seq} ({seen.target.commit_id[:12]}) would"]
    lines += [_line(how, path) for path, how in changes.write]
    lines += [_line("delete", path) for path in changes.delete]
    lines += [_line("leave", path) + f"  ({why})" for path, why in changes.left]
    lines.append(f"{len(changes.write)} to write, {len(changes.delete)} to delete, "
                 f"{len(changes.left)} left as they are")
    return lines


def _line(action: str, path: str) -> str:
    return f"  {action:<{_COLUMN}} {ids.printable(path)}"


def _ordered(changes: Changes) -> Changes:
    """Each group by path (Python's order of the names: by code point, which
    for UTF-8 names is their byte order)."""
    return Changes(write=tuple(sorted(changes.write)), delete=tuple(sorted(changes.delete)),
                   left=tuple(sorted(changes.left)))
