"""Layer 1: the lean state store (runs, attempts, checkpoints, gaps).

It never imports ``durability`` and knows nothing of jj, click or watchdog.
"""

from __future__ import annotations

from engine.errors import EngineError, InvalidValue, NotFound, RecordRefused, StoreUnavailable
from engine.models import (
    Attempt,
    AttemptKey,
    Checkpoint,
    Gap,
    NewCheckpoint,
    Recorded,
    Session,
)
from engine.store import Store, now_ms

__all__ = [
    "Attempt",
    "AttemptKey",
    "Checkpoint",
    "EngineError",
    "Gap",
    "InvalidValue",
    "NewCheckpoint",
    "NotFound",
    "RecordRefused",
    "Recorded",
    "Session",
    "Store",
    "StoreUnavailable",
    "now_ms",
]
