"""A lock with condition-style waits whose timeouts run on the injected :class:`Clock`.

:class:`threading.Condition` measures its timeouts in real time, which a fake clock cannot drive.
Here each waiter blocks on its own :class:`threading.Event` through ``clock.wait``; a state change
sets every waiter's event. The waiter re-checks its predicate under the lock, so a wake-up that
arrives between the check and the wait is never lost (the event is already set).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from failover_client._clock import Clock

__all__ = ["ClockCondition"]


class ClockCondition:
    """A mutex plus ``wait_until(predicate, deadline)`` measured on ``clock``."""

    __slots__ = ("_clock", "_lock", "_waiters", "lock")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.lock = self._lock
        """The mutex itself: ``with cond.lock`` where nothing waits or notifies costs no
        Python-level ``__enter__``/``__exit__`` (the send path takes it once per message)."""
        # The keys of a dict: 64 bytes empty (a set: 216), and a connection's rarely has waiters.
        self._waiters: dict[threading.Event, None] = {}

    def __enter__(self) -> ClockCondition:
        self._lock.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()

    def notify_all(self) -> None:
        """Wake every waiter so it re-checks its predicate. Call with the lock held."""
        for event in self._waiters:
            event.set()

    def wait_until(self, predicate: Callable[[], bool], deadline: float | None) -> bool:
        """Wait (lock held on entry and exit) until ``predicate()`` or ``deadline`` passes.

        ``deadline`` is a ``clock.monotonic()`` value; None waits forever. Returns the predicate's
        final value.
        """
        while not predicate():
            remaining = None if deadline is None else deadline - self._clock.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            event = threading.Event()
            self._waiters[event] = None
            self._lock.release()
            try:
                self._clock.wait(event, remaining)
            finally:
                self._lock.acquire()
                self._waiters.pop(event, None)
        return True
