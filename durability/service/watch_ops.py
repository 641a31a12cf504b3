"""The service's watch operations (``watch``, ``unwatch``, ``watches``) and the
capture path its watches use: the service's own per-worktree ``Coalescer``,
so watch captures queue, coalesce and dedup exactly like hook captures."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from durability.backends import resolve_worktree
from durability.capture.coalesce import Coalescer, coalesced_capture
from durability.config import Settings
from durability.errors import CaptureError
from durability.service import protocol
from durability.watch.manager import WatchManager
from durability.watch.watch import WatchSpec
from engine import AttemptKey, EngineError, Store

__all__ = ["answer", "start_manager"]

log = logging.getLogger("durability.watch")
WatchOp = protocol.WatchReq | protocol.UnwatchReq | protocol.WatchesReq


def start_manager(settings: Settings, coalescer: Coalescer, store: Any) -> WatchManager:
    """The service's watch manager, with the recorded watches taken up again."""
    from engine.watches import Watches

    def get_store() -> Store:
        return store() if callable(store) else store  # type: ignore[no-any-return]

    try:
        registry: Watches | None = Watches(settings.db_path)
    except EngineError as exc:  # the service still captures; watches are not kept
        log.warning("watches will not be recorded: %s", exc)
        registry = None
    manager = WatchManager(capture=coalesced_capture(coalescer), settings=settings,
                           store=get_store, registry=registry)
    try:
        resumed = manager.resume()
    except (EngineError, OSError, CaptureError) as exc:
        log.warning("could not resume watches: %s", exc)
    else:
        if resumed:
            log.info("resumed %d watch(es)", resumed)
    return manager


def answer(manager: WatchManager, req: WatchOp) -> dict[str, Any]:
    """The response to one watch operation."""
    try:
        if isinstance(req, protocol.WatchReq):
            return _watch(manager, req)
        if isinstance(req, protocol.UnwatchReq):
            return _unwatch(manager, req)
        return {"v": 1, "ok": True, "watches": manager.list()}
    except (CaptureError, EngineError) as exc:
        return protocol.error_response(exc.code, str(exc))
    except RuntimeError as exc:
        return protocol.error_response("service-unreachable", str(exc))
    except OSError as exc:  # inotify refused the folder for another reason
        return protocol.error_response("internal-error", f"cannot watch: {exc}")


def _watch(manager: WatchManager, req: protocol.WatchReq) -> dict[str, Any]:
    root = resolve_worktree(req.worktree)
    spec = WatchSpec(root, AttemptKey(req.run_id, req.node_id, req.iteration, req.attempt),
                     req.settle_ms, req.max_delay_ms, req.poll)
    watch = manager.add(spec)
    return {"v": 1, "ok": True, "watch": spec.to_dict(), "mode": watch.mode}


def _unwatch(manager: WatchManager, req: protocol.UnwatchReq) -> dict[str, Any]:
    path = Path(req.worktree)
    try:
        path = resolve_worktree(req.worktree)
    except CaptureError:
        pass  # a deleted worktree can still be unwatched by the path it had
    try:
        spec, final = manager.remove(path)
    except KeyError:
        if manager.forget(path):
            return {"v": 1, "ok": True, "watch": {"worktree": str(path)}, "final": None}
        return protocol.error_response("not-found", f"{path} is not watched")
    return {"v": 1, "ok": True, "watch": spec.to_dict(),
            "final": final.to_dict() if final else None}
