"""Time as an injected dependency.

Every wait in the library goes through a :class:`Clock`, so unit tests drive time with
:class:`failover_client.testing.FakeClock` and never sleep. Waiting is always on a
:class:`threading.Event` with a timeout (interruptible by ``close()``), never a polling sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "ThreadAwareClock", "running_on"]


@runtime_checkable
class Clock(Protocol):
    """Monotonic time plus interruptible waiting."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary fixed point; never goes backwards."""

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` (used by tenacity's ``sleep`` hook)."""

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or ``timeout`` seconds pass; return whether it was set."""


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)

    def __repr__(self) -> str:
        return "SystemClock()"


@runtime_checkable
class ThreadAwareClock(Clock, Protocol):
    """A clock that wants to know which threads run on its time (a virtual clock does).

    :class:`failover_client.testing.FakeClock` moves time by itself only while *every*
    registered thread waits on it, to the earliest deadline, so many background threads on one
    virtual clock see one exact timeline. The library registers each background thread that
    waits on the clock for its whole life (:func:`running_on`); the real clock needs none of it.
    """

    def register(self) -> None:
        """The calling thread runs on this clock's time until :meth:`unregister`."""

    def unregister(self) -> None:
        """The calling thread no longer runs on this clock's time (it ends)."""


@contextmanager
def running_on(clock: Clock) -> Iterator[None]:
    """Register the calling thread with ``clock`` for the block, if the clock wants that."""
    if not isinstance(clock, ThreadAwareClock):
        yield
        return
    clock.register()
    try:
        yield
    finally:
        clock.unregister()
