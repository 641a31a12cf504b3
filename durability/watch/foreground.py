"""Watches from the command line: ask the running service, run one in the
foreground (``durability watch --foreground``), or end a recorded watch when
no service runs."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from durability.backends import resolve_worktree
from durability.capture.capturer import Capturer
from durability.capture.coalesce import Coalescer, coalesced_capture
from durability.capture.inprocess import capture_once, lazy_store
from durability.config import Settings
from durability.ground import client
from durability.ground.errors import (
    CaptureError,
    DurabilityError,
    ServiceUnreachable,
    WorktreeMissing,
)
from durability.store import AttemptKey, NotFound, Store
from durability.watch.manager import WatchManager
from durability.watch.watch import WatchSpec
from durability.watch.window import file_missed

__all__ = ["request_unwatch", "request_watch", "run_foreground"]

# A watch request answers at once; an unwatch waits for the final capture.
_WATCH_TIMEOUT_S = 30.0


def request_watch(settings: Settings, spec: WatchSpec, *, baseline: bool = True,
                  reuse: bool = False) -> dict[str, Any]:
    """Register ``spec`` with the running service; its answer.  ``baseline``
    False: no capture when watching starts (the caller has just taken one).
    ``reuse``: a watch of the worktree for the same run (parked by an
    earlier attempt) passes to ``spec``'s attempt in place; the answer's
    ``reused`` says whether it did (an older service arms a new one)."""
    k = spec.key
    wire: dict[str, Any] = {
        "v": 1, "op": "watch", "run_id": k.run_id, "node_id": k.node_id,
        "iteration": k.iteration, "attempt": k.attempt, "worktree": str(spec.worktree),
        "settle_ms": spec.settle_ms, "max_delay_ms": spec.max_delay_ms, "poll": spec.poll}
    if not baseline:
        wire["baseline"] = False
    if reuse:
        wire["reuse"] = True
    return _call(settings, wire, _WATCH_TIMEOUT_S)


def request_unwatch(settings: Settings, path: Path,
                    env: Mapping[str, str] = os.environ, *,
                    final: bool = True, keep: bool = False,
                    key: AttemptKey | None = None) -> dict[str, Any]:
    """End the watch of ``path`` with a final capture (in this process when
    no service runs: the recorded watch is removed so none resumes it).
    ``final`` False: none, here or offline; the caller captures the tree
    next (or already did), which answers what the watch heard (its open
    window is not left to be filed).  ``keep``: park the watch for the run's
    next attempt instead (no final capture); the answer's ``parked`` says
    whether it was (an older service ends it); ``ServiceUnreachable`` when
    no service answers.  ``key``: only if the watch is still that attempt's
    (the answer's ``left`` says it was not, and nothing was done)."""
    worktree = _root_or_path(path)
    wire: dict[str, Any] = {"v": 1, "op": "unwatch", "worktree": str(worktree)}
    if not final or keep:
        wire["final"] = False
    if keep:
        wire["keep"] = True
    if key is not None:
        wire.update(run_id=key.run_id, node_id=key.node_id, iteration=key.iteration,
                    attempt=key.attempt)
    try:
        return _call(settings, wire, settings.jj_timeout_s + 60)
    except ServiceUnreachable:
        if keep:
            raise
        return _unwatch_offline(settings, worktree, env, final=final, key=key)


def run_foreground(settings: Settings, spec: WatchSpec, stop: threading.Event, *,
                   env: Mapping[str, str] = os.environ,
                   started: threading.Event | None = None) -> dict[str, Any]:
    """Watch in this process until ``stop`` is set; returns the final capture.
    Raises ``WorktreeMissing`` when the worktree went away (its gap is filed)."""
    store = lazy_store(settings)
    capturer = Capturer(settings=settings, store=store, env=env)
    lock_timeout = settings.jj_timeout_s + 30
    coalescer = Coalescer(lambda reqs: capturer.capture(reqs, lock_timeout_s=lock_timeout))
    manager = WatchManager(capture=coalesced_capture(coalescer), settings=settings, store=store)
    try:
        # A window an earlier watch of this worktree left open: its gap
        # first, then the first capture catches the tree up.
        missed = _file_missed(settings, spec.worktree, store)
        watch = manager.add(spec, record=False, catch_up=bool(missed))
        if started is not None:
            started.set()
        while not stop.wait(1.0):
            if manager.get(spec.worktree) is None:
                break  # the worktree went away: the watch ended with a gap
        try:
            gone, final = False, manager.remove(spec.worktree)[1]
        except KeyError:  # ended by the housekeeper, with its gap
            gone, final = True, None
    finally:
        manager.close(final=False)
        coalescer.close()
    if gone:  # a failure, not a stop: there was no final capture to show
        raise WorktreeMissing(f"watched worktree {spec.worktree} is gone; the watch ended "
                              "(a worktree-missing gap is on record)")
    return {"watch": spec.to_dict(), "mode": watch.mode, "captures": watch.captures,
            "final": final.to_dict() if final else None}


def _file_missed(settings: Settings, worktree: Path, store: Callable[[], Store] | None, *,
                 found_by: str = "foreground watch start") -> bool:
    """Whether a window of this worktree was missed (its gap is now filed)."""
    try:
        return bool(file_missed(settings, found_by=found_by, worktree=worktree, store=store))
    except (OSError, DurabilityError):
        return False  # the state folder is unusable: the capture itself will say so


def _unwatch_offline(settings: Settings, worktree: Path, env: Mapping[str, str], *,
                     final: bool = True, key: AttemptKey | None = None) -> dict[str, Any]:
    from durability.store.watch_rows import Watches

    watches = Watches(settings.database)
    if key is not None and not any(Path(w.worktree) == worktree and w.key == key
                                   for w in watches.all()):
        return {"ok": True, "watch": {"worktree": str(worktree)}, "final": None, "left": True}
    row = watches.remove(str(worktree))
    if row is None:
        raise NotFound(f"{worktree} is not watched")
    # The dead service's open window, if any, is on record before the final
    # capture that catches the tree up (spooled: the next ingest stores it).
    _file_missed(settings, worktree, None, found_by="unwatch")
    if not final:  # the caller's own capture answers the tree
        return {"ok": True, "watch": row.to_dict(), "final": None}
    outcome = capture_once(settings, key=row.key, worktree=worktree, source="watch",
                           request_id=f"watch-{uuid.uuid4()}", label="watch final",
                           lock_timeout_s=settings.jj_timeout_s + 30, env=env)
    return {"ok": True, "watch": row.to_dict(), "final": outcome.to_dict() if outcome else None}


def _root_or_path(path: Path) -> Path:
    try:
        return resolve_worktree(path)
    except CaptureError:
        return Path(os.path.abspath(path))  # gone: unwatch it by the path it had


def _call(settings: Settings, wire: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    try:
        answer = client.call(settings.socket_path, wire, timeout_s=timeout_s)
    except ServiceUnreachable as exc:
        raise ServiceUnreachable(f"{exc}; start it with `durability serve --detach`, or use "
                                 "`durability watch --foreground`") from None
    return client.check_answer(answer)


