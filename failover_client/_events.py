"""What a failover connection tells its listeners, and how listeners are kept from hurting it.

Every state change of a :class:`~failover_client.FailoverConnection` is one small frozen dataclass
below. Brokers appear as their redacted address (``str(BrokerAddress)``: never a password), causes
as the mapped exception (whose message never holds a password either).

Listeners are plain callables ``listener(event) -> None``. They run on the connection's dispatch
thread, one at a time and in order, together with message handlers, so a listener never races
another listener and a slow listener never stalls the reconnect loop (it only delays later events
and messages). A listener that raises is logged once (with its name), counted, and reported to the
*other* listeners as :class:`ListenerError`; it keeps receiving events.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "AckDropped",
    "Closed",
    "Connected",
    "Disconnected",
    "DrainFinished",
    "DrainStarted",
    "DuplicatesPossible",
    "Event",
    "FailedOver",
    "GaveUp",
    "HandlerError",
    "Listener",
    "ListenerError",
    "ListenerSet",
    "MessagesReleased",
    "PoisonQuarantined",
    "PrefetchExceeded",
    "PriorityRestored",
    "Rebalanced",
    "ReconnectAttempt",
    "ReconnectWarning",
    "SessionDeaf",
    "StandbyConnected",
    "StandbyLost",
    "SubscriptionFailed",
    "TopologyChanged",
    "TopologySourceFailed",
    "TopologyTruncated",
]

_log = logging.getLogger("failover_client")

Causes = tuple[tuple[str, BaseException], ...]
"""(redacted broker, last error) pairs, in the order the brokers were first tried."""


@dataclass(frozen=True)
class Connected:
    """A session to ``broker`` finished its handshake and now carries the application's traffic.

    ``attempt`` counts the reconnect attempts of the run that found it (1 = first try; 0 = a
    standby session was promoted without connecting); ``elapsed`` is the seconds the run took.
    """

    broker: str
    attempt: int
    elapsed: float


@dataclass(frozen=True)
class Disconnected:
    """The session to ``broker`` was lost; the reconnect loop starts (unless closing)."""

    broker: str
    cause: BaseException | None


@dataclass(frozen=True)
class FailedOver:
    """Traffic moved from one broker to another after a loss; ``duration`` is the outage."""

    from_broker: str
    to_broker: str
    duration: float


@dataclass(frozen=True)
class ReconnectAttempt:
    """About to try ``broker``; ``delay`` is the wait that preceded this try (0 inside a pass)."""

    broker: str
    attempt: int
    delay: float


@dataclass(frozen=True)
class ReconnectWarning:
    """The reconnect loop has failed ``attempt`` times (``warn_after_reconnect_attempts``)."""

    attempt: int
    causes: Causes


@dataclass(frozen=True)
class GaveUp:
    """The loop stopped for good: the schedule ran out, or a broker refused the credentials/TLS."""

    error: BaseException
    causes: Causes


@dataclass(frozen=True)
class PriorityRestored:
    """Priority backup moved traffic back from ``from_broker`` to the preferred ``to_broker``."""

    from_broker: str
    to_broker: str


@dataclass(frozen=True)
class Rebalanced:
    """The connection moved to its rendezvous-hash home (``rebalance=true``) without loss.

    A broker joined, or one came back, and this client's home is now ``to_broker``; the move
    went the way a priority switch does (sends drained or replayed, subscriptions restored).
    """

    from_broker: str
    to_broker: str


@dataclass(frozen=True)
class TopologyChanged:
    """The known broker list changed (``source`` names where the update came from)."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class TopologyTruncated:
    """A list from ``source`` named more brokers than ``topology.maxBrokers`` lets the pool hold.

    The first entries were taken up to ``limit`` brokers in the pool (seeds included); the
    ``dropped`` others were left out, so a hostile or broken push cannot grow memory and CPU
    without bound. One event per list, however many it drops.
    """

    source: str
    dropped: int
    limit: int


@dataclass(frozen=True)
class TopologySourceFailed:
    """Topology source ``source`` failed (``error``: why, never a password) and retries.

    ``retry_in`` is the seconds until its next try (None: it does not retry, e.g. its
    configuration cannot work). ``failures`` counts its failures in a row. The connection keeps
    running on the brokers it knows; the list just stops changing until the source recovers.
    """

    source: str
    error: str
    failures: int
    retry_in: float | None


@dataclass(frozen=True)
class AckDropped:
    """An ack/nack for a message of a dead session was not sent (it would reach the wrong broker).

    The broker that delivered the message redelivers it; ``redelivered`` will be set then.
    """

    subscription_id: str
    message_id: str | None
    broker: str
    nack: bool


@dataclass(frozen=True)
class HandlerError:
    """A message handler raised; the message is not acked by the library."""

    subscription_id: str
    message_id: str | None
    error: BaseException


@dataclass(frozen=True)
class PoisonQuarantined:
    """A send was blamed for ``losses`` connection losses in a row and is no longer re-sent.

    A broker that answers one frame with an error and closes the connection is not dead: re-sending
    that frame to every broker in turn would fail over forever. The caller's send fails with
    :class:`~failover_client.SendRejected` (its ``__cause__`` is ``cause``, the last loss).
    """

    message_id: str
    destination: str
    broker: str
    losses: int
    cause: BaseException | None


