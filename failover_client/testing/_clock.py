"""Virtual time for unit tests: :class:`FakeClock`.

``wait(event, timeout)`` blocks the calling thread until the event is set or *virtual* time
reaches the deadline. Time moves only when the test says so (:meth:`FakeClock.advance`) or, with
``autojump=True``, by itself when nothing else can happen: every *registered* thread waits on
the clock (as trio's ``MockClock`` jumps when every task is blocked). It then jumps to the
earliest deadline of all waiters, never past it, so many background threads on one clock (a
fleet of connections) see one exact timeline whatever the scheduling. Nothing sleeps, so a
30-second back-off takes no real time and the outcome never depends on scheduling luck.

Which threads are registered: every connection's reconnect loop registers itself for its whole
life (:func:`failover_client._clock.running_on`); a test registers a thread of its own with
:meth:`FakeClock.register`. Threads that are not registered (the test's own, say, blocked in
``connect()``) neither hold time back nor get waited for, but their deadlines count.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

__all__ = ["SAFETY_TIMEOUT", "STALL_TIMEOUT", "ClockStalled", "FakeClock"]

SAFETY_TIMEOUT = 5.0
"""Real seconds the ``wait_for_*`` helpers wait at most: a safety net against a hung test,
never a timing assumption (they return as soon as their condition holds)."""

STALL_TIMEOUT = 2 * SAFETY_TIMEOUT
"""Real seconds an unregistered wait without a deadline may see virtual time stand still while
a registered thread waits for a deadline, before :class:`ClockStalled` says why the test hangs."""


class ClockStalled(RuntimeError):
    """A test waits for a background thread that waits for virtual time nobody moves."""


@dataclass(eq=False)
class _Waiter:
    deadline: float
    event: threading.Event
    thread: threading.Thread


def _event_condition(event: threading.Event) -> threading.Condition | None:
    # CPython's Event is a flag guarded by a Condition; waiting on that Condition (and notifying
    # it when virtual time passes a deadline) wakes the waiter exactly when either happens, with
    # no polling. Other implementations fall back to short real-time slices.
    cond = getattr(event, "_cond", None)
    return cond if isinstance(cond, threading.Condition) else None


class FakeClock:
    """A :class:`~failover_client.Clock` whose time moves only when the test says so.

    ``autojump=True`` moves time by itself whenever every registered thread (every connection's
    reconnect loop, and the threads given to :meth:`register`) waits on the clock and no waiter
    is about to run: to the earliest deadline among all waiters. With one waiting thread that is
    its own deadline, so a whole back-off schedule runs instantly.

    Without ``autojump`` only :meth:`advance` moves time. A test that blocks without a deadline
    (``connect()``, a send with ``timeout=None``) while a connection's reconnect loop waits for
    a deadline that nobody advances to would hang; after :data:`STALL_TIMEOUT` real seconds that
    wait raises :class:`ClockStalled`, naming what to pass instead (``stall_timeout`` sets
    that time).
    """

    def __init__(
        self, start: float = 0.0, *, autojump: bool = False, stall_timeout: float = STALL_TIMEOUT
    ) -> None:
        self._now = start
        self._autojump = autojump
        self._stall_timeout = stall_timeout
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiters: set[_Waiter] = set()
        self._registered: set[threading.Thread] = set()
        self._moves = 0
        """Counts every move of time (for the stall check)."""

    @property
    def autojump(self) -> bool:
        return self._autojump

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward and wake every waiter whose deadline has passed."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards (advance({seconds}))")
        with self._lock:
            self._now += seconds
            self._moves += 1
            due = [w for w in self._waiters if w.deadline <= self._now]
            self._changed.notify_all()
        self._wake(due)

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    # --- registered threads ------------------------------------------------------------------

    def register(self, thread: threading.Thread | None = None) -> None:
        """``thread`` (default: the calling one) runs on this clock: with ``autojump``, time
        waits for it to wait. It may be registered before it starts; once it ends it is
        forgotten."""
        with self._lock:
            self._registered.add(thread or threading.current_thread())

    def unregister(self, thread: threading.Thread | None = None) -> None:
        """``thread`` (default: the calling one) no longer holds time back."""
        with self._lock:
            self._registered.discard(thread or threading.current_thread())
            due = self._jump()
            self._changed.notify_all()
        self._wake(due)

    def registered(self) -> int:
        """How many live threads are registered."""
        with self._lock:
            return sum(t.ident is None or t.is_alive() for t in self._registered)

    # --- waiting -------------------------------------------------------------------------------

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or virtual time reaches now + ``timeout``."""
        thread = threading.current_thread()
        with self._lock:
            deadline = math.inf if timeout is None else self._now + max(timeout, 0.0)
            waiter = _Waiter(deadline, event, thread)
            self._waiters.add(waiter)
            due = self._jump()
            self._changed.notify_all()
        self._wake(due)
        try:
            return self._block(waiter)
        finally:
            with self._lock:
                self._waiters.discard(waiter)
                due = self._jump()
                self._changed.notify_all()
            self._wake(due)

    def _jump(self) -> list[_Waiter]:
        """With autojump, move to the earliest deadline if nothing else can happen (lock held);
        returns the waiters to wake."""
        if not self._autojump:
            return []
        now = self._now
        waiting: set[threading.Thread] = set()
        for waiter in self._waiters:
            if waiter.deadline <= now or waiter.event.is_set():
                return []  # that thread is about to run: what it does may matter
            waiting.add(waiter.thread)
        # A thread that ended is forgotten; one registered before it started is waited for.
        self._registered = {t for t in self._registered if t.ident is None or t.is_alive()}
        if not self._registered <= waiting:
            return []  # a registered thread is running
        earliest = min((w.deadline for w in self._waiters), default=math.inf)
        if earliest == math.inf:
            return []  # nothing waits for time: only an event can end these waits
        self._now = earliest
        self._moves += 1
        return [w for w in self._waiters if w.deadline <= earliest]

    def _block(self, waiter: _Waiter) -> bool:
        event = waiter.event
        cond = _event_condition(event)
        if cond is None:  # pragma: no cover - CPython always has the condition
            while not event.wait(0.001):
                if self.monotonic() >= waiter.deadline:
                    return event.is_set()
            return True
        watch = waiter.deadline == math.inf and not self._autojump
        with cond:
            moves = self._moves
            while not event.is_set():
                if self.monotonic() >= waiter.deadline:
                    return False
                if not watch:
                    cond.wait()
                elif not cond.wait(self._stall_timeout) and not event.is_set():
                    moves = self._check_stall(waiter, moves)
            return True

    def _check_stall(self, waiter: _Waiter, moves: int) -> int:
        """Raise :class:`ClockStalled` when time stood still for a whole check while a
        registered thread waits for a deadline; else return the current move count."""
        with self._lock:
            if self._moves != moves or waiter.thread in self._registered:
                return self._moves
            stuck = sorted(
                (
                    w
                    for w in self._waiters
                    if w.thread in self._registered and w.deadline < math.inf
                ),
                key=lambda w: w.deadline,
            )
            now = self._now
        if not stuck:
            return moves
        raise ClockStalled(
            f"{waiter.thread.name} waited {self._stall_timeout:g} s (real) with no deadline while "
            f"{stuck[0].thread.name} waits for virtual time {stuck[0].deadline:g} (now {now:g}) "
            "and nothing moved the clock: pass FakeClock(autojump=True), or call "
            "clock.advance() from another thread"
        )

    @staticmethod
    def _wake(waiters: list[_Waiter]) -> None:
        for waiter in waiters:
            cond = _event_condition(waiter.event)
            if cond is not None:
                with cond:
                    cond.notify_all()

    # --- for tests -----------------------------------------------------------------------------

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
