"""What ``durability restore`` prints: the JSON shapes and the lines of a
dry run (documented in docs/how-to/restore.md; the shapes are tested).

A dry run's order is part of its format, whatever order a backend's plan
came in: the paths to write, then those to delete, then those left, each
group by path (``_ordered``)."""

from __future__ import annotations

from typing import Any

from durability.backends import Changes
from durability.ground import ids
from durability.restore.apply import Preview, Restored
from durability.store import AttemptKey

__all__ = ["preview_dict", "preview_lines", "restored_dict"]

#: The width of the action column of a dry run's lines.
_COLUMN = 10


def restored_dict(done: Restored) -> dict[str, Any]:
    """``restore --json``."""
    return {"worktree": done.worktree,
            "restored": {"seq": done.restored.seq, "commit_id": done.restored.commit_id},
            "pre_restore": {**_attempt(done.undo_key), "seq": done.pre_restore_seq,
                            "commit_id": done.pre_restore_commit},
            "paths": list(done.paths) if done.paths is not None else None,
            "written": len(done.changes.write), "deleted": len(done.changes.delete)}


def _attempt(key: AttemptKey) -> dict[str, Any]:
    """Where a pre-restore checkpoint is: the restore that undoes one names it."""
    return {"run_id": key.run_id, "node_id": key.node_id, "iteration": key.iteration,
            "attempt": key.attempt}


def preview_dict(seen: Preview) -> dict[str, Any]:
    """``restore --dry-run --json``."""
    changes = _ordered(seen.changes)
    return {"dry_run": True, "worktree": seen.worktree,
            "target": {"seq": seen.target.seq, "commit_id": seen.target.commit_id},
            "paths": list(seen.paths) if seen.paths is not None else None,
            "write": [{"path": p, "how": how} for p, how in changes.write],
            "delete": list(changes.delete),
            "left": [{"path": p, "why": why} for p, why in changes.left]}


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
