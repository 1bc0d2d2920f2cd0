"""Duplicates after a replay: which broker drops them, telling the application when none does,
and dropping them on the consumer's side (:class:`Deduplicator`).

After a failover every unconfirmed send is sent again, so a message the old broker had stored
but not yet confirmed arrives twice. Artemis can drop the copy itself: it remembers the
``_AMQ_DUPL_ID`` of the messages it stored (a per-address cache, ``id-cache-size`` 20,000 by
default) and drops a later message with the same value. It must see the header on the
*original* too. With ``dedup=auto`` the header goes on every write to a session whose broker
may drop copies by it (:func:`may_drop_duplicates`): one that named itself Artemis, or named
no product at all (unknown: kept). A session on ActiveMQ Classic or RabbitMQ gets none: they
keep it as one more message property (an application property) and drop nothing by it, and on
Classic's memory store, where the broker's CPU is the rate, each extra header costs intake.
The header is added per write, not per message, so Artemis still sees it on every message
written to it: the original and every replay (a message first written to Classic and
replayed to Artemis carries it there; the reverse replay carries none). An ``_AMQ_DUPL_ID``
the application set itself (the Spark sink's ``duplicateDetection=artemis``) goes everywhere.

The broker says who it is in its handshake: STOMP CONNECTED's ``server`` header
(``ActiveMQ-Artemis/2.x ...``), the AMQP open's ``product`` property
(``apache-activemq-artemis``); :attr:`failover_client.adapter.Session.product` carries it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol, TypeVar

from failover_client._events import DuplicatesPossible
from failover_client.engine._outbox import MESSAGE_ID_HEADER, OutboundMessage
from failover_client.uri import FailoverOptions

__all__ = [
    "DUPLICATE_ID_HEADER",
    "Deduplicator",
    "DuplicateNotice",
    "drops_duplicates",
    "may_drop_duplicates",
    "retag",
    "tagged",
]

DUPLICATE_ID_HEADER = "_AMQ_DUPL_ID"
"""Artemis's duplicate-detection property: a message whose value it stored already is dropped."""

_ARTEMIS_PRODUCTS = ("ActiveMQ-Artemis/", "apache-activemq-artemis")


def drops_duplicates(product: str | None) -> bool:
    """Whether a broker that calls itself ``product`` drops copies by ``_AMQ_DUPL_ID``."""
    return product is not None and product.startswith(_ARTEMIS_PRODUCTS)


# What ActiveMQ Classic and RabbitMQ call themselves: STOMP CONNECTED's ``server``
# (``ActiveMQ/5.17.2``, ``RabbitMQ/3.10.8``; Artemis's ``ActiveMQ-Artemis/`` is not one) and
# the AMQP open's ``product`` (``ActiveMQ``, ``RabbitMQ``).
_KEEPS_COPIES_STOMP = ("ActiveMQ/", "RabbitMQ/")
_KEEPS_COPIES_AMQP = frozenset({"ActiveMQ", "RabbitMQ"})


def may_drop_duplicates(product: str | None) -> bool:
    """Whether a write to a broker that calls itself ``product`` carries ``_AMQ_DUPL_ID``.

    False only for a broker known to keep copies (ActiveMQ Classic, RabbitMQ); True for
    Artemis, for a session that named no product, and for any other name (a router or proxy
    may stand in front of an Artemis): an unneeded header costs intake, a missing one a copy.
    """
    if not product:
        return True
    return not (product.startswith(_KEEPS_COPIES_STOMP) or product in _KEEPS_COPIES_AMQP)


def tagged(headers: Mapping[str, str], message_id: str | None, on: bool) -> dict[str, str]:
    """``headers`` with the engine's ``_AMQ_DUPL_ID`` (``message_id``) when ``on``, else
    without it."""
    if on:
        assert message_id is not None  # an owned header belongs to a message with an id
        return {**headers, DUPLICATE_ID_HEADER: message_id}
    return {k: v for k, v in headers.items() if k != DUPLICATE_ID_HEADER}


def retag(message: OutboundMessage, on: bool) -> Mapping[str, str]:
    """Store in ``message`` (whose header the engine owns) its headers for a broker that
    may drop copies (``on``) or not, and return them: a replay to another kind of broker.

    One assignment, so a stale write racing a replay leaves headers whole for one broker or
    the other; each write decides from the headers it sends.
    """
    headers = message.headers = tagged(message.headers, message.message_id, on)
    return headers


