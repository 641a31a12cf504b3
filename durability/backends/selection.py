"""The paths a ``restore --path`` names, and which changes they cover.

A path is given relative to the worktree root, or absolute inside it; it is
turned into the worktree-relative, ``/``-separated form checkpoint trees use.
One that leaves the worktree (``..``, an absolute path elsewhere) or names
the repository's own folders (``.git``, ``.jj``) is ``invalid-value``.

A selected path covers itself, everything below it (a folder), and any path
above it: a file (or link) standing where a folder of the selected path goes
is part of restoring that path, so it is deleted too.  A tree diff names only
files, links and submodules, so a covered path above a selected one is always
such a blocker, never a folder with other content.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from durability.errors import InvalidInput

__all__ = ["covers", "normalize"]

# A restore never writes into these: a path naming one cannot be restored.
_REPO_FOLDERS = {".git", ".jj"}


def normalize(paths: Iterable[str], root: Path) -> tuple[str, ...]:
    """``paths`` as worktree-relative ``/`` paths below ``root`` (sorted,
    without duplicates); ``""`` is the whole worktree."""
    return tuple(sorted({_relative(p, root) for p in paths}))


def covers(selected: Sequence[str], path: str) -> bool:
    """Whether restoring ``selected`` touches ``path`` (see the module doc)."""
    return any(_related(s, path) for s in selected)


def _related(chosen: str, path: str) -> bool:
    if not chosen or chosen == path:
        return True
    return path.startswith(chosen + "/") or chosen.startswith(path + "/")


def _relative(given: str, root: Path) -> str:
    if not given or "\0" in given:
        raise InvalidInput(f"--path {given!r} is not a usable path")
    absolute = os.path.normpath(given if os.path.isabs(given) else os.path.join(root, given))
    rel = _inside(absolute, str(root))
    if rel is None and os.path.isabs(given):
        # The root is resolved (symlinks followed); the path may reach it
        # through a linked folder such as /tmp -> /private/tmp.
        folder, name = os.path.split(absolute)
        rel = _inside(os.path.join(os.path.realpath(folder), name), str(root))
    if rel is None:
        raise InvalidInput(f"--path {given!r} is outside the worktree {root}")
    parts = rel.split("/") if rel else []
    if any(p.lower() in _REPO_FOLDERS for p in parts):
        raise InvalidInput(f"--path {given!r} names the repository's own folder, "
                           "which a restore never writes")
    return rel


def _inside(absolute: str, root: str) -> str | None:
    """``absolute`` relative to ``root`` ("" for the root), or None."""
    if absolute == root:
        return ""
    if absolute.startswith(root.rstrip("/") + "/"):
        return absolute[len(root.rstrip("/")) + 1:].replace(os.sep, "/")
    return None
