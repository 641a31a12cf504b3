"""Errors of the state layer.

Hierarchy::

    EngineError                 base; every error carries a stable ``code``
    ├── StoreUnavailable        "store-unavailable": the database cannot be
    │                           opened or written (disk full, locked too long,
    │                           permissions, corruption)
    ├── NotFound                "not-found": a run, attempt or checkpoint that
    │                           does not exist
    └── InvalidValue            "invalid-value": a value that fails validation
"""

from __future__ import annotations

__all__ = ["EngineError", "InvalidValue", "NotFound", "StoreUnavailable"]


class EngineError(Exception):
    """Base of every error raised by ``engine``."""

    code = "engine-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StoreUnavailable(EngineError):
    code = "store-unavailable"


class NotFound(EngineError):
    code = "not-found"


class InvalidValue(EngineError):
    code = "invalid-value"
