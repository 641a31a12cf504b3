"""Budgets are abort conditions, not dashboards.

A run carries optional limits on turns, tokens and cost.  Tasks report
progress as it happens; the totals are kept in the database (so a resumed
run keeps counting from where it stopped) and the first limit crossed ends
the attempt in flight with a code naming that limit.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from durability.ground.store_errors import BudgetExceeded, InvalidValue

__all__ = ["Limits", "Usage", "check"]

#: The order limits are checked in, so "the first limit crossed" is stable.
LIMIT_NAMES = ("turns", "tokens", "cost")


@dataclass(frozen=True)
class Limits:
    """Ceilings for a run; None means no limit."""

    turns: int | None = None
    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 0):
                raise InvalidValue(f"limit {name}={value!r} must be a number >= 0")

    def merged(self, other: Limits) -> Limits:
        """These limits with every limit ``other`` sets replacing ours."""
        return Limits(**{n: getattr(other, n) if getattr(other, n) is not None
                         else getattr(self, n) for n in LIMIT_NAMES})

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def from_json(cls, raw: str | None) -> Limits:
        return cls(**json.loads(raw)) if raw else cls()


@dataclass(frozen=True)
class Usage:
    """What a run has spent so far."""

    turns: int = 0
    tokens: int = 0
    cost: float = 0.0


def check(limits: Limits, usage: Usage) -> None:
    """Raise ``BudgetExceeded`` for the first limit ``usage`` has gone past."""
    for name in LIMIT_NAMES:
        allowed = getattr(limits, name)
        used = getattr(usage, name)
        if allowed is not None and used > allowed:
            raise BudgetExceeded(name, used, allowed)
