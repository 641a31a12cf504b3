"""The service's watch operations (``watch``, ``unwatch``, ``watches``) and the
capture path its watches use: the service's own per-worktree ``Coalescer``,
so watch captures queue, coalesce and dedup exactly like hook captures."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from durability import protocol
from durability.backends import resolve_worktree
from durability.capture import CaptureRequest, Outcome
from durability.coalesce import Coalescer
from durability.config import Settings
from durability.errors import CaptureError
from durability.watch import Capture, WatchSpec
from durability.watch_manager import WatchManager
from engine import AttemptKey, EngineError, Store

__all__ = ["answer", "coalesced_capture", "start_manager"]

log = logging.getLogger("durability.watch")
WatchOp = protocol.WatchReq | protocol.UnwatchReq | protocol.WatchesReq


def coalesced_capture(coalescer: Coalescer) -> Capture:
    """A blocking capture through ``coalescer``."""

    def capture(request: CaptureRequest) -> Outcome:
        try:
            future = coalescer.submit(request)
        except RuntimeError as exc:  # shutting down
            return Outcome(request.request_id, error_code="service-unreachable",
                           error_message=str(exc))
        return future.result()

    return capture


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
    return {"v": 1, "ok": True, "watch": spec.to_dict(), "final": final_dict(final)}


def final_dict(final: Outcome | None) -> dict[str, Any] | None:
    """The final capture, as the CLI and the socket show it."""
    if final is None:
        return None
    if final.ok:
        done: dict[str, Any] = {"seq": final.seq, "commit_id": final.commit_id,
                                "deduped": final.deduped}
        if final.skipped:
            done["skipped"] = [{"path": s.path, "reason": s.reason} for s in final.skipped]
        return done
    return {"error": {"code": final.error_code, "message": final.error_message},
            "gap_recorded": final.gap_recorded}
