"""One check of ``durability doctor``: its name, ok / warn / fail, what was
found, and the one-line next step when it is not ok."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAIL", "OK", "WARN", "Check"]

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    next_step: str = ""

    @property
    def ok(self) -> bool:
        """Only a failure is not ok: a warning never fails ``doctor``."""
        return self.status != FAIL
