"""The service's internal watches: what makes a hook capture informed.

The service keeps an inotify watch on each worktree it captures (no settle
captures: those are only for a user's ``watch``), so a later capture of that
worktree knows, behind an event barrier (``durability.watch.changed``), which
paths changed since the previous capture, or that nothing did.

Bounded: at most ``max_worktrees`` worktrees and about ``max_watches`` inotify
watches (one per folder) in all, least recently captured dropped first.  A
worktree that cannot be watched whole (over the budget, the user's watch limit
reached, a subfolder watchdog could not watch, a queue overflow, a file with
another name: a hard link, written through that name unheard) is captured
by a full scan, never by a guess: ``prepare`` then answers None, or an
``Informed`` with no paths and not quiet.  The first capture after a watch is
armed is always a full scan: what changed before the watch began is unknown.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durability.watch.changed import ChangedPaths, Informed
from durability.watch.ignore import IgnoreRules
from durability.watch.inotify import (
    OverflowListener,
    event_filter,
    folders_outside_internal,
    internal_observer,
    watched_folders,
)
from durability.watch.watch import _inode, _text, change_ends

__all__ = ["DEFAULT_MAX_WORKTREES", "Tracker", "default_max_watches"]

log = logging.getLogger("durability.watch")

#: Worktrees watched at once (the git backend keeps as many open).
DEFAULT_MAX_WORKTREES = 32
# A worktree refused (too big, limit reached) is not walked again for this long.
_REFUSED_FOR_S = 300.0
_REFUSED_MAX = 256
_CHANGES = frozenset({"created", "deleted", "modified", "moved", "closed", "attrib"})
# Distinct ignored roots remembered between two captures (past it: unknown).
_IGNORED_MAX = 1024

ObserverFactory = Callable[[], Any]


def default_max_watches() -> int:
    """A quarter of the user's inotify watch limit (a user's ``watch``, an
    IDE and other tools need the rest), or 65,536 where there is no such limit."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            return max(int(f.read().strip()) // 4, 1)
    except (OSError, ValueError):
        return 65_536


class _Tracked:
    """One internally watched worktree."""

    def __init__(self, worktree: Path, on_change: Callable[[Path], None] | None = None) -> None:
        self.worktree = worktree
        #: Told of each change of the tree (on the observer thread: cheap).
        self.on_change = on_change
        # Files inside .git and .jj (never a change themselves) whose change can
        # change what a capture takes: the ignore rules and the repository's
        # settings.  Their events send the next capture to a full scan.
        self._settings_files = {str(worktree / ".git" / "info" / "exclude"),
                                str(worktree / ".git" / "config"),
                                str(worktree / ".jj" / "repo" / "config.toml")}
        self.rules = IgnoreRules(worktree)
        self.outside = self.rules.outside_stamp()
        self.changed = ChangedPaths(worktree, self.rules)
        self.inode = _inode(worktree)
        self.observed: Any = None
        self.folders = 0
        #: A subfolder went unwatched, or the root vanished: re-arm.
        self.broken = False
        #: A file of the tree has another name (a hard link): a write through
        #: a name outside the watched folders makes no event here.
        self.linked = False
        self._ignored_lock = threading.Lock()
        self._ignored_roots: set[str] = set()
        self._ignored_over = False
        self._watched: Any = None  # watched_folders(), read on the observer thread

    def on_event(self, event: Any) -> None:
        """A watchdog event (on the observer thread: cheap)."""
        if {_text(event.src_path), _text(getattr(event, "dest_path", ""))} & self._settings_files:
            self.rules.forget()
            self.changed.lost()
        ends = change_ends(event, self.rules, self.changed)
        if ends is None:
            self._note_ignored(event)
            return
        self.changed.add(ends)
        if self.on_change is not None:
            self.on_change(self.worktree)
        if not event.is_directory and event.event_type in ("created", "moved", "attrib"):
            self._check_links(ends[1] or ends[0])
        if event.is_directory and event.event_type in ("created", "moved"):
            folder = ends[1] or ends[0]
            if self.rules.relative(folder) is not None:  # not a folder moved out
                self._check_watched(folder)
        elif event.event_type == "deleted" and ends[0] == str(self.worktree):
            self.broken = True

    def _note_ignored(self, event: Any) -> None:
        """An ignored path changed: a capture leaves it out unless it is
        already in the tree (``git add -f``, tracked before the rule), which
        only the checkpoint's tree can tell (``take_ignored``)."""
        if event.event_type not in _CHANGES or (
                event.is_directory and event.event_type in ("modified", "closed", "attrib")):
            return
        ends = [_text(p) for p in (event.src_path, getattr(event, "dest_path", "")) if p]
        roots = [self.rules.ignored_root(p, is_dir=event.is_directory) for p in ends]
        with self._ignored_lock:
            for root in roots:
                if root is None:
                    continue
                if len(self._ignored_roots) >= _IGNORED_MAX:
                    self._ignored_over = True
                else:
                    self._ignored_roots.add(root)

    def take_ignored(self) -> frozenset[str] | None:
        """The ignored paths (outermost ignored folders) changed since the
        last take, or None: too many to name."""
        with self._ignored_lock:
            roots = None if self._ignored_over else frozenset(self._ignored_roots)
            self._ignored_roots, self._ignored_over = set(), False
        return roots

    def _check_links(self, path: str) -> None:
        try:
            st = os.lstat(path)
        except OSError:
            return
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            self.linked = True

    def _check_watched(self, folder: str) -> None:
        """A new folder must be watched, or its later events are lost."""
        watched = self._watched
        unwatched = watched is None or os.fsencode(folder) not in watched
        # A folder already gone (or a symlink, never watched) needs no watch.
        if unwatched and os.path.isdir(folder) and not os.path.islink(folder):
            self.broken = True
            self.changed.lost()


