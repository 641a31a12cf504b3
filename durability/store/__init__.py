"""Layer 1: the lean state store (runs, attempts, checkpoints, gaps).

It never imports ``durability`` and knows nothing of jj, click or watchdog.
"""

from __future__ import annotations

from durability.ground.store_errors import (
    EngineError,
    InvalidValue,
    NotFound,
    RecordRefused,
    StoreUnavailable,
)
from durability.store.models import (
    Attempt,
    AttemptKey,
    Checkpoint,
    Gap,
    NewCheckpoint,
    Recorded,
    Session,
)
from durability.store.store import Store, now_ms

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
