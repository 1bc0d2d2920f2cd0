"""FakeClock: virtual time that wakes waiting threads deterministically."""

from __future__ import annotations

import threading

import pytest

from failover_client import Clock
from failover_client.testing import FakeClock


def waiting(clock: FakeClock, event: threading.Event, timeout: float | None):
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(clock.wait(event, timeout)))
    thread.start()
    return thread, result


def test_is_a_clock():
    assert isinstance(FakeClock(), Clock)
    assert FakeClock(5.0).monotonic() == 5.0


def test_advance_wakes_a_waiter_exactly_at_its_deadline():
    clock = FakeClock()
    thread, result = waiting(clock, threading.Event(), 2.0)
    assert clock.wait_for_waiters(1, timed=True)
    assert clock.deadlines() == [2.0]
    clock.advance(1.5)
    assert result == []
    assert clock.waiters() == 1
    clock.advance(0.5)
    thread.join(5)
    assert result == [False]
    assert clock.waiters() == 0


def test_setting_the_event_wakes_the_waiter_without_time_passing():
    clock = FakeClock()
    event = threading.Event()
    thread, result = waiting(clock, event, 10.0)
    assert clock.wait_for_waiters(1)
    event.set()
    thread.join(5)
    assert result == [True]
    assert clock.monotonic() == 0.0


def test_wait_without_timeout_ends_only_with_the_event():
    clock = FakeClock()
    event = threading.Event()
    thread, result = waiting(clock, event, None)
    assert clock.wait_for_waiters(1)
    assert clock.deadlines() == []
    clock.advance(1e9)
    assert result == []
    event.set()
    thread.join(5)
    assert result == [True]


def test_already_set_event_and_zero_timeout_return_at_once():
    clock = FakeClock()
    event = threading.Event()
    assert clock.wait(event, 0.0) is False
    event.set()
    assert clock.wait(event, 5.0) is True


def test_autojump_moves_time_to_the_deadline():
    clock = FakeClock(autojump=True)
    assert clock.wait(threading.Event(), 3.0) is False
    assert clock.monotonic() == 3.0
    clock.sleep(2.0)
    assert clock.monotonic() == 5.0


def test_time_cannot_go_backwards():
    with pytest.raises(ValueError, match="backwards"):
        FakeClock().advance(-1)


def test_wait_for_waiters_gives_up_after_its_real_timeout():
    assert FakeClock().wait_for_waiters(1, timeout=0.01) is False


def test_repr():
    assert repr(FakeClock(2.5)) == "FakeClock(now=2.5, waiters=0)"


def test_wait_for_deadline_sees_a_loop_come_back_to_its_timed_wait():
    clock = FakeClock()
    stop = threading.Event()
    rounds: list[float] = []

    def loop() -> None:
        while True:
            rounds.append(clock.monotonic())
            if clock.wait(stop, 10.0):
                return

    thread = threading.Thread(target=loop)
    thread.start()
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert clock.wait_for_deadline(20.0)
    assert rounds == [0.0, 10.0]
    assert not clock.wait_for_deadline(99.0, timeout=0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