class DuplicateNotice:
    """Says once per connection that duplicates are possible (and again only after a broker
    that dropped them). Used by the reconnect loop's thread only."""

    __slots__ = ("_on", "_said")

    def __init__(self, options: FailoverOptions) -> None:
        self._on = options.dedup == "auto"
        self._said: bool = False

    def connected(self, broker: str, product: str | None) -> DuplicatesPossible | None:
        """The event to emit for a new session on ``broker``, or None."""
        if self._on and drops_duplicates(product):
            self._said = False
            return None
        if self._said:
            return None
        self._said = True
        if not self._on:
            reason = f"dedup=off: sends carry no {DUPLICATE_ID_HEADER}"
        else:
            name = product or "the broker (it did not name its product)"
            reason = f"{name} has no duplicate detection by {DUPLICATE_ID_HEADER}"
        return DuplicatesPossible(
            broker, f"{reason}; each copy of a replayed message carries its failover-message-id"
        )


class _HasHeaders(Protocol):
    @property
    def headers(self) -> Mapping[str, str]: ...


class _Delivered(_HasHeaders, Protocol):
    def ack(self) -> None: ...


M = TypeVar("M", bound=_HasHeaders)
D = TypeVar("D", bound=_Delivered)


def _message_key(message: _HasHeaders) -> str | None:
    headers = message.headers
    return headers.get(MESSAGE_ID_HEADER) or headers.get(DUPLICATE_ID_HEADER)


class Deduplicator:
    """Drops a message whose ``failover-message-id`` was handled among the last ``window`` ids.

    For brokers that keep a replayed copy (ActiveMQ Classic, RabbitMQ: a
    :class:`~failover_client.DuplicatesPossible` event says so at connect): after a failover
    the producer's unconfirmed sends are sent again with the same id, so a consumer may get
    a message twice. Use it around a handler, or over an iterator::

        dedup = Deduplicator(window=10_000)
        conn.subscribe("/queue/orders", dedup(handle))  # a copy is acknowledged, not handled
        for message in dedup.filter(subscription):  # or over a pull subscription
            ...

    An id counts as seen once its message was *handled*: the handler returned (a handler
    that raises leaves the id unseen, so the broker's redelivery is handled again), or the
    iterator was asked for the next message. A message without the header (a sender that is
    not a failover connection) always passes. Wrapped handlers acknowledge a dropped copy
    (``message.ack()``), so it does not stay in the subscription's prefetch.

    Memory is bounded: at most ``window`` ids are kept, the oldest forgotten first; each costs
    about 70 bytes of bookkeeping plus its string (49 bytes and its length), so 10,000 ids of
    40 characters take about 1.6 MB (measured with tracemalloc). A copy that arrives after
    ``window`` other messages passes: choose a window larger than the messages that can be
    in flight during one failover (the producers' ``confirmWindow`` summed, plus the
    consumers' prefetch). Thread-safe.
    """

    def __init__(
        self, window: int = 10_000, *, key: Callable[[_HasHeaders], str | None] = _message_key
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.window = window
        self._key = key
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.dropped = 0
        """Copies dropped so far."""

    def seen(self, message: _HasHeaders) -> bool:
        """Whether ``message``'s id was handled already (counts it as a dropped copy)."""
        key = self._key(message)
        if key is None:
            return False
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                self.dropped += 1
                return True
            return False

    def handled(self, message: _HasHeaders) -> None:
        """Remember ``message``'s id (forgetting the oldest beyond ``window``)."""
        key = self._key(message)
        if key is None:
            return
        with self._lock:
            self._seen[key] = None
            self._seen.move_to_end(key)
            while len(self._seen) > self.window:
                self._seen.popitem(last=False)

    def __call__(self, handler: Callable[[D], object]) -> Callable[[D], None]:
        """``handler`` wrapped: a copy of a handled message is acknowledged and skipped."""

        def deduplicated(message: D) -> None:
            if self.seen(message):
                message.ack()
                return
            handler(message)
            self.handled(message)

        return deduplicated

    def filter(self, messages: Iterable[M]) -> Iterator[M]:
        """The messages of ``messages`` without the copies of ones already handled."""
        for message in messages:
            if self.seen(message):
                continue
            yield message
            # Asked for the next one: this one was handled.
            self.handled(message)

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def __repr__(self) -> str:
        return f"<Deduplicator window={self.window} ids={len(self)} dropped={self.dropped}>"
