"""Capture in this process, without the service.

Used by the hook when no service answers, and by the CLI.  It takes the same
per-worktree file lock as the service, so a stopped service costs speed, not
data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from durability.capture.boundary import record_boundaries
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.config import Settings
from durability.store import AttemptKey, Store
from durability.store.boundaries import CallInfo

__all__ = ["capture_once", "lazy_store"]


def lazy_store(settings: Settings) -> Callable[[], Store]:
    """A store opened on first use, so a broken database only costs the
    record, never the capture itself."""
    opened: list[Store] = []

    def get() -> Store:
        if not opened:
            opened.append(Store(settings.database))
        return opened[0]

    return get


def capture_once(
    settings: Settings,
    *,
    key: AttemptKey,
    worktree: Path,
    source: str,
    request_id: str,
    tool_use_id: str | None = None,
    label: str | None = None,
    agent: dict[str, str] | None = None,
    lock_timeout_s: float,
    env: Mapping[str, str] = os.environ,
    deadline: float | None = None,
    call: CallInfo | None = None,
) -> Outcome:
    """Capture ``worktree`` now and record it for ``key``; gaps are filed.
    ``deadline`` (``time.monotonic()``): jj's timeout ends there at the latest."""
    store = lazy_store(settings)
    capturer = Capturer(settings=settings, store=store, env=env, deadline=deadline)
    request = CaptureRequest(key=key, worktree=worktree, source=source, request_id=request_id,
                             tool_use_id=tool_use_id, label=label,
                             harness=(agent or {}).get("harness"),
                             agent_id=(agent or {}).get("agent_id"),
                             agent_type=(agent or {}).get("agent_type"), call=call,
                             session_id=(agent or {}).get("session_id"))
    outcome = capturer.capture([request], lock_timeout_s=lock_timeout_s)[0]
    record_boundaries(store, [request], [outcome])  # issue 24: every call
    return outcome
