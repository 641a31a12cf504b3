"""A manual checkpoint (``durability snapshot``): through the service when one
answers, in this process otherwise."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability import client
from durability.backends import resolve_worktree
from durability.capture import Capturer, CaptureRequest, skipped_list
from durability.config import Settings
from durability.errors import CaptureError
from durability.inprocess import capture_once, lazy_store
from engine import AttemptKey

__all__ = ["snapshot_now"]


def snapshot_now(
    settings: Settings,
    *,
    key: AttemptKey,
    path: Path,
    request_id: str,
    label: str | None = None,
    source: str = "manual",
    tool_use_id: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> dict[str, Any]:
    """Capture now; ``{"seq", "commit_id", "deduped"}``, or raise with the gap's
    code.  When the checkpoint left paths out, ``skipped`` lists them
    (``{"path", "reason"}``, each also filed as a gap)."""
    # Cut as the hook does, to what the service accepts, so a long label is
    # stored the same way whether or not a service answers.
    label = label[:1000] if label is not None else None
    tool_use_id = tool_use_id[:200] if tool_use_id is not None else None
    request = CaptureRequest(key=key, worktree=Path(os.path.abspath(path)), source=source,
                             request_id=request_id, tool_use_id=tool_use_id, label=label)
    try:
        root = resolve_worktree(path)
    except CaptureError as exc:
        Capturer(settings=settings, store=lazy_store(settings), env=env).fail(request, exc)
        raise
    wire = client.capture_request(
        request_id=request_id, run_id=key.run_id, node_id=key.node_id,
        iteration=key.iteration, attempt=key.attempt, worktree=str(root), source=source,
        tool_use_id=tool_use_id, label=label,
        timeout_ms=int(settings.jj_timeout_s * 1000) + 30_000)
    try:
        answer = client.call(settings.socket_path, wire, timeout_s=settings.jj_timeout_s + 60)
    except (client.Unreachable, client.ConnectionLost):
        outcome = capture_once(settings, key=key, worktree=root, source=source,
                               request_id=request_id, tool_use_id=tool_use_id, label=label,
                               lock_timeout_s=settings.jj_timeout_s + 30, env=env)
        answer = {"ok": outcome.ok, "seq": outcome.seq, "commit_id": outcome.commit_id,
                  "deduped": outcome.deduped, "skipped": skipped_list(outcome),
                  "error": {"code": outcome.error_code, "message": outcome.error_message}}
    except client.WaitTimeout as exc:
        raise CaptureError(str(exc), code="timeout") from None
    if not answer.get("ok"):
        error = answer.get("error") or {}
        raise CaptureError(str(error.get("message")), code=str(error.get("code")))
    result = {"seq": answer["seq"], "commit_id": answer["commit_id"],
              "deduped": bool(answer["deduped"])}
    if answer.get("skipped"):
        result["skipped"] = list(answer["skipped"])
    return result
