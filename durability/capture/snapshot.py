"""A manual checkpoint (``durability snapshot``): through the service when one
answers, in this process otherwise."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.backends import resolve_worktree
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.capture.inprocess import capture_once, lazy_store
from durability.config import Settings
from durability.ground import client
from durability.ground.errors import CaptureError, ServiceUnreachable, from_code
from durability.store import AttemptKey

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
    agent: dict[str, str] | None = None,
    wire_fields: Mapping[str, Any] | None = None,
    answered: dict[str, Any] | None = None,
) -> Outcome:
    """Capture now: the ``Outcome`` (``seq``, ``commit_id``, ``deduped``), or
    raise the error of the gap's code (``errors.from_code``).  ``wire_fields``:
    more fields of the service request (an engine attempt's ``watch``
    step); ``answered`` gets the service's whole answer (left empty when
    the capture was taken in this process)."""
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
        timeout_ms=int(settings.jj_timeout_s * 1000) + 30_000, agent=agent)
    if wire_fields:
        wire.update(wire_fields)
    try:
        answer = client.call(settings.socket_path, wire, timeout_s=settings.jj_timeout_s + 60)
    except ServiceUnreachable:  # none, or it went away (ConnectionLost): capture here
        outcome = capture_once(settings, key=key, worktree=root, source=source,
                               request_id=request_id, tool_use_id=tool_use_id, label=label,
                               agent=agent, lock_timeout_s=settings.jj_timeout_s + 30, env=env)
    else:
        outcome = Outcome.from_answer(request_id, answer)
        if answered is not None:
            answered.update(answer)
    if not outcome.ok:
        raise from_code(outcome.error_code or "internal-error", outcome.error_message or "")
    return outcome
