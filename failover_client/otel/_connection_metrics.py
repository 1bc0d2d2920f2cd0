"""What the connection's events and state say: reconnects, failovers, the broker, the topology.

A listener (on the connection's dispatch thread) counts reconnect attempts, records each
failover's duration, and adds failovers and rebalances as events to the spans open at that
moment; observable gauges read the window in flight, the current broker and the number of
known brokers when a reader collects. Every value carries the connection's
``messaging.client.id``, which tells connections of one process apart.

A meter keeps the first observable gauge of a name and ignores the callbacks of a second, so
the gauges are made once per meter (:class:`Gauges`) and read every connection instrumented on
it; :meth:`ConnectionMetrics.close` takes a connection out.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import ClassVar

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from failover_client._errors import URIError
from failover_client._events import (
    Event,
    FailedOver,
    PriorityRestored,
    Rebalanced,
    ReconnectAttempt,
)
from failover_client.engine._connection import FailoverConnection
from failover_client.otel import _names as n
from failover_client.otel._telemetry import Attributes, OpenSpans, where
from failover_client.uri import BrokerAddress, parse

__all__ = ["ConnectionMetrics", "Gauges"]


@functools.lru_cache(maxsize=256)
def _address(broker: str) -> BrokerAddress | None:
    """The address an event names (events carry redacted ``str(address)`` text)."""
    try:
        members = parse(broker).members
    except URIError:
        return None  # not a member URI (a test's plain name): recorded without an address
    return members[0] if len(members) == 1 else None


def broker_attributes(broker: str) -> Attributes:
    return where(_address(broker))


class ConnectionMetrics:
    """The listener and the observable gauges of one instrumented connection."""

    def __init__(
        self, connection: FailoverConnection, meter: Meter, spans: OpenSpans, system: str
    ) -> None:
        self._connection: weakref.ref[FailoverConnection] = weakref.ref(connection)
        self._spans = spans
        self._system: Attributes = {
            n.MESSAGING_SYSTEM: system,
            n.MESSAGING_CLIENT_ID: connection.client_id,
        }
        self._closed = False
        self._attempts = meter.create_counter(
            n.RECONNECT_ATTEMPTS,
            unit="{attempt}",
            description="Connection attempts the reconnect loop made (not the first).",
        )
        self._failover = meter.create_histogram(
            n.FAILOVER_DURATION,
            unit="s",
            description="From losing a broker to the handshake with the next one.",
            explicit_bucket_boundaries_advisory=n.BUCKETS,
        )
        self._gauges = Gauges.of(meter)
        self._gauges.add(self)

    def __call__(self, event: Event) -> None:
        """The connection's listener."""
        if self._closed:
            return
        if isinstance(event, ReconnectAttempt):
            self._attempts.add(1, {**self._system, **broker_attributes(event.broker)})
        elif isinstance(event, FailedOver):
            attributes = {**self._system, **broker_attributes(event.to_broker)}
            self._failover.record(event.duration, attributes)
            self._moved(n.EVENT_FAILOVER, event.from_broker, event.to_broker, event.duration)
        elif isinstance(event, Rebalanced):
            self._moved(n.EVENT_REBALANCE, event.from_broker, event.to_broker)
        elif isinstance(event, PriorityRestored):
            self._moved(n.EVENT_PRIORITY_RESTORED, event.from_broker, event.to_broker)

    def _moved(self, name: str, from_broker: str, to_broker: str, duration: float = -1) -> None:
        attributes: Attributes = {n.BROKER_FROM: _key(from_broker), n.BROKER_TO: _key(to_broker)}
        if duration >= 0:
            attributes[n.FAILOVER_DURATION_ATTRIBUTE] = duration
        self._spans.event(name, attributes)

    def close(self) -> None:
        self._closed = True
        self._gauges.discard(self)

    # --- gauges (the reader's thread) ------------------------------------------------------

    def _live(self) -> FailoverConnection | None:
        connection = self._connection()
        return None if self._closed or connection is None else connection

    def in_flight(self) -> list[Observation]:
        connection = self._live()
        if connection is None:
            return []
        return [Observation(connection.stats()["in_flight"], self._system)]

    def current(self) -> list[Observation]:
        connection = self._live()
        broker = None if connection is None else connection.broker
        if broker is None or connection is None or connection.state != "connected":
            return []
        return [Observation(1, {**self._system, **broker_attributes(broker)})]

    def topology(self) -> list[Observation]:
        connection = self._live()
        if connection is None:
            return []
        return [Observation(len(connection.pool), self._system)]


class Gauges:
    """The observable gauges of one meter, over the connections instrumented on it."""

    # One per meter in the process (a meter ignores a second gauge of a name).
    _of: ClassVar[weakref.WeakKeyDictionary[Meter, Gauges]] = weakref.WeakKeyDictionary()
    _of_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def of(cls, meter: Meter) -> Gauges:
        with cls._of_lock:
            gauges = cls._of.get(meter)
            if gauges is None:
                gauges = cls._of[meter] = cls(meter)
            return gauges

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._members: set[ConnectionMetrics] = set()
        meter.create_observable_gauge(
            n.IN_FLIGHT,
            [functools.partial(self._read, ConnectionMetrics.in_flight)],
            unit="{message}",
            description="Sends written and awaiting the broker's confirmation.",
        )
        meter.create_observable_gauge(
            n.CURRENT_BROKER,
            [functools.partial(self._read, ConnectionMetrics.current)],
            unit="{connection}",
            description="1 for the broker the connection is on (server.address, server.port).",
        )
        meter.create_observable_gauge(
            n.TOPOLOGY_SIZE,
            [functools.partial(self._read, ConnectionMetrics.topology)],
            unit="{broker}",
            description="Brokers the connection knows (seeds and discovered).",
        )

    def add(self, member: ConnectionMetrics) -> None:
        with self._lock:
            self._members.add(member)

    def discard(self, member: ConnectionMetrics) -> None:
        with self._lock:
            self._members.discard(member)

    def _read(
        self, read: Callable[[ConnectionMetrics], list[Observation]], options: CallbackOptions
    ) -> Iterable[Observation]:
        with self._lock:
            members = list(self._members)
        return [observation for member in members for observation in read(member)]


def _key(broker: str) -> str:
    """``host:port`` of an event's broker (no user name), or the text as it came."""
    address = _address(broker)
    return broker if address is None else address.key
