"""What the watcher needs to know about inotify through watchdog: the event
mask, whether a tree fits the user's watch limit, and the kernel queue
overflows that watchdog only reports in its log."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

__all__ = ["OverflowListener", "default_observer", "event_filter", "folders_within",
           "too_big_for_inotify", "watched_folders"]

# Use at most this share of the user's inotify watches for one worktree; past
# it the tree is polled (another watcher, an IDE, may need the rest).
_INOTIFY_SHARE = 0.5


def event_filter() -> list[Any]:
    """The events a watch needs; opens, reads and folder mtimes are left to the
    kernel, which then never queues them (less CPU, fewer overflows)."""
    from watchdog import events as e

    return [e.FileCreatedEvent, e.DirCreatedEvent, e.FileDeletedEvent, e.DirDeletedEvent,
            e.FileMovedEvent, e.DirMovedEvent, e.FileModifiedEvent, e.FileClosedEvent,
            e.FileAttribEvent]


def default_observer() -> Any:
    from watchdog.observers import Observer

    return Observer()


def too_big_for_inotify(worktree: Path) -> str | None:
    """Why inotify cannot cover ``worktree`` (more folders than a fair share of
    the user's watch limit), or None."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            limit = int(f.read().strip())
    except (OSError, ValueError):
        return None  # not Linux: no such limit
    budget = int(limit * _INOTIFY_SHARE)
    folders = 0
    for _root, dirs, _files in os.walk(worktree):
        folders += len(dirs)
        if folders > budget:
            return (f"{worktree} has more than {budget} folders, over half the inotify watch "
                    f"limit ({limit}); polling instead")
    return None


def folders_within(worktree: Path, budget: int) -> int | None:
    """How many folders ``worktree`` holds (each costs one inotify watch), or
    None as soon as there are more than ``budget`` (the walk stops there)."""
    folders = 1
    for _root, dirs, _files in os.walk(worktree):
        folders += len(dirs)
        if folders > budget:
            return None
    return folders


def watched_folders(observer: Any, observed: Any) -> Collection[bytes] | None:
    """The folders watchdog really watches for ``observed`` (a dead emitter:
    none), or None when this watchdog does not let us tell.

    watchdog swallows a failure to watch a new subfolder (the user's watch
    limit reached), after which that folder's events are lost without a
    word; only its own bookkeeping shows it.
    """
    emitters = getattr(observer, "_emitter_for_watch", None)
    emitter = emitters.get(observed) if isinstance(emitters, dict) else None
    if emitter is None:
        return None
    if not emitter.is_alive():
        return ()
    group = getattr(emitter, "_inotify", None)
    paths = getattr(group, "_active_callbacks_by_path", None)
    return paths if isinstance(paths, dict) else None


class OverflowListener(logging.Handler):
    """watchdog reports a kernel queue overflow only in its log; listen there."""

    _LOGGER = "watchdog.observers.inotify_c"

    def __init__(self, callback: Callable[[], None], at_once: Callable[[], None]) -> None:
        super().__init__(level=logging.WARNING)
        self._callback = callback
        self._at_once = at_once

    def attach(self) -> None:
        logger = logging.getLogger(self._LOGGER)
        logger.addHandler(self)
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)

    def detach(self) -> None:
        logging.getLogger(self._LOGGER).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            # On watchdog's reader thread, before it reads any later event: an
            # event barrier can then never vouch for paths the overflow lost.
            self._at_once()
            threading.Thread(target=self._callback, name="watch-overflow", daemon=True).start()
