"""worktree-durability, Layer 2: every change an agent makes to a worktree
becomes a restorable jj checkpoint linked to its task attempt.

Importing this package is cheap on purpose (the hook's fast path imports it):
the public API is loaded on first use.
"""

from __future__ import annotations

# typing is not imported at run time: this package is on the hook's fast path
# and typing costs ~3 ms to import (see durability/ground/client.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "AmbientAttempt",
    "AttemptKey",
    "CaptureError",
    "ConnectionLost",
    "DurabilityError",
    "InvalidInput",
    "Outcome",
    "RestoreError",
    "Restored",
    "ServiceError",
    "ServiceTimeout",
    "ServiceUnreachable",
    "Settings",
    "Thread",
    "attempt",
    "bind_context",
    "capture_after",
    "current_attempt",
    "durable_tool",
    "restore",
    "snapshot_now",
]

#: Where each public name lives: imported on first use.
_LAZY = {
    "AmbientAttempt": ("durability.integrations.wrap", "AmbientAttempt"),
    "AttemptKey": ("durability.store", "AttemptKey"),
    "CaptureError": ("durability.ground.errors", "CaptureError"),
    "ConnectionLost": ("durability.ground.errors", "ConnectionLost"),
    "DurabilityError": ("durability.ground.errors", "DurabilityError"),
    "InvalidInput": ("durability.ground.errors", "InvalidInput"),
    "Outcome": ("durability.capture.capturer", "Outcome"),
    "RestoreError": ("durability.ground.errors", "RestoreError"),
    "Restored": ("durability.restore.apply", "Restored"),
    "ServiceError": ("durability.ground.errors", "ServiceError"),
    "ServiceTimeout": ("durability.ground.errors", "ServiceTimeout"),
    "ServiceUnreachable": ("durability.ground.errors", "ServiceUnreachable"),
    "Settings": ("durability.config", "Settings"),
    "Thread": ("durability.integrations.wrap", "Thread"),
    "attempt": ("durability.integrations.wrap", "attempt"),
    "bind_context": ("durability.integrations.wrap", "bind_context"),
    "capture_after": ("durability.integrations.wrap", "capture_after"),
    "current_attempt": ("durability.integrations.wrap", "current_attempt"),
    "durable_tool": ("durability.integrations.wrap", "durable_tool"),
    "restore": ("durability.restore.apply", "restore"),
    "snapshot_now": ("durability.capture.snapshot", "snapshot_now"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'durability' has no attribute {name!r}")
