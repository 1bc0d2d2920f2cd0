"""What happened during a demo run, recorded from many threads and read as one snapshot.

Besides the messages and the producer's and consumer's failovers, the recorder keeps the fleet
(idle clients that only show where clients are placed): where each fleet client is (from its
``Connected`` / ``Disconnected`` events), every move it made and why, when it learned of a
broker, and what rendezvous hashing predicted for each broker that joined.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from failover_client import Clock

__all__ = ["EventLine", "FailoverTime", "Join", "Mark", "Move", "MoveKind", "Recorder", "Snapshot"]


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


MoveKind = Literal["failover", "priority return", "rebalance"]
"""Why a client changed brokers: its broker was lost, priority backup took it back to a
better tier, or rebalancing took it to its rendezvous home."""


@dataclass(frozen=True)
class FailoverTime:
    """One move of a client between brokers; ``ms`` is the outage (0 for a planned move)."""

    t: float
    client: str
    from_label: str
    to_label: str
    ms: float
    kind: MoveKind


@dataclass(frozen=True)
class Move:
    """One move of a fleet client from one broker to another."""

    t: float
    client: str
    from_label: str
    to_label: str
    kind: MoveKind


@dataclass(frozen=True)
class Join:
    """Broker ``label`` was started at ``t``; ``homes`` is each fleet client's rendezvous home
    with it among the brokers (the clients whose home it is should move to it)."""

    t: float
    label: str
    homes: tuple[tuple[str, str], ...]

    @property
    def predicted(self) -> tuple[str, ...]:
        """The fleet clients whose home the new broker became, sorted."""
        return tuple(sorted(c for c, home in self.homes if home == self.label))

    @property
    def fleet(self) -> int:
        return len(self.homes)


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
    positions: tuple[tuple[float, str, str], ...] = ()
    """(time, fleet client, broker label or ``-`` when on none) per change of place."""
    moves: tuple[Move, ...] = ()
    """Every move of a fleet client."""
    learned: tuple[tuple[float, str, str, str], ...] = ()
    """(time, client, broker label, source) when a client's broker list gained that broker."""
    joins: tuple[Join, ...] = ()
    ended: float | None = None
    """When the clients were about to be closed: the fleet's last positions count up to here."""


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
        self._positions: list[tuple[float, str, str]] = []
        self._where: dict[str, str] = {}
        self._moves: list[Move] = []
        self._learned: list[tuple[float, str, str, str]] = []
        self._joins: list[Join] = []
        self._ended: float | None = None

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
        kind: MoveKind,
    ) -> None:
        with self._cond:
            self._failovers.append(FailoverTime(self.now(), client, from_label, to_label, ms, kind))

    # --- the fleet ---------------------------------------------------------------------------

    def position(self, client: str, label: str) -> None:
        """``client`` is now on broker ``label`` (``-``: on none)."""
        with self._cond:
            self._positions.append((self.now(), client, label))
            self._where[client] = label
            self._cond.notify_all()

    def wait_placed(self, wanted: Mapping[str, str], *, timeout: float) -> bool:
        """Wait until every client in ``wanted`` is on the broker it names (a moving fleet
        settles); True when they are, False after ``timeout`` s."""
        deadline = self._clock.monotonic() + timeout
        with self._cond:
            while any(self._where.get(c) != label for c, label in wanted.items()):
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def move(self, client: str, from_label: str, to_label: str, kind: MoveKind) -> Move:
        """``client`` moved: the move and its new place are recorded together, so whoever
        waits for a place (:meth:`wait_placed`) finds the move that led there too."""
        move = Move(self.now(), client, from_label, to_label, kind)
        with self._cond:
            self._moves.append(move)
            self._positions.append((move.t, client, to_label))
            self._where[client] = to_label
            self._cond.notify_all()
        return move

    def learned(self, client: str, label: str, source: str) -> int:
        """``client`` learned of broker ``label`` from ``source``; returns how many distinct
        clients know of it now."""
        with self._cond:
            self._learned.append((self.now(), client, label, source))
            return len({c for _, c, known, _ in self._learned if known == label})

    def join(self, label: str, homes: Mapping[str, str]) -> Join:
        join = Join(self.now(), label, tuple(sorted(homes.items())))
        with self._cond:
            self._joins.append(join)
        return join

    def end(self) -> None:
        """The clients are about to close: what the fleet did after this is not counted."""
        with self._cond:
            if self._ended is None:
                self._ended = self.now()

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
                tuple(self._positions),
                tuple(self._moves),
                tuple(self._learned),
                tuple(self._joins),
                self._ended,
            )
