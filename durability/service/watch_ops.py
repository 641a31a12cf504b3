"""The service's watch operations (``watch``, ``unwatch``, ``watches``) and the
capture path its watches use: the service's own per-worktree ``Coalescer``,
so watch captures queue, coalesce and dedup exactly like hook captures."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durability.backends import resolve_worktree
from durability.capture.capturer import CaptureRequest
from durability.capture.coalesce import Coalescer, coalesced_capture
from durability.config import Settings
from durability.ground.errors import CaptureError, DurabilityError
from durability.service import protocol
from durability.store import AttemptKey, EngineError, Store, now_ms
from durability.watch.manager import WatchManager
from durability.watch.watch import Capture, WatchSpec
from durability.watch.window import Missed, file_missed

__all__ = ["answer", "around_capture", "start_manager"]

log = logging.getLogger("durability.watch")
WatchOp = protocol.WatchReq | protocol.UnwatchReq | protocol.WatchesReq


def start_manager(settings: Settings, coalescer: Coalescer, store: Any, *,
                  wrap: Callable[[Capture], Capture] | None = None) -> WatchManager:
    """The service's watch manager, with the recorded watches taken up again.
    ``wrap``: around the watches' capture (``owners.WatchOwners.capture``)."""
    from durability.store.watch_rows import Watches

    def get_store() -> Store:
        return store() if callable(store) else store  # type: ignore[no-any-return]

    try:
        registry: Watches | None = Watches(settings.database)
    except EngineError as exc:  # the service still captures; watches are not kept
        log.warning("watches will not be recorded: %s", exc)
        registry = None
    capture = coalesced_capture(coalescer)
    manager = WatchManager(capture=wrap(capture) if wrap else capture, settings=settings,
                           store=get_store, registry=registry)
    missed = _file_missed(settings, get_store)
    try:
        resumed = manager.resume(missed={m.worktree for m in missed})
    except (EngineError, OSError, CaptureError) as exc:
        log.warning("could not resume watches: %s", exc)
    else:
        if resumed:
            log.info("resumed %d watch(es)", resumed)
    _catch_up_unwatched(manager, coalescer, missed)
    return manager


def _file_missed(settings: Settings, store: Callable[[], Store]) -> list[Missed]:
    """One gap per settle window a dead watcher left open (before any capture,
    so the gap comes before the checkpoint that catches the tree up)."""
    try:
        missed = file_missed(settings, found_by="service start", store=store)
    except (OSError, DurabilityError) as exc:  # the state folder is unusable; captures say so
        log.warning("could not look for missed settle windows: %s", exc)
        return []
    for m in missed:
        log.warning("settle window of %s missed (opened %d ms before); gap filed", m.worktree,
                    now_ms() - m.opened_at_ms)
    return missed


def _catch_up_unwatched(manager: WatchManager, coalescer: Coalescer,
                        missed: list[Missed]) -> None:
    """A missed window whose worktree no resumed watch covers (a foreground
    watch died, or the watch was ended) still gets its catch-up capture."""
    done: set[tuple[Path, AttemptKey]] = set()
    for m in missed:
        if manager.get(m.worktree) is not None or (m.worktree, m.key) in done:
            continue
        done.add((m.worktree, m.key))
        request = CaptureRequest(key=m.key, worktree=m.worktree, source="watch",
                                 request_id=f"watch-{uuid.uuid4()}", label="watch catch-up")
        try:
            coalescer.submit(request)  # answered on its worker; a failure files its gap
        except RuntimeError as exc:
            log.warning("no catch-up capture of %s: %s", m.worktree, exc)


def around_capture(manager: WatchManager, req: protocol.CaptureReq,
                   capture: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """An engine attempt's capture with its watch step (``CaptureReq.watch``):
    the park before the capture, so no capture of the attempt's watch comes
    after its end capture; the take-over after it, so none comes before its
    start capture.  Each step answers as its own request would."""
    if req.watch == "park":
        step = _step(manager, protocol.UnwatchReq(
            v=1, op="unwatch", worktree=req.worktree, final=False, keep=True,
            run_id=req.run_id, node_id=req.node_id, iteration=req.iteration,
            attempt=req.attempt))
        return {**capture(), "watch": step}
    done = capture()
    step = _step(manager, protocol.WatchReq(
        v=1, op="watch", worktree=req.worktree, baseline=False, reuse=True,
        run_id=req.run_id, node_id=req.node_id, iteration=req.iteration, attempt=req.attempt))
    return {**done, "watch": step}


def _step(manager: WatchManager, req: protocol.WatchReq | protocol.UnwatchReq
          ) -> dict[str, Any]:
    """A carried watch step: a bug in it is answered as one (the caller then
    takes the step itself), never by dropping the capture's answer."""
    try:
        return answer(manager, req)
    except Exception as exc:
        log.exception("watch step %s of %s failed unexpectedly", req.op, req.worktree)
        return protocol.error_response("internal-error", f"{type(exc).__name__}: {exc}")


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
    before = manager.get(root)
    watch = manager.add(spec, baseline=req.baseline, reuse=req.reuse)
    return {"v": 1, "ok": True, "watch": spec.to_dict(), "mode": watch.mode,
            "reused": req.reuse and watch is before}


def _unwatch(manager: WatchManager, req: protocol.UnwatchReq) -> dict[str, Any]:
    path = Path(req.worktree)
    try:
        path = resolve_worktree(req.worktree)
    except CaptureError:
        pass  # a deleted worktree can still be unwatched by the path it had
    key = req.key()
    if key is not None:
        # Limited to one attempt's watch: another's (another owner of the
        # run took it over) is left as it is, and so is its row.
        try:
            if req.keep:
                spec = manager.park(path, key)
                return {"v": 1, "ok": True, "watch": spec.to_dict(), "final": None,
                        "parked": True}
            spec, final = manager.remove(path, final=req.final, key=key)
        except KeyError:
            return {"v": 1, "ok": True, "watch": {"worktree": str(path)}, "final": None,
                    "parked": False, "left": True}
        return {"v": 1, "ok": True, "watch": spec.to_dict(),
                "final": final.to_dict() if final else None}
    if req.keep:
        try:
            spec = manager.park(path)
        except KeyError:
            return protocol.error_response("not-found", f"{path} is not watched")
        return {"v": 1, "ok": True, "watch": spec.to_dict(), "final": None, "parked": True}
    try:
        spec, final = manager.remove(path, final=req.final)
    except KeyError:
        if manager.forget(path):
            return {"v": 1, "ok": True, "watch": {"worktree": str(path)}, "final": None}
        return protocol.error_response("not-found", f"{path} is not watched")
    return {"v": 1, "ok": True, "watch": spec.to_dict(),
            "final": final.to_dict() if final else None}
