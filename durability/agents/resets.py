"""A usage limit's reset time, read from the words a CLI shows.

Claude Code words a reset the way its ``Vee`` formatter does (read from the
2.1.197 binary): within a day the hour alone, ``resets 9am (Europe/Berlin)``
or ``resets 9:30pm (Europe/Berlin)``; further off the date too,
``resets Dec 3, 9am (Europe/Berlin)``, with the year when it is not this
one (``resets Jan 2, 2027, 9am (UTC)``).  The zone in brackets is the one
the CLI's machine runs in; without it (or a zone this Python does not know)
the local zone is assumed.  An hour with no date that has already passed
today means tomorrow; a date with no year already past means next year.
Older releases wrote ``Claude AI usage limit reached|1735689600`` (epoch
seconds), and a few messages say ``resets in 2h 30m``: both read too.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["reset_at_ms"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_AT = re.compile(
    r"\bresets\s+(?:at\s+)?"
    r"(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?"
    r"\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)"
    r"(?:\s*\((?P<tz>[A-Za-z0-9_+\-/]{1,64})\))?", re.IGNORECASE)
_IN = re.compile(r"\bresets\s+in\s+(?:(?P<d>\d+)\s*d\s*)?(?:(?P<h>\d+)\s*h\s*)?"
                 r"(?:(?P<m>\d+)\s*m(?:in)?)?", re.IGNORECASE)
_EPOCH = re.compile(r"usage limit reached\|(?P<epoch>\d{9,11})\b", re.IGNORECASE)


def reset_at_ms(text: str, now_ms: int, local: tzinfo | None = None) -> int | None:
    """The reset ``text`` names, in epoch milliseconds; None when it names none.

    ``now_ms`` is when the text was seen (the clock seam); ``local`` the zone
    assumed when the text names none (default: this machine's)."""
    epoch = _EPOCH.search(text)
    if epoch:
        return int(epoch["epoch"]) * 1000
    relative = _IN.search(text)
    if relative and any(relative.group(k) for k in ("d", "h", "m")):
        d, h, m = (int(relative.group(k) or 0) for k in ("d", "h", "m"))
        return now_ms + ((d * 24 + h) * 60 + m) * 60_000
    found = _AT.search(text)
    return None if found is None else _absolute(found, now_ms, local)


def _zone(name: str | None, local: tzinfo | None) -> tzinfo:
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    if local is not None:
        return local
    return datetime.now(UTC).astimezone().tzinfo or UTC


def _absolute(found: re.Match[str], now_ms: int, local: tzinfo | None) -> int | None:
    zone = _zone(found["tz"], local)
    now = datetime.fromtimestamp(now_ms / 1000, zone)
    hour, minute = int(found["hour"]), int(found["minute"] or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if found["ampm"].lower() == "pm" else 0)
    if found["mon"] is None:
        at = _at(now.date(), hour, minute, zone)
        if at <= now:
            at = _at(now.date() + timedelta(days=1), hour, minute, zone)
        return int(at.timestamp() * 1000)
    month = _MONTHS.index(found["mon"][:3].lower()) + 1
    year = int(found["year"]) if found["year"] else now.year
    try:
        at = _at(date(year, month, int(found["day"])), hour, minute, zone)
        if at <= now and not found["year"]:
            at = _at(date(year + 1, month, int(found["day"])), hour, minute, zone)
    except ValueError:
        return None
    return int(at.timestamp() * 1000)


def _at(day: date, hour: int, minute: int, zone: tzinfo) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