class Tracker:
    """The internal watches of one service."""

    def __init__(self, *, max_worktrees: int = DEFAULT_MAX_WORKTREES,
                 max_watches: int | None = None,
                 observer_factory: ObserverFactory | None = None,
                 barrier_timeout_s: float = 5.0,
                 on_change: Callable[[Path], None] | None = None) -> None:
        self.max_worktrees = max_worktrees
        #: Told of each change of a watched tree, on the observer thread.
        self.on_change = on_change
        self.max_watches = default_max_watches() if max_watches is None else max_watches
        self._observer_factory = observer_factory or internal_observer
        self._observer: Any = None
        self._barrier_timeout_s = barrier_timeout_s
        self._lock = threading.RLock()
        self._tracked: OrderedDict[Path, _Tracked] = OrderedDict()
        self._refused: OrderedDict[Path, float] = OrderedDict()
        self._overflow = OverflowListener(self._all_lost, self._all_lost)
        self._closed = False
        #: Counters (the service's ping shows them; tests and the bench read them).
        self.armed = 0
        self.evicted = 0
        self.refused = 0
        self.rearmed = 0

    def prepare(self, worktree: Path, *, barrier: bool = True) -> Informed | None:
        """Before a capture of ``worktree``: what changed since the last one
        (behind a passed barrier, unless ``barrier`` is False: see
        ``ChangedPaths.take_informed``), or None (a full scan; the worktree
        is watched from now on when it can be)."""
        if self.max_worktrees <= 0 or self.max_watches <= 0:
            return None
        with self._lock:
            tracked = self._tracked.get(worktree)
            if tracked is not None:
                self._tracked.move_to_end(worktree)
        if tracked is not None and (tracked.broken or _inode(worktree) != tracked.inode
                                    or tracked.rules.outside_stamp() != tracked.outside):
            # Also when an ignore file outside the worktree changed: the cached
            # answers, and the paths they kept out, may be wrong; start over.
            self._drop(worktree, tracked)
            self.rearmed += 1
            tracked = None
        if tracked is not None and tracked.linked:
            self._drop(worktree, tracked)
            self._refuse(worktree, "a file in it has another name (a hard link)")
            return None
        if tracked is None:
            tracked = self._arm(worktree)
            if tracked is None:
                return None
            # The first take, right after arming: names nothing (the capture
            # it precedes scans the whole tree) and starts the count of
            # events the next capture relies on.
            return self._take(worktree, tracked, barrier)
        if not self._emitter_alive(tracked):
            self._drop(worktree, tracked)
            return None
        return self._take(worktree, tracked, barrier)

    def _take(self, worktree: Path, tracked: _Tracked, barrier: bool = True) -> Informed:
        misses = tracked.changed.barrier_misses
        informed = tracked.changed.take_informed(self._barrier_timeout_s, barrier=barrier)
        if tracked.changed.barrier_misses != misses:
            # Never wait out a barrier on every call: this worktree is captured
            # by full scans for a while.
            self._drop(worktree, tracked)
            self._refuse(worktree, "its event barrier did not arrive")
        return informed

    def stirred(self, worktree: Path) -> bool:
        """Whether ``worktree`` may have changed since its last take (True
        when not watched): a hint without a barrier, for deciding whether to
        wait, never for answering."""
        with self._lock:
            tracked = self._tracked.get(worktree)
        return tracked is None or tracked.broken or tracked.changed.stirred

    def ignored_changed(self, worktree: Path) -> frozenset[str] | None:
        """Ignored paths changed since the last call (see ``_Tracked``), or
        None (too many, or not watched)."""
        with self._lock:
            tracked = self._tracked.get(worktree)
        return None if tracked is None else tracked.take_ignored()

    def lost(self, worktree: Path) -> None:
        """A capture failed: the next one scans the whole tree."""
        with self._lock:
            tracked = self._tracked.get(worktree)
        if tracked is not None:
            tracked.changed.lost()

    def worktrees(self) -> list[Path]:
        """The watched worktrees, least recently captured first."""
        with self._lock:
            return list(self._tracked)

    def watches(self) -> int:
        with self._lock:
            return sum(t.folders for t in self._tracked.values())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            tracked = list(self._tracked.items())
            self._tracked.clear()
            observer, self._observer = self._observer, None
        for _, t in tracked:
            self._unschedule(observer, t)
        if observer is not None:
            observer.stop()
            observer.join(30)
            self._overflow.detach()

    # -- arming --------------------------------------------------------------

    def _arm(self, worktree: Path) -> _Tracked | None:
        """Watch ``worktree`` (before its first, full, capture), within the bounds."""
        with self._lock:
            if self._closed or self._refused_recently(worktree):
                return None
        folders = folders_outside_internal(worktree, self.max_watches)
        if folders is None:
            self._refuse(worktree, f"more than {self.max_watches} folders")
            return None
        tracked = _Tracked(worktree, self.on_change)
        with self._lock:
            self._make_room(folders)
            try:
                tracked.observed = self._schedule(tracked)
            except OSError as exc:  # the watch limit, or the folder just went away
                self._refuse(worktree, f"inotify refused it ({exc.strerror or exc})")
                return None
            tracked._watched = watched_folders(self._observer, tracked.observed)
            tracked.folders = len(tracked._watched) if tracked._watched else folders
        # After the watch began: a link made during the walk is an event.
        if tracked.linked or _hard_linked(worktree, tracked.rules):
            self._drop(worktree, tracked)
            self._refuse(worktree, "a file in it has another name (a hard link)")
            return None
        with self._lock:
            self._tracked[worktree] = tracked
            self.armed += 1
        return tracked

    def _make_room(self, folders: int) -> None:
        """Drop the least recently captured worktrees until one more of
        ``folders`` folders fits.  The caller holds the lock."""
        while self._tracked and (len(self._tracked) >= self.max_worktrees
                                 or self.watches() + folders > self.max_watches):
            worktree, old = self._tracked.popitem(last=False)
            self._unschedule(self._observer, old)
            self.evicted += 1
            log.info("internal watch of %s dropped (least recently captured)", worktree)

    def _schedule(self, tracked: _Tracked) -> Any:
        from watchdog.events import FileSystemEventHandler

        handler = FileSystemEventHandler()
        handler.dispatch = tracked.on_event  # type: ignore[method-assign]
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        if self._observer is None:
            observer = self._observer_factory()
            observer.start()
            self._observer = observer
            self._overflow.attach()
        return self._observer.schedule(handler, str(tracked.worktree), recursive=True,
                                       event_filter=event_filter())

    def _refuse(self, worktree: Path, why: str) -> None:
        log.info("no internal watch of %s: %s; its captures scan the whole tree", worktree, why)
        with self._lock:
            self.refused += 1
            self._refused[worktree] = time.monotonic()
            while len(self._refused) > _REFUSED_MAX:
                self._refused.popitem(last=False)

    def _refused_recently(self, worktree: Path) -> bool:
        at = self._refused.get(worktree)
        return at is not None and time.monotonic() - at < _REFUSED_FOR_S

    # -- dropping ------------------------------------------------------------

    def _emitter_alive(self, tracked: _Tracked) -> bool:
        watched = watched_folders(self._observer, tracked.observed)
        return watched is None or len(watched) > 0

    def _drop(self, worktree: Path, tracked: _Tracked) -> None:
        with self._lock:
            if self._tracked.get(worktree) is tracked:
                del self._tracked[worktree]
            self._unschedule(self._observer, tracked)

    @staticmethod
    def _unschedule(observer: Any, tracked: _Tracked) -> None:
        observed, tracked.observed = tracked.observed, None
        if observer is None or observed is None:
            return
        try:
            observer.unschedule(observed)
        except (KeyError, OSError):
            pass  # its emitter already stopped (the root was deleted)

    def _all_lost(self) -> None:
        """Events were lost (a queue overflow): every next capture scans fully."""
        with self._lock:
            tracked = list(self._tracked.values())
        for t in tracked:
            t.changed.lost()


def _hard_linked(worktree: Path, rules: IgnoreRules) -> bool:
    """Whether a file a capture takes has another name (a hard link).

    A write through a name outside the watched folders (another worktree, a
    copy made with ``cp -al``) makes no inotify event for this tree, so its
    captures must scan.  One lstat per file, once per arming; ignored
    folders (a package manager's hard-linked store) are not entered."""
    folders = [str(worktree)]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # gone, or unreadable: the capture says what it could read
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    # Never .git, .jj or an ignored folder.
                    if rules.triggers(entry.path, is_dir=True, parent_checked=True):
                        folders.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (stat.S_ISREG(st.st_mode) and st.st_nlink > 1
                    and rules.triggers(entry.path, parent_checked=True)):
                return True
    return False

