"""Virtual time for unit tests: :class:`FakeClock`.

``wait(event, timeout)`` blocks the calling (background) thread until the event is set or
*virtual* time reaches the deadline; the test moves time with :meth:`FakeClock.advance`.
Nothing sleeps, so a 30-second back-off takes no real time and the outcome never depends on
scheduling luck.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

__all__ = ["SAFETY_TIMEOUT", "FakeClock"]

SAFETY_TIMEOUT = 5.0
"""Real seconds the ``wait_for_*`` helpers wait at most: a safety net against a hung test,
never a timing assumption (they return as soon as their condition holds)."""


@dataclass(eq=False)
class _Waiter:
    deadline: float
    event: threading.Event


def _event_condition(event: threading.Event) -> threading.Condition | None:
    # CPython's Event is a flag guarded by a Condition; waiting on that Condition (and notifying
    # it when virtual time passes a deadline) wakes the waiter exactly when either happens, with
    # no polling. Other implementations fall back to short real-time slices.
    cond = getattr(event, "_cond", None)
    return cond if isinstance(cond, threading.Condition) else None


class FakeClock:
    """A :class:`~failover_client.Clock` whose time moves only when the test says so.

    ``autojump=True`` makes every timed wait jump virtual time straight to its deadline (when the
    event is not set): handy to run a whole back-off schedule instantly when only one thread
    waits on time.
    """

    def __init__(self, start: float = 0.0, *, autojump: bool = False) -> None:
        self._now = start
        self._autojump = autojump
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters: set[_Waiter] = set()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward and wake every waiter whose deadline has passed."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance({seconds}))")
        with self._lock:
            self._now += seconds
            due = [w for w in self._waiters if w.deadline <= self._now]
            self._changed.notify_all()
        self._wake(due)

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or virtual time reaches now + ``timeout``."""
        with self._lock:
            deadline = math.inf if timeout is None else self._now + max(timeout, 0.0)
            if self._autojump and deadline != math.inf and not event.is_set():
                self._now = max(self._now, deadline)
            waiter = _Waiter(deadline, event)
            self._waiters.add(waiter)
            due = [w for w in self._waiters if w.deadline <= self._now and w is not waiter]
            self._changed.notify_all()
        self._wake(due)
        try:
            return self._block(waiter)
        finally:
            with self._lock:
                self._waiters.discard(waiter)
                self._changed.notify_all()

    def _block(self, waiter: _Waiter) -> bool:
        event = waiter.event
        cond = _event_condition(event)
        if cond is None:  # pragma: no cover - CPython always has the condition
            while not event.wait(0.001):
                if self.monotonic() >= waiter.deadline:
                    return event.is_set()
            return True
        with cond:
            while not event.is_set():
                if self.monotonic() >= waiter.deadline:
                    return False
                cond.wait()
            return True

    @staticmethod
    def _wake(waiters: list[_Waiter]) -> None:
        for waiter in waiters:
            cond = _event_condition(waiter.event)
            if cond is not None:
                with cond:
                    cond.notify_all()

    def waiters(self) -> int:
        """How many threads are blocked in :meth:`wait` right now (timed or not)."""
        with self._lock:
            return len(self._waiters)

    def deadlines(self) -> list[float]:
        """The finite deadlines of the blocked waiters, earliest first."""
        with self._lock:
            return sorted(w.deadline for w in self._waiters if w.deadline != math.inf)

    def wait_for_waiters(
        self,
        count: int = 1,
        *,
        timed: bool = False,
        timeout: float = SAFETY_TIMEOUT,
    ) -> bool:
        """Block (real time, at most ``timeout``) until ``count`` threads wait on this clock.

        ``timed=True`` counts only waiters with a finite deadline.
        """

        def enough() -> bool:
            if timed:
                return sum(w.deadline != math.inf for w in self._waiters) >= count
            return len(self._waiters) >= count

        with self._changed:
            return self._changed.wait_for(enough, timeout)

    def wait_for_deadline(self, deadline: float, *, timeout: float = SAFETY_TIMEOUT) -> bool:
        """Block (real time, at most ``timeout``) until a thread waits until ``deadline``.

        Tells a test that a background loop came back to its timed wait (so it finished what
        it did before), which a count of waiters cannot: the count is the same before and after.
        """
        with self._changed:
            return self._changed.wait_for(
                lambda: any(w.deadline == deadline for w in self._waiters), timeout
            )

    def __repr__(self) -> str:
        return f"FakeClock(now={self.monotonic():g}, waiters={self.waiters()})"
