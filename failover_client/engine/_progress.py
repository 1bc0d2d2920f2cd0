"""What a stop and a session being left wait for: buffers and handlers moving on.

Every subscription's :class:`~failover_client.engine._inbox.Inbox` tells :meth:`Progress.moved_on`
after a change they wait for (a message taken or finished, a buffer stopped or closed): a stop
(close, drain, unsubscribe) waits on it for its buffers to empty and its handlers to return
(:meth:`Progress.wait_until`), a session being left for the last of its messages buffered or
being handled (:meth:`Progress.when_flushed`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from failover_client._clock import Clock
from failover_client._lazy import LazyEvent
from failover_client.engine._slot import Slot

__all__ = ["Progress"]


class Progress:
    """The consumers' wake-ups (see the module docstring)."""

    __slots__ = ("_clock", "_event", "_holds", "_lock", "_watch")

    def __init__(self, clock: Clock, holds: Callable[[Slot], bool]) -> None:
        self._clock = clock
        self._holds = holds
        """Whether a message of a session waits in a buffer or runs in a handler."""
        self._lock = threading.Lock()
        self._event = LazyEvent()
        """Set when a buffer or a handler moved on (what a stop waits for)."""
        self._watch: dict[Slot, Callable[[], None]] = {}
        """Sessions being left, told once none of their messages is buffered or handled."""

    def when_flushed(self, slot: Slot, flushed: Callable[[], None]) -> None:
        """Call ``flushed`` once no message of ``slot`` waits in a buffer or runs in a handler
        (at once if none does): what a session being left waits for before it closes."""
        with self._lock:
            self._watch[slot] = flushed
        self.moved_on()

    def moved_on(self) -> None:
        """A buffer or a handler moved on (any thread; about once per batch handled)."""
        # Both checks are read without a lock, as they run for every batch. A set event is
        # left as it is: a stop clears it before it looks at the buffers, so a change made
        # before this call is seen by that look or wakes its wait. A watch added meanwhile is
        # checked by ``when_flushed`` itself, after adding it.
        if not self._event.is_set():
            self._event.set()
        if not self._watch:
            return
        with self._lock:
            watched = list(self._watch.items())
        for slot, flushed in watched:
            if self._holds(slot):
                continue
            with self._lock:
                if self._watch.pop(slot, None) is None:
                    continue  # another thread told it first
            flushed()

    def wait_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Wait (clock time) until ``done()`` or ``deadline``; woken by :meth:`moved_on`."""
        while True:
            self._event.clear()
            if done():
                return True
            if math.isinf(deadline):  # close(drain=None): as long as it takes
                self._clock.wait(self._event, None)  # ends: a buffer or handler moved on
                continue
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            self._clock.wait(self._event, remaining)
