"""The source's consumer on the driver: subscriptions with client acks, and a buffer.

One ``FailoverConnection`` subscribes to every destination with ``client`` (cumulative)
acknowledgement, so a message stays the broker's responsibility until the source acknowledges
it, after Spark committed the batch that holds it; the ``AckFrontier`` writes one ACK where
every message before it is done (``_frontier``). The broker's prefetch bounds what is
delivered and not yet acknowledged (ActiveMQ ``activemq.prefetchSize``, RabbitMQ
``prefetch-count``; an AMQP link's credit is the connector's ``prefetch``), and so the buffer.
After a fail-over the connection restores the subscriptions on the next broker; what the lost
broker had delivered and not seen acknowledged comes again from it later, marked redelivered,
and the ledger recognises it by id.

The connection lives only here, in the driver's long-lived offsets process: readers are
pickled and built elsewhere (the planner, the executors), and none of them may consume.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Sequence

from failover_client import (
    Clock,
    Event,
    FailoverConnection,
    GaveUp,
    Message,
    SettleQuestion,
    Subscription,
    SubscriptionFailed,
    SystemClock,
)
from failover_client.spark._frontier import AckFrontier
from failover_client.spark._options import SourceOptions

__all__ = ["Consumer", "open_connection"]

log = logging.getLogger("failover_client.spark")

SUBSCRIBE_WAIT = 10.0
"""How long the first batch waits for a broker to confirm the subscriptions (a refusal, such
as a bad selector, fails the query; silence only delays it: the connection keeps trying)."""


def open_connection(options: SourceOptions) -> FailoverConnection:
    """A (not yet connected) connection for the source's URI."""
    return FailoverConnection(options.uri)


def prefetch(options: SourceOptions) -> int:
    """Deliveries the broker may have outstanding: a full batch buffered while one runs."""
    return 2 * options.max_messages_per_batch


