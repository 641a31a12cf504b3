"""The timer seam (``durability.store.clock``): the real timer is monotonic
time and real waits; the manual one moves only when a test says so."""

from __future__ import annotations

import threading

import pytest

from durability.store.clock import SYSTEM_TIMER, ManualTimer


def test_the_system_timer_waits_for_real() -> None:
    event = threading.Event()
    assert SYSTEM_TIMER.wait(event, 0) is False
    event.set()
    assert SYSTEM_TIMER.wait(event, 0) is True
    assert SYSTEM_TIMER.monotonic() <= SYSTEM_TIMER.monotonic()
    cond = SYSTEM_TIMER.condition()
    with cond:
        assert SYSTEM_TIMER.wait_on(cond, 0) is False


def _in_thread(target: object) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(target()), daemon=True)  # type: ignore[operator]
    thread.start()
    return thread, out


def test_a_manual_wait_ends_only_when_the_time_passes_its_deadline() -> None:
    timer, event = ManualTimer(), threading.Event()
    thread, out = _in_thread(lambda: timer.wait(event, 5))
    timer.until_waiting()
    assert timer.deadlines() == [5.0]
    timer.advance(4.5)
    timer.until_waiting()  # looked at 4.5: still waiting
    assert out == [] and thread.is_alive()
    timer.advance(0.5)
    thread.join(10)
    assert out == [False]


def test_a_manual_wait_ends_at_once_when_its_event_is_set() -> None:
    timer, event = ManualTimer(), threading.Event()
    thread, out = _in_thread(lambda: timer.wait(event, None))
    timer.until_waiting()
    assert timer.deadlines() == [float("inf")]
    event.set()
    thread.join(10)
    assert out == [True] and timer.monotonic() == 0.0


def test_a_deadline_counts_from_the_time_the_thread_last_read() -> None:
    """``wait(due - now)`` ends at ``due`` however late the thread got there."""
    timer, event = ManualTimer(), threading.Event()
    read, go = threading.Event(), threading.Event()

    def late() -> bool:
        now = timer.monotonic()
        due = now + 2
        read.set()
        assert go.wait(10)
        return timer.wait(event, due - now)

    thread, out = _in_thread(late)
    assert read.wait(10)
    timer.advance(1.5)  # the thread is slow to reach its wait
    go.set()
    timer.until_waiting()
    assert timer.deadlines() == [2.0]
    timer.advance(0.5)
    thread.join(10)
    assert out == [False]


def test_a_condition_wait_ends_on_notify_or_its_deadline() -> None:
    timer = ManualTimer()
    cond = timer.condition()

    def waits() -> bool:
        with cond:
            return timer.wait_on(cond, 1)

    thread, out = _in_thread(waits)
    timer.until_waiting()
    with cond:
        cond.notify()
    thread.join(10)
    thread, later = _in_thread(waits)
    timer.until_waiting()
    timer.advance(1)
    thread.join(10)
    assert (out, later) == ([True], [False])


def test_wall_time_moves_with_the_timer() -> None:
    timer = ManualTimer(wall_ms=1_000)
    timer.advance(0.25)
    assert (timer.monotonic(), timer.wall_ms()) == (0.25, 1_250)


def test_until_waiting_says_when_nothing_comes_to_wait() -> None:
    with pytest.raises(AssertionError, match="fewer than 1 thread"):
        ManualTimer().until_waiting(timeout_s=0.05)


def test_a_notify_that_races_a_look_is_not_lost() -> None:
    """A notify landing as a look's short real wait times out makes that
    wait return False; the timer's condition counts notifies, so the wait
    still ends as notified (else an idle debouncer would miss its event)."""
    timer = ManualTimer()
    cond = timer.condition()
    ended: list[bool] = []
    for _ in range(50):
        thread, out = _in_thread(lambda: _wait_once(timer, cond))
        timer.until_waiting()
        with cond:
            cond.notify()
        thread.join(10)
        ended += out  # type: ignore[arg-type]
    assert ended == [True] * 50


def _wait_once(timer: ManualTimer, cond: threading.Condition) -> bool:
    with cond:
        return timer.wait_on(cond, None)


def test_a_manual_wait_needs_the_timers_own_condition() -> None:
    with pytest.raises(TypeError, match="condition"), threading.Condition() as cond:
        ManualTimer().wait_on(cond, 1)
