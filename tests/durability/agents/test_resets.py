"""Reading a usage limit's reset time as Claude Code words it (its Vee formatter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from durability.agents.resets import reset_at_ms

BERLIN = ZoneInfo("Europe/Berlin")


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def at(text: str, now: datetime, local: timezone | ZoneInfo | None = None) -> int | None:
    return reset_at_ms(text, ms(now), local)


def test_an_hour_later_today_in_the_named_zone() -> None:
    now = datetime(2026, 12, 2, 5, 0, tzinfo=BERLIN)
    assert at("You've hit your session limit · resets 9am (Europe/Berlin)", now) == \
        ms(datetime(2026, 12, 2, 9, 0, tzinfo=BERLIN))
    assert at("resets 9:30pm (Europe/Berlin)", now) == ms(datetime(2026, 12, 2, 21, 30,
                                                                    tzinfo=BERLIN))


def test_an_hour_already_past_means_tomorrow() -> None:
    now = datetime(2026, 12, 2, 10, 0, tzinfo=BERLIN)
    assert at("resets 9am (Europe/Berlin)", now) == ms(datetime(2026, 12, 3, 9, 0, tzinfo=BERLIN))
    # The hour itself is past too: a reset is never now.
    assert at("resets 10am (Europe/Berlin)", now) == ms(datetime(2026, 12, 3, 10, tzinfo=BERLIN))


def test_midnight_and_noon() -> None:
    now = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
    assert at("resets 12am (UTC)", now) == ms(datetime(2026, 12, 3, 0, 0, tzinfo=UTC))
    assert at("resets 12pm (UTC)", now) == ms(datetime(2026, 12, 3, 12, 0, tzinfo=UTC))


def test_tomorrow_across_a_daylight_saving_change_keeps_the_wall_hour() -> None:
    # Berlin leaves summer time on 2026-10-25: 9am tomorrow is 08:00 UTC, not 07:00.
    now = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN)
    assert at("resets 9am (Europe/Berlin)", now) == ms(datetime(2026, 10, 25, 8, 0, tzinfo=UTC))


def test_a_date_further_off_with_and_without_the_year() -> None:
    now = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    assert at("resets Dec 5, 9am (America/New_York)", now) == \
        ms(datetime(2026, 12, 5, 9, tzinfo=ZoneInfo("America/New_York")))
    assert at("resets Jan 2, 2027, 9:15am (UTC)", now) == ms(datetime(2027, 1, 2, 9, 15,
                                                                       tzinfo=UTC))
    # A month-day already past this year without a year: next year's.
    assert at("resets Jan 2, 9am (UTC)", now) == ms(datetime(2027, 1, 2, 9, tzinfo=UTC))


def test_no_zone_or_an_unknown_one_is_the_local_zone() -> None:
    now = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    plus2 = timezone(timedelta(hours=2))
    assert at("resets 9am", now, plus2) == ms(datetime(2026, 12, 2, 9, tzinfo=plus2))
    assert at("resets 9am (Mars/Olympus)", now, plus2) == ms(datetime(2026, 12, 2, 9,
                                                                       tzinfo=plus2))


def test_the_epoch_form_and_the_relative_form() -> None:
    now = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    assert at("Claude AI usage limit reached|1796191200", now) == 1796191200 * 1000
    assert at("fast limit · resets in 2h 30m", now) == ms(now + timedelta(hours=2, minutes=30))


@pytest.mark.parametrize("text", ["API Error: Request rejected (429) · slow down",
                                  "resets soon", "resets 25pm (UTC)", "resets 9:75am (UTC)",
                                  "resets Feb 30, 9am (UTC)"])
def test_no_reset_named(text: str) -> None:
    assert at(text, datetime(2026, 12, 2, tzinfo=UTC)) is None
