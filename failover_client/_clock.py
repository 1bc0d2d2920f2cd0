"""Time as an injected dependency.

Every wait in the library goes through a :class:`Clock`, so unit tests drive time with
:class:`failover_client.testing.FakeClock` and never sleep. Waiting is always on a
:class:`threading.Event` with a timeout (interruptible by ``close()``), never a polling sleep.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock"]


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

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        return event.wait(timeout)

    def __repr__(self) -> str:
        return "SystemClock()"
