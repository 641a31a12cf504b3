"""The hook's answer wait (docs/RELIABILITY.md, "Budget arithmetic"): at most
``DURABILITY_SERVICE_ANSWER_MS``, and never more than half of what is left of
the budget, so the in-process capture after it has at least as long.

The end-to-end tests of a stopped or wedged service (test_stall.py,
test_entry.py) run with a long budget and a short answer wait, so that their
in-process capture fits on a loaded machine; this is where the half-budget
cut itself is proved, on a clock the test holds still.
"""

from __future__ import annotations

import pytest

from durability.hook import entry


class _Clock:
    """``time`` as the hook sees it, stopped at 1000 s."""

    @staticmethod
    def monotonic() -> float:
        return 1000.0


@pytest.fixture(autouse=True)
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entry, "time", _Clock)


def test_the_answer_wait_is_cut_to_half_of_what_is_left() -> None:
    # A 4 s budget less its 0.3 s margin: the default 3 s wait becomes 1.85 s.
    assert entry._answer_s({}, 1000.0 + 3.7) == pytest.approx(1.85)
    assert entry._answer_s({"DURABILITY_SERVICE_ANSWER_MS": "3000"}, 1000.0 + 5.0) == 2.5


def test_a_long_budget_keeps_the_configured_wait() -> None:
    assert entry._answer_s({}, 1000.0 + 9.7) == 3.0
    assert entry._answer_s({"DURABILITY_SERVICE_ANSWER_MS": "1500"}, 1000.0 + 29.7) == 1.5


def test_a_spent_budget_still_waits_a_moment() -> None:
    assert entry._answer_s({}, 1000.0 + 0.05) == 0.1
    assert entry._answer_s({}, 1000.0 - 1.0) == 0.1
