"""worktree-durability, Layer 2: every change an agent makes to a worktree
becomes a restorable jj checkpoint linked to its task attempt.

Importing this package is cheap on purpose (the hook's fast path imports it):
the public API is loaded on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Settings", "restore", "snapshot_now"]

_LAZY = {
    "Settings": ("durability.config", "Settings"),
    "restore": ("durability.restore", "restore"),
    "snapshot_now": ("durability.snapshot", "snapshot_now"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'durability' has no attribute {name!r}")
