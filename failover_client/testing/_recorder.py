"""An event listener that records events and lets a test wait for one: :class:`EventRecorder`."""

from __future__ import annotations

import threading
from typing import TypeVar

from failover_client._events import Event
from failover_client.testing._clock import SAFETY_TIMEOUT

__all__ = ["EventRecorder"]

_E = TypeVar("_E")


class EventRecorder:
    """A listener that keeps every event; ``wait_for`` blocks until one of a type arrives."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def of_type(self, kind: type[_E]) -> list[_E]:
        with self._changed:
            return [e for e in self.events if isinstance(e, kind)]

    def wait_for(self, kind: type[_E], count: int = 1, timeout: float = SAFETY_TIMEOUT) -> _E:
        """The ``count``-th event of type ``kind``; raises AssertionError after ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: sum(isinstance(e, kind) for e in self.events) >= count, timeout
            ):
                seen = [type(e).__name__ for e in self.events]
                raise AssertionError(f"no {kind.__name__} #{count} within {timeout}s; got {seen}")
            return [e for e in self.events if isinstance(e, kind)][count - 1]
