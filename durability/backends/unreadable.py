"""Finding the paths of a worktree this process cannot read.

One file with mode 000 (or owned by another user) used to fail every capture,
and so every restore, whose pre-restore capture is mandatory.  Both backends
now leave such paths out of the capture and report them (``Skipped``); this
walk is how they learn which paths those are.

A file counts when it is a regular file this process cannot open for reading;
a folder when it cannot be listed or entered (its contents are then unknown,
so the folder itself is reported and not descended into).  The check is
``os.access`` with the real ids, which is what the capture runs as (the
toolkit never changes ids), ACLs and capabilities included.  Symlinks are not
followed: a capture stores a link's target text, which is always readable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["find_unreadable", "is_unreadable"]

#: Folders a capture never stores, at the worktree's root.
_PRIVATE = frozenset({".git", ".jj"})


def find_unreadable(
    root: Path,
    under: Iterable[str] = ("",),
    *,
    ignored: Callable[[str], bool] | None = None,
    files: bool = True,
) -> list[str]:
    """Worktree-relative paths (``/``-separated) under each of ``under``
    (``""``: the whole worktree) that cannot be read, sorted.

    ``files=False`` checks folders only: one listing per folder and no
    call per file (see bench/RESULTS.md, unreadable paths, for what each costs).

    ``ignored(path)`` (a folder's path ends with ``/``) prunes what the
    backend would not capture anyway, so it is never reported.
    """
    found: set[str] = set()
    for start in under:
        _walk(root, start, ignored, found, files)
    return sorted(found)


def is_unreadable(root: Path, rel: str) -> bool:
    """Whether ``rel`` exists and cannot be read (see the module docstring)."""
    try:
        st = os.lstat(root / rel)
    except OSError:
        return False
    return _denied(os.path.join(root, rel), st.st_mode)


def _walk(root: Path, start: str, ignored: Callable[[str], bool] | None,
          found: set[str], files: bool) -> None:
    full = os.path.join(root, start) if start else str(root)
    try:
        st_mode = os.lstat(full).st_mode
    except PermissionError:
        # A named path inside a folder that cannot be entered: whatever is
        # there is unknown, so that path is what gets left out.
        found.add(start)
        return
    except OSError:
        return  # gone
    if not stat.S_ISDIR(st_mode):
        if files and _denied(full, st_mode) and not (ignored and ignored(start)):
            found.add(start)
        return
    # Folders below come from their parent's listing (its d_type): no stat.
    stack = [(start, full)]
    while stack:
        rel, full = stack.pop()
        if rel and ignored is not None and ignored(rel + "/"):
            continue
        if not os.access(full, os.R_OK | os.X_OK):
            if rel:
                found.add(rel)
            continue
        try:
            entries = list(os.scandir(full))
        except OSError:
            if rel:
                found.add(rel)
            continue
        for entry in entries:
            if not rel and entry.name in _PRIVATE:
                continue
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((child, entry.path))
                elif (files and entry.is_file(follow_symlinks=False)
                      and not os.access(entry.path, os.R_OK)
                      and not (ignored and ignored(child))):
                    found.add(child)
            except OSError:
                continue


def _denied(full: str, mode: int) -> bool:
    if stat.S_ISDIR(mode):
        return not os.access(full, os.R_OK | os.X_OK)
    if stat.S_ISREG(mode):
        return not os.access(full, os.R_OK)
    return False
