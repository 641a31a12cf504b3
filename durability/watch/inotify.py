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

__all__ = ["INTERNAL_KEPT", "OverflowListener", "default_observer", "event_filter",
           "folders_within", "internal_observer", "too_big_for_inotify", "watched_folders"]

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


#: The repository folders a recursive watch leaves out, at any depth: a
#: capture's own writes land there (jj's store and operation log, git's
#: objects and refs: ~89 events a jj capture), and no event there is ever a
#: change of the tree (``watch.change_ends``).
_INTERNAL = frozenset({b".git", b".jj"})
#: Inside the root's own ``.git`` and ``.jj``, the folders still watched, each
#: without recursion: the event barrier's folder (``.git``, or ``.jj`` for a
#: jj-only worktree) and the folders of the files whose change changes what a
#: capture takes (``.git/config``, ``.git/info/exclude``,
#: ``.jj/repo/config.toml``: ``tracked._Tracked``).
INTERNAL_KEPT = (".git", ".git/info", ".jj", ".jj/repo")


def internal_observer() -> Any:
    """An observer whose recursive watches leave out ``.git`` and ``.jj``
    (watching only ``INTERNAL_KEPT`` there, without recursion): the
    service's internal watches (``tracked.Tracker``).  Where this watchdog's
    inotify observer is not the one we know how to narrow, the plain one
    (every folder watched: the same events reach the handler, only more)."""
    cls = _pruned_observer_class()
    return default_observer() if cls is None else cls()


_PRUNED: list[Any] = []


def _pruned_observer_class() -> Any:
    if _PRUNED:
        return _PRUNED[0]
    try:
        from watchdog.observers import Observer
        from watchdog.observers import inotify as wi
        from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT, BaseObserver
        from watchdog.observers.inotify_c import InotifyFD

        group_class: Any = wi.InotifyWatchGroup
        emitter_class: Any = wi.InotifyEmitter
        known = all(callable(getattr(group_class, name, None))
                    for name in ("_add_all_callbacks", "_add_callback"))
    except (ImportError, AttributeError):
        known = False
    if not known or Observer is not wi.InotifyObserver:
        _PRUNED.append(None)
        return None

    class PrunedGroup(group_class):  # type: ignore[misc]
        """watchdog's recursive group, without ``.git``/``.jj`` inside."""

        def _add_all_callbacks(self, path: bytes) -> None:
            kept = {os.path.join(self.path, os.fsencode(k)) for k in INTERNAL_KEPT}
            if _internal(self.path, path):
                # A kept folder made later (.git/info; .git itself, re-made),
                # with the kept ones already inside it.
                if path in kept:
                    for folder in sorted(k for k in kept if _under(k, path)):
                        if os.path.isdir(folder):
                            self._add_callback(folder)
                return
            self._add_callback(path)
            if not (self.is_recursive and os.path.isdir(path)):
                return
            for root, dirnames, _ in os.walk(path, followlinks=self.follow_symlink):
                keep = []
                for name in dirnames:
                    full = os.path.join(root, name)
                    if not self.follow_symlink and os.path.islink(full):
                        continue
                    if name in _INTERNAL:
                        if root == self.path:
                            for folder in sorted(k for k in kept if _under(k, full)):
                                if os.path.isdir(folder):
                                    self._add_callback(folder)
                        continue
                    self._add_callback(full)
                    keep.append(name)
                dirnames[:] = keep

    class PrunedEmitter(emitter_class):  # type: ignore[misc]
        def on_thread_start(self) -> None:
            self._inotify = PrunedGroup(
                self._inotify_fd, os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink)

    class PrunedObserver(wi.InotifyObserver):
        def __init__(self, *, timeout: float = DEFAULT_OBSERVER_TIMEOUT) -> None:
            self._inotify_fd = InotifyFD()
            self._inotify_fd.start()
            BaseObserver.__init__(self, PrunedEmitter, timeout=timeout,
                                  inotify_fd=self._inotify_fd)

    _PRUNED.append(PrunedObserver)
    return PrunedObserver


def _under(path: bytes, folder: bytes) -> bool:
    return path == folder or path.startswith(folder + b"/")


def _internal(root: bytes, path: bytes) -> bool:
    """Whether ``path`` (below ``root``) is in, or is, a ``.git``/``.jj`` folder."""
    rel = os.path.relpath(path, root) if path != root else b"."
    return any(part in _INTERNAL for part in rel.split(b"/"))


def folders_outside_internal(worktree: Path, budget: int) -> int | None:
    """As ``folders_within``, counting what ``internal_observer`` watches:
    no folder inside ``.git``/``.jj`` but ``INTERNAL_KEPT``."""
    folders = 1 + sum((worktree / k).is_dir() for k in INTERNAL_KEPT)
    for _root, dirs, _files in os.walk(worktree):
        dirs[:] = [d for d in dirs if d not in (".git", ".jj")]
        folders += len(dirs)
        if folders > budget:
            return None
    return folders


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