class Consumer:
    """Subscriptions on one failover connection, and the deliveries not yet taken.

    ``connection_factory`` builds the connection (tests pass one on a fake connector);
    ``clock`` times the waits in :meth:`take`.
    """

    def __init__(
        self,
        options: SourceOptions,
        *,
        connection_factory: Callable[[SourceOptions], FailoverConnection] = open_connection,
        clock: Clock | None = None,
    ) -> None:
        self._options = options
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._buffer: collections.deque[Message] = collections.deque()
        self._arrived = threading.Event()
        self._fatal: BaseException | None = None
        self._connection = connection_factory(options)
        self._connection.add_listener(self._on_event)
        self._subscriptions: list[Subscription] = []
        self._product: str | None = None
        self._delivered = threading.Event()
        self._frontier: AckFrontier[Message] = AckFrontier()

    def start(self) -> None:
        """Subscribe, connect, and wait (a while) for the brokers to confirm the subscriptions.

        Raises what the connection raises when every broker failed (per the URI's
        ``startupMaxReconnectAttempts`` / ``maxReconnectAttempts``) and
        :class:`~failover_client.SubscriptionRefused` for a subscription a broker refused.
        """
        headers = {
            "activemq.prefetchSize": str(prefetch(self._options)),
            "prefetch-count": str(prefetch(self._options)),
        }
        if self._options.selector is not None:
            headers["selector"] = self._options.selector
        for destination in self._options.destinations:
            # Subscribed before connect: nothing the broker delivers at once is missed.
            subscription = self._connection.subscribe(
                destination,
                self._arrive,
                ack="client",
                headers=headers,
                prefetch=prefetch(self._options),
            )
            self._subscriptions.append(subscription)
        self._connection.connect()
        for subscription in self._subscriptions:
            try:
                subscription.wait_active(SUBSCRIBE_WAIT)
            except TimeoutError:
                log.warning(
                    "failover source: no broker confirmed the subscription to %s within %.0f s; "
                    "starting anyway (it is restored on the broker the connection reaches)",
                    subscription.destination,
                    SUBSCRIBE_WAIT,
                )

    def _arrive(self, message: Message) -> None:
        # The subscription's handler worker: keep it short, the next delivery waits behind it.
        # The message's session is the engine's slot; its adapter session names the product.
        product = getattr(getattr(message.session, "session", None), "product", None)
        self._frontier.arrived(message)
        with self._lock:
            self._buffer.append(message)
            if product is not None:
                self._product = product
            # Event.set takes a lock and notifies even when the event is set (1.5 us here),
            # which was twice per message. ``_arrived`` is cleared under ``_lock`` only.
            if not self._arrived.is_set():
                self._arrived.set()
        if not self._delivered.is_set():
            self._delivered.set()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, GaveUp | SubscriptionFailed):
            with self._lock:
                if self._fatal is None:
                    self._fatal = event.error
            self._arrived.set()

    def take(
        self,
        limit: int | None,
        timeout: float,
        max_bytes: int | None = None,
        *,
        whole: bool = True,
    ) -> list[Message]:
        """Up to ``limit`` deliveries (all buffered for None), waiting ``timeout`` for the first.

        ``max_bytes`` bounds the bodies' total size; with ``whole`` (a batch starts here) the
        first delivery is taken whatever its size, so a batch always moves; without, a first
        one that does not fit leaves nothing taken. ``timeout`` 0 does not wait. Raises the
        connection's error once it gave up, or a subscription's refusal.
        """
        deadline = self._clock.monotonic() + timeout
        while True:
            with self._lock:
                if self._fatal is not None:
                    raise self._fatal
                if self._buffer:
                    first = len(self._buffer[0].body)
                    if not whole and max_bytes is not None and first > max_bytes:
                        return []
                    taken = self._pop(limit, max_bytes)
                    if not self._buffer:
                        self._arrived.clear()
                    return taken
                self._arrived.clear()
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 or not self._clock.wait(self._arrived, remaining):
                return []

    def _pop(self, limit: int | None, max_bytes: int | None) -> list[Message]:
        count = len(self._buffer) if limit is None else min(limit, len(self._buffer))
        taken = [self._buffer.popleft()]
        size = len(taken[0].body)
        while len(taken) < count:
            following = len(self._buffer[0].body)
            if max_bytes is not None and size + following > max_bytes:
                break
            taken.append(self._buffer.popleft())
            size += following
        return taken

    def check(self) -> None:
        """Raise the connection's error once it gave up, or a subscription's refusal."""
        with self._lock:
            if self._fatal is not None:
                raise self._fatal

    def connected(self) -> bool:
        """Whether the connection is up now (not failing over, switching or closed)."""
        return self._connection.state == "connected"

    def state(self) -> str:
        """The connection's state, for messages (``reconnecting``, ``switching``, ...)."""
        return self._connection.state

    def wait_delivery(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the first delivery ever (True once one came)."""
        return self._clock.wait(self._delivered, timeout)

    def product(self) -> str | None:
        """What the broker of the newest delivery calls itself (None before any delivery)."""
        with self._lock:
            return self._product

    def buffered(self) -> int:
        """Deliveries received and not yet taken."""
        with self._lock:
            return len(self._buffer)

    def acknowledge(self, messages: Sequence[Message]) -> list[Message]:
        """Acknowledge ``messages`` (done: committed, or copies of committed ones).

        Cumulatively: one ACK per (subscription, session) whose delivered messages are done up
        to a newer one than before, so possibly none. Returns the messages whose ACKs were
        written (to :meth:`ask` about).
        """
        return self._frontier.acknowledge(messages)

    def ask(self, messages: Sequence[Message]) -> SettleQuestion:
        """Ask the brokers to confirm the acknowledgements of ``messages``; ``wait`` on it."""
        return self._connection.ask_settled(messages)

    @property
    def connection(self) -> FailoverConnection:
        return self._connection

    def close(self) -> None:
        """Close the connection; what it delivered and nobody acknowledged is redelivered."""
        self._connection.close()

    def __repr__(self) -> str:
        return (
            f"Consumer({', '.join(self._options.destinations)}, buffered={self.buffered()}, "
            f"connection={self._connection!r})"
        )
