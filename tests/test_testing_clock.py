"""FakeClock: virtual time that wakes waiting threads deterministically."""

from __future__ import annotations

import threading

import pytest

from failover_client import Clock
from failover_client.testing import ClockStalled, FakeClock
from failover_client.testing._clock import SAFETY_TIMEOUT


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


# --- autojump with several threads: only when every registered thread waits ------------------


def test_autojump_waits_for_every_registered_thread_and_goes_to_the_earliest_deadline():
    clock = FakeClock(autojump=True)
    woke: list[tuple[str, float]] = []
    go = threading.Event()

    def sleeper(name: str, seconds: float, start: threading.Event | None = None) -> None:
        if start is not None:
            start.wait(5)
        clock.wait(threading.Event(), seconds)
        woke.append((name, clock.monotonic()))
        clock.unregister()

    late = threading.Thread(target=sleeper, args=("late", 5.0))
    early = threading.Thread(target=sleeper, args=("early", 3.0, go))
    clock.register(late)
    clock.register(early)  # registered before it runs: time waits for it
    late.start()
    assert clock.wait_for_waiters(1)
    early.start()
    assert clock.monotonic() == 0.0  # "early" is registered and not waiting yet
    assert woke == []
    go.set()
    late.join(5)
    early.join(5)
    # To the earliest deadline first (never to the first waiter's own), then on to the next.
    assert woke == [("early", 3.0), ("late", 5.0)]
    assert clock.registered() == 0


def test_an_unregistered_waiter_neither_holds_time_back_nor_is_skipped():
    clock = FakeClock(autojump=True)
    running = threading.Event()
    release = threading.Event()
    times: dict[str, float] = {}

    def registered_loop() -> None:
        clock.register()
        running.set()
        release.wait(5)  # busy: time must not move
        clock.wait(threading.Event(), 10.0)
        times["loop"] = clock.monotonic()
        clock.unregister()

    loop = threading.Thread(target=registered_loop)
    loop.start()
    assert running.wait(5)
    helper, result = waiting(clock, threading.Event(), 2.0)  # unregistered
    assert clock.wait_for_waiters(1, timed=True)
    assert clock.monotonic() == 0.0
    assert result == []
    release.set()
    loop.join(5)
    helper.join(5)
    assert result == [False]
    assert times == {"loop": 10.0}  # the helper's 2.0 came first; the loop woke at its own


def test_a_set_event_counts_as_a_running_thread():
    clock = FakeClock(autojump=True)
    event = threading.Event()
    event.set()
    clock.register()
    try:
        assert clock.wait(event, 7.0) is True
        assert clock.monotonic() == 0.0
    finally:
        clock.unregister()


def test_a_wait_nobody_will_ever_end_fails_with_what_to_pass():
    clock = FakeClock(stall_timeout=0.05)
    stop = threading.Event()

    def loop() -> None:
        clock.register()
        try:
            clock.wait(stop, 30.0)  # a reconnect delay that nobody advances
        finally:
            clock.unregister()

    thread = threading.Thread(target=loop, name="the-loop")
    thread.start()
    assert clock.wait_for_waiters(1, timed=True)
    try:
        with pytest.raises(
            ClockStalled, match=r"the-loop waits for virtual time 30.*autojump=True"
        ):
            clock.wait(threading.Event(), None)
    finally:
        stop.set()
        thread.join(5)


def test_advancing_keeps_a_long_wait_from_counting_as_stalled():
    clock = FakeClock(stall_timeout=SAFETY_TIMEOUT)  # only a whole check without a move counts
    done = threading.Event()
    ticks = threading.Event()

    def loop() -> None:
        clock.register()
        try:
            while not clock.wait(done, 1.0):
                ticks.set()
        finally:
            clock.unregister()

    thread = threading.Thread(target=loop)
    thread.start()
    finished: list[bool] = []
    waiter = threading.Thread(target=lambda: finished.append(clock.wait(done, None)))
    waiter.start()
    assert clock.wait_for_waiters(2)
    for second in range(1, 4):
        assert clock.wait_for_deadline(float(second))
        clock.advance(1.0)
    done.set()
    thread.join(5)
    waiter.join(5)
    assert finished == [True]
