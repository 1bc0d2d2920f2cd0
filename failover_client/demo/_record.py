"""What happened during a demo run, recorded from many threads and read as one snapshot."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from failover_client import Clock

__all__ = ["EventLine", "FailoverTime", "Mark", "Recorder", "Snapshot"]


@dataclass(frozen=True)
class Mark:
    """A scenario action, at ``t`` seconds after the start, for the timeline's vertical lines."""

    t: float
    action: str
    label: str
    note: str = ""


@dataclass(frozen=True)
class EventLine:
    """One line of the live view's event list."""

    t: float
    client: str
    text: str


@dataclass(frozen=True)
class FailoverTime:
    """One move of a client between brokers; ``ms`` is the outage (0 for a planned move)."""

    t: float
    client: str
    from_label: str
    to_label: str
    ms: float
    kind: Literal["failover", "priority return"]


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of everything recorded so far."""

    t: float
    sent: int
    confirmed: tuple[tuple[float, str, str], ...]
    """(time, message id, broker label) per confirmed send."""
    unconfirmed: tuple[tuple[str, str], ...]
    """(message id, error) per send that was not confirmed."""
    received: tuple[tuple[float, str, str], ...]
    """(time, message id, broker label) per delivery to the consumer (duplicates included)."""
    events: tuple[EventLine, ...]
    marks: tuple[Mark, ...]
    failovers: tuple[FailoverTime, ...]


class Recorder:
    """Thread-safe log of sends, confirmations, deliveries, events and scenario marks.

    Times are seconds since :meth:`start` (or construction), read from the injected clock.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._origin = clock.monotonic()
        self._cond = threading.Condition()
        self._sent = 0
        self._confirmed: list[tuple[float, str, str]] = []
        self._unconfirmed: list[tuple[str, str]] = []
        self._received: list[tuple[float, str, str]] = []
        self._received_ids: set[str] = set()
        self._events: list[EventLine] = []
        self._marks: list[Mark] = []
        self._failovers: list[FailoverTime] = []

    def start(self) -> None:
        """Make now time zero (traffic starts)."""
        with self._cond:
            self._origin = self._clock.monotonic()

    def now(self) -> float:
        return self._clock.monotonic() - self._origin

    def sent(self) -> None:
        with self._cond:
            self._sent += 1

    def confirmed(self, message_id: str, label: str) -> None:
        with self._cond:
            self._confirmed.append((self.now(), message_id, label))

    def unconfirmed(self, message_id: str, error: str) -> None:
        with self._cond:
            self._unconfirmed.append((message_id, error))

    def received(self, message_id: str, label: str) -> None:
        with self._cond:
            self._received.append((self.now(), message_id, label))
            self._received_ids.add(message_id)
            self._cond.notify_all()

    def event(self, client: str, text: str) -> EventLine:
        line = EventLine(self.now(), client, text)
        with self._cond:
            self._events.append(line)
        return line

    def mark(self, action: str, label: str, note: str = "") -> Mark:
        mark = Mark(self.now(), action, label, note)
        with self._cond:
            self._marks.append(mark)
        return mark

    def failover(
        self,
        client: str,
        from_label: str,
        to_label: str,
        ms: float,
        kind: Literal["failover", "priority return"],
    ) -> None:
        with self._cond:
            self._failovers.append(FailoverTime(self.now(), client, from_label, to_label, ms, kind))

    def wait_settled(self, ids: Iterable[str], *, quiet: float, timeout: float) -> bool:
        """Wait until every id in ``ids`` arrived, or nothing arrived for ``quiet`` s.

        Gives up after ``timeout`` s; True when every id arrived.
        """
        wanted = set(ids)
        deadline = self._clock.monotonic() + timeout
        with self._cond:
            while True:
                if wanted <= self._received_ids:
                    return True
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    return False
                before = len(self._received)
                self._cond.wait(min(quiet, remaining))
                if len(self._received) == before:
                    return wanted <= self._received_ids

    def snapshot(self) -> Snapshot:
        with self._cond:
            return Snapshot(
                self.now(),
                self._sent,
                tuple(self._confirmed),
                tuple(self._unconfirmed),
                tuple(self._received),
                tuple(self._events),
                tuple(self._marks),
                tuple(self._failovers),
            )