@dataclass(frozen=True)
class SubscriptionFailed:
    """The broker refused a subscription; it is removed and not restored on any broker.

    ``error`` (also on ``Subscription.error``) is a :class:`~failover_client.SubscriptionRefused`:
    refused by name (an ERROR naming its SUBSCRIBE, an AMQP attach refused), or quarantined
    as poison after the broker ended the session over it ``losses`` times in a row.
    """

    subscription_id: str
    destination: str
    broker: str
    losses: int
    error: BaseException


@dataclass(frozen=True)
class ListenerError:
    """Another listener raised while handling ``event``."""

    listener: str
    event: str
    error: BaseException


@dataclass(frozen=True)
class StandbyConnected:
    """A pre-connected standby session to ``broker`` is ready (``backup=True``)."""

    broker: str


@dataclass(frozen=True)
class StandbyLost:
    """A standby session died; it is replaced in the background."""

    broker: str
    cause: BaseException | None


@dataclass(frozen=True)
class PrefetchExceeded:
    """A broker delivered past a subscription's prefetch (it ignored the flow control asked).

    Nothing is dropped: the client holds the extra messages, and says so once per session and
    subscription, because the bound the application relies on no longer holds there.
    """

    subscription_id: str
    broker: str
    held: int
    prefetch: int


@dataclass(frozen=True)
class MessagesReleased:
    """Messages delivered but never handled were handed back to the broker for redelivery.

    ``reason`` is ``close`` or ``drain`` (the application stopped consuming), ``move`` (the
    connection left that broker) or ``unsubscribe``. None of them was acknowledged.
    """

    subscription_id: str
    broker: str
    count: int
    reason: str


@dataclass(frozen=True)
class SessionDeaf:
    """The session's canary did not come back within ``silent_for`` seconds: deliveries stopped
    while the connection looked alive (heart-beats flowing). The connection fails over."""

    broker: str
    silent_for: float


@dataclass(frozen=True)
class DrainStarted:
    """The connection keeps consuming on a broker it left until that broker is quiet.

    ``reason``: ``move`` (a priority return or rebalance left it on purpose) or ``recovered``
    (it was left by a failure and answers again).
    """

    broker: str
    subscriptions: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class DrainFinished:
    """A drain of ``broker`` ended: ``complete`` when it went quiet, False at its deadline
    (``drainTimeout``), in which case messages may be left there for this subscription."""

    broker: str
    delivered: int
    elapsed: float
    complete: bool


@dataclass(frozen=True)
class DuplicatesPossible:
    """The broker in use does not drop replayed copies: after a failover a message may arrive
    twice, each copy carrying the same ``failover-message-id`` (``failover_client.Deduplicator``
    drops them on the consumer's side). Emitted once, right after the ``Connected`` of the
    first such broker (again only after a broker that did drop them, Artemis with
    ``dedup=auto``). ``reason`` says why (the broker's product, or ``dedup=off``)."""

    broker: str
    reason: str


@dataclass(frozen=True)
class Closed:
    """The application closed the connection; the last event a listener receives."""


Event = (
    Connected
    | Disconnected
    | FailedOver
    | ReconnectAttempt
    | ReconnectWarning
    | GaveUp
    | PriorityRestored
    | Rebalanced
    | TopologyChanged
    | TopologyTruncated
    | TopologySourceFailed
    | AckDropped
    | HandlerError
    | ListenerError
    | PoisonQuarantined
    | SubscriptionFailed
    | DuplicatesPossible
    | StandbyConnected
    | StandbyLost
    | PrefetchExceeded
    | MessagesReleased
    | SessionDeaf
    | DrainStarted
    | DrainFinished
    | Closed
)

Listener = Callable[[Event], None]


def listener_name(listener: Callable[..., object]) -> str:
    """A readable name for logs: the qualified name of a function, else the type's."""
    name = getattr(listener, "__qualname__", None) or type(listener).__qualname__
    module = getattr(listener, "__module__", None)
    return f"{module}.{name}" if module else str(name)


class ListenerSet:
    """The registered listeners, called in registration order with failures isolated."""

    __slots__ = ("_failures", "_listeners", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._failures: dict[str, int] = {}

    def add(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        """Forget ``listener``; unknown listeners are ignored (removal is idempotent)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    @property
    def failures(self) -> int:
        """How many times any listener raised."""
        with self._lock:
            return sum(self._failures.values())

    def deliver(self, event: Event) -> None:
        """Call every listener with ``event``, then report failures to the other listeners."""
        with self._lock:
            listeners = list(self._listeners)
        failed = self._call_all(listeners, event)
        if isinstance(event, ListenerError):
            return  # no error reports about error reports
        for listener, exc in failed:
            report = ListenerError(listener_name(listener), type(event).__name__, exc)
            self._call_all([other for other in listeners if other is not listener], report)

    def _call_all(
        self, listeners: list[Listener], event: Event
    ) -> list[tuple[Listener, Exception]]:
        failed: list[tuple[Listener, Exception]] = []
        for listener in listeners:
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - a listener must not break the loop
                failed.append((listener, exc))
        for listener, error in failed:
            self._count(listener, event, error)
        return failed

    def _count(self, listener: Listener, event: Event, exc: Exception) -> None:
        name = listener_name(listener)
        with self._lock:
            first = name not in self._failures
            self._failures[name] = self._failures.get(name, 0) + 1
        if first:
            # Once per listener: a listener that fails on every event would flood the log.
            _log.error(
                "listener %s raised on %s; further failures are counted, not logged",
                name,
                type(event).__name__,
                exc_info=exc,
            )
