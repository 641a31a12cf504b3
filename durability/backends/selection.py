"""The paths a ``restore --path`` names, and which changes they cover.

A path is given relative to the worktree root, or absolute inside it; it is
turned into the worktree-relative, ``/``-separated form checkpoint trees use.
One that leaves the worktree (``..``, an absolute path elsewhere) or names
the repository's own folders (``.git``, ``.jj``) is ``invalid-value``.

A selected path covers itself and everything below it (a folder): those
paths are written or deleted as the checkpoint has them.  A restore also
deletes a file (or link) that stands now where a folder of a selected path
goes: it blocks the path, and removing it is part of restoring the path.  A
file of the checkpoint standing where a folder of a selected path is now is
not written: the path is restored (deleted, as the checkpoint has it), and the
folder keeps whatever else it holds.  A tree diff names only files, links and
submodules, so a path above a selected one in a diff is always such a file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from durability.ground.errors import InvalidInput

__all__ = ["blocks", "covers", "normalize", "touches"]

# A restore never writes into these: a path naming one cannot be restored.
_REPO_FOLDERS = {".git", ".jj"}


def normalize(paths: Iterable[str], root: Path) -> tuple[str, ...]:
    """``paths`` as worktree-relative ``/`` paths below ``root`` (sorted,
    without duplicates); ``""`` is the whole worktree."""
    return tuple(sorted({_relative(p, root) for p in paths}))


def covers(selected: Sequence[str], path: str) -> bool:
    """Whether ``path`` is a selected path or below one."""
    return any(not s or s == path or path.startswith(s + "/") for s in selected)


def blocks(selected: Sequence[str], path: str) -> bool:
    """Whether ``path`` is above a selected path (a file there is in its way)."""
    return any(s.startswith(path + "/") for s in selected)


def touches(selected: Sequence[str], path: str) -> bool:
    """Whether restoring ``selected`` may delete ``path``."""
    return covers(selected, path) or blocks(selected, path)


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
