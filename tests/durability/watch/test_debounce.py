"""The settle debouncer on a manual timer (``durability.store.clock.ManualTimer``):
a capture once the tree is quiet for ``settle_s``, or ``max_delay_s`` after the
first unanswered event under continuous writes; time is moved by the test, so
what each deadline decides is asserted exactly, with no wait on the wall clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from durability.store.clock import ManualTimer
from durability.watch.debounce import Debouncer

#: Binary fractions: moving the timer in steps of them adds up exactly.
SETTLE_S, MAX_DELAY_S = 0.25, 1.0


class _Fired:
    """The captures the debouncer took, answered at once (on record)."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.at: list[float] = []
        self.timer: ManualTimer | None = None
        self._lock = threading.Lock()

    def __call__(self, reason: str) -> bool:
        with self._lock:
            self.reasons.append(reason)
            assert self.timer is not None
            self.at.append(self.timer.monotonic())
        return True


@pytest.fixture()
def timer() -> ManualTimer:
    return ManualTimer()


@pytest.fixture()
def fired(timer: ManualTimer) -> _Fired:
    f = _Fired()
    f.timer = timer
    return f


@pytest.fixture()
def debouncer(timer: ManualTimer, fired: _Fired) -> Iterator[Debouncer]:
    d = Debouncer(fired, settle_s=SETTLE_S, max_delay_s=MAX_DELAY_S, name="test-debounce",
                  timer=timer)
    d.start()
    timer.until_waiting()
    yield d
    d.stop(final=False)


def _step(timer: ManualTimer, seconds: float) -> None:
    """Move time and wait until the debouncer has decided what it decides."""
    timer.advance(seconds)
    timer.until_waiting()


def test_a_quiet_tree_is_captured_exactly_settle_after_the_last_event(
        debouncer: Debouncer, timer: ManualTimer, fired: _Fired) -> None:
    debouncer.touch()
    _step(timer, 0.125)
    debouncer.touch()  # the quiet starts again
    _step(timer, SETTLE_S - 1 / 64)
    assert fired.reasons == []
    _step(timer, 1 / 64)
    assert fired.reasons == ["settle"]
    assert fired.at == [0.125 + SETTLE_S]
    _step(timer, 10 * MAX_DELAY_S)  # no event since: nothing more
    assert fired.reasons == ["settle"]


def test_a_burst_within_the_settle_window_is_one_capture(
        debouncer: Debouncer, timer: ManualTimer, fired: _Fired) -> None:
    """200 events, each less than settle_s after the one before: one capture,
    settle_s after the last (the service test's 200 writes, without the
    machine's speed deciding whether they fit in the window)."""
    for _ in range(200):
        debouncer.touch()
        timer.advance(1 / 1024)  # 200 of them: 0.195 s, each well within settle
    timer.until_waiting()
    assert fired.reasons == []
    _step(timer, SETTLE_S - 2 / 1024)  # just before settle_s after the last event
    assert fired.reasons == []
    _step(timer, 1 / 1024)
    assert fired.reasons == ["settle"]
    assert fired.at == [199 / 1024 + SETTLE_S]
    assert debouncer.events == 200


def test_continuous_writes_are_captured_every_max_delay_first_by_max_delay(
        debouncer: Debouncer, timer: ManualTimer, fired: _Fired) -> None:
    """A write every 62.5 ms never leaves the tree quiet for settle_s, so the
    capture is the max-delay one, max_delay_s after the first write; the next
    deadline counts from the first write after that decision."""
    step = 1 / 16
    for _ in range(round(3 * MAX_DELAY_S / step)):
        debouncer.touch()
        _step(timer, step)
    assert fired.reasons == ["max-delay"] * 3
    assert fired.at == [MAX_DELAY_S, 2 * MAX_DELAY_S, 3 * MAX_DELAY_S]
    _step(timer, 10 * MAX_DELAY_S)  # the writes stopped: the last capture covered them
    assert fired.reasons == ["max-delay"] * 3
    debouncer.touch()  # one more write, then quiet: the settle capture
    _step(timer, SETTLE_S)
    assert fired.reasons == ["max-delay"] * 3 + ["settle"]
    assert debouncer.events == round(3 * MAX_DELAY_S / step) + 1


def test_settle_and_max_delay_due_together_take_exactly_one_capture(
        timer: ManualTimer, fired: _Fired) -> None:
    """The race: both deadlines come due in one move of the clock (a loaded
    machine wakes the thread late).  The contract is one capture, within the
    budget, with a reason from the allowed set, not which deadline wins."""
    d = Debouncer(fired, settle_s=SETTLE_S, max_delay_s=MAX_DELAY_S, name="test-race",
                  timer=timer)
    d.start()
    try:
        timer.until_waiting()
        for _ in range(round((MAX_DELAY_S - SETTLE_S) / 0.125)):
            d.touch()  # never quiet for settle_s ...
            _step(timer, 0.125)
        d.touch()  # ... and the last write makes settle due when max-delay is
        _step(timer, 5 * MAX_DELAY_S)  # late: both are long past
    finally:
        d.stop(final=False)
    assert len(fired.reasons) == 1
    assert fired.reasons[0] in {"settle", "max-delay"}
    # Within the budget: at the first look after the deadlines, no later.
    assert fired.at == [MAX_DELAY_S - SETTLE_S + 5 * MAX_DELAY_S]


def test_an_idle_debouncer_waits_with_no_deadline(
        debouncer: Debouncer, timer: ManualTimer, fired: _Fired) -> None:
    """Idle costs no CPU: the thread waits with no timeout, before the first
    event and after the capture that answered the last one."""
    assert timer.deadlines() == [float("inf")]
    debouncer.touch()
    timer.until_waiting()
    assert timer.deadlines() == [SETTLE_S]
    _step(timer, SETTLE_S)
    assert fired.reasons == ["settle"]
    assert timer.deadlines() == [float("inf")]


def test_stop_with_final_takes_one_last_capture_at_once(
        debouncer: Debouncer, timer: ManualTimer, fired: _Fired) -> None:
    debouncer.touch()
    timer.until_waiting()
    debouncer.stop(final=True)
    assert fired.reasons == ["final"]
    assert fired.at == [0.0]  # not waiting out the settle window


def test_the_window_marker_carries_the_timers_wall_time() -> None:
    calls: list[tuple[str, int]] = []

    class Window:
        def mark(self, opened_at_ms: int) -> None:
            calls.append(("mark", opened_at_ms))

        def clear(self) -> None:
            calls.append(("clear", 0))

    timer = ManualTimer(wall_ms=1_000_000)
    d = Debouncer(lambda reason: True, settle_s=SETTLE_S, max_delay_s=MAX_DELAY_S,
                  name="test-wall", timer=timer, window=Window())
    d.start()
    try:
        timer.until_waiting()
        timer.advance(2.5)
        d.touch()
        _step(timer, SETTLE_S)
    finally:
        d.stop(final=False)
    assert calls == [("mark", 1_002_500), ("clear", 0)]
