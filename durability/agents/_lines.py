"""What the adapters share: decoding one stream line, capping what is kept of
it, and reading reset times out of usage-limit messages."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from typing import Any

__all__ = ["MAX_RAW_CHARS", "capped", "decode", "next_wall_clock_ms"]

#: A decoded line kept whole in an Event's ``raw`` up to this size (a
#: command's output can be megabytes); beyond it only its type is kept.
MAX_RAW_CHARS = 16 * 1024


def decode(line: str) -> dict[str, Any] | None:
    """The JSON object of one stdout line; None for anything else (a banner,
    a blank line, a line cut short by a killed process)."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def capped(line: str, value: dict[str, Any]) -> dict[str, Any]:
    if len(line) <= MAX_RAW_CHARS:
        return value
    return {"type": value.get("type"), "truncated": True, "chars": len(line)}


_CLOCK = re.compile(r"(?:\b(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2}),?\s+(?:at\s+)?)?"
                    r"\b(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<meridiem>[AaPp][Mm])?\b")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def next_wall_clock_ms(text: str, now_s: float | None = None) -> int | None:
    """The next moment (epoch ms, local time) that a ``3:03 AM``, ``15:03``
    or ``Dec 3 3:03 AM`` in ``text`` names (the forms Codex 0.171.0 formats a
    reset with: ``%-I:%M %p``, ``%b %-d %-I:%M %p``); None when it names none."""
    match = _CLOCK.search(text)
    if match is None:
        return None
    hour, minute = int(match.group("hour")), int(match.group("minute"))
    meridiem = (match.group("meridiem") or "").lower()
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    now = datetime.fromtimestamp(time.time() if now_s is None else now_s).astimezone()
    at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    month = match.group("month")
    if month in _MONTHS:
        try:
            at = at.replace(month=_MONTHS.index(month) + 1, day=int(match.group("day")))
        except ValueError:
            return None
        if at <= now:
            at = at.replace(year=at.year + 1)
    elif at <= now:
        at += timedelta(days=1)
    return int(at.timestamp() * 1000)
