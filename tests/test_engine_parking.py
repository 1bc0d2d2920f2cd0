"""The reconnect loop parked between passes (engine._parking): no thread while it waits, and a
wake-up is never lost between a pass and its park.

The loop here is a stand-in generator that records which pass ran and on which thread; the
shared timer is a recording fake whose callbacks the test fires. Passes run on threads of their
own, so the test waits for each one to park (``parked``), bounded by ``WAIT``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from failover_client.engine._parking import Parking, Steps, WakeEvent
from failover_client.testing import FakeClock

WAIT = 10.0
"""Seconds a pass gets to reach its park (it takes microseconds; only a bug gets near)."""


class _Entry:
    def __init__(self, when: float, callback: Callable[[float], float | None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Timers:
    def __init__(self) -> None:
        self.entries: list[_Entry] = []

    def schedule(self, when: float, callback: Callable[[float], float | None]) -> _Entry:
        entry = _Entry(when, callback)
        self.entries.append(entry)
        return entry


class _Loop:
    """Yields the given waits in order; counts the passes."""

    def __init__(self, waits: list[float | None], wake: WakeEvent) -> None:
        self.waits = waits
        self.wake = wake
        self.passes = 0
        self.threads: list[threading.Thread] = []
        self.parked = threading.Semaphore(0)
        self.before_yield: Callable[[], None] = lambda: None

    def steps(self) -> Steps:
        for wake_at in self.waits:
            self.wake.clear()  # as ReconnectLoop._begin_pass
            self.passes += 1
            self.threads.append(threading.current_thread())
            self.before_yield()
            yield wake_at


def _parking(waits: list[float | None]) -> tuple[Parking, _Loop, _Timers, WakeEvent]:
    wake = WakeEvent()
    loop = _Loop(waits, wake)
    timers = _Timers()
    clock = FakeClock(start=100.0)

    class Probed(Parking):
        """Tells the test each time the loop parked."""

        def _park(self, wake_at: float | None) -> bool:
            parked = super()._park(wake_at)
            if parked:
                loop.parked.release()
            return parked

    parking = Probed(loop.steps(), wake, timers.schedule, clock, "failover-client-loop-test")
    return parking, loop, timers, wake


def test_a_parked_loop_has_no_thread_and_its_timer_runs_the_next_pass() -> None:
    parking, loop, timers, _ = _parking([105.0, None])
    parking.start()
    assert loop.parked.acquire(timeout=WAIT)
    assert loop.passes == 1
    assert [e.when for e in timers.entries] == [105.0]
    assert parking.thread is None  # parked: not even the thread object is kept
    first = loop.threads[0]
    first.join(WAIT)
    assert not first.is_alive()  # parked: the pass's thread ended

    assert timers.entries[0].callback(105.0) is None  # due: one run, then the entry ends
    assert loop.parked.acquire(timeout=WAIT)
    assert loop.passes == 2
    assert len(timers.entries) == 1  # a wait without wake_at arms no timer
    assert loop.threads[1] is not first


def test_a_wake_up_runs_the_next_pass_and_cancels_the_timer() -> None:
    parking, loop, timers, wake = _parking([200.0, None])
    parking.start()
    assert loop.parked.acquire(timeout=WAIT)
    wake.set()
    assert loop.parked.acquire(timeout=WAIT)
    assert loop.passes == 2
    assert timers.entries[0].cancelled
    # The cancelled timer firing late (it was already running) does nothing.
    assert timers.entries[0].callback(200.0) is None
    wake.set()  # the last pass ends the loop
    parking.join()
    assert parking.done.is_set()
    assert loop.passes == 2


def test_a_wake_up_during_a_pass_is_not_lost() -> None:
    parking, loop, timers, wake = _parking([None, None, None])
    # Set between the pass's clear and its park: it must look again at once, not park.
    loop.before_yield = lambda: wake.set() if loop.passes == 1 else None
    parking.start()
    assert loop.parked.acquire(timeout=WAIT)
    assert loop.passes == 2  # the second pass ran without a park in between
    assert timers.entries == []


def test_a_wait_already_due_does_not_park() -> None:
    parking, loop, timers, wake = _parking([99.0, 100.0, None])  # the clock reads 100
    parking.start()
    assert loop.parked.acquire(timeout=WAIT)
    assert loop.passes == 3
    assert timers.entries == []
    wake.set()
    parking.join()
    assert parking.done.is_set()


def test_a_join_from_the_pass_s_own_thread_returns() -> None:
    parking, loop, _, wake = _parking([None, None])
    joined = threading.Event()

    def join_inside() -> None:
        if loop.passes == 2:
            parking.join()  # a close from inside the loop: must not wait for itself
            joined.set()

    loop.before_yield = join_inside
    parking.start()
    assert loop.parked.acquire(timeout=WAIT)
    wake.set()
    assert joined.wait(WAIT)
