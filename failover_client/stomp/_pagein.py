"""Keep ActiveMQ Classic paging a queue in for a subscription that holds its messages.

ActiveMQ Classic (5.17; ``Queue.iterate`` in activemq-broker) moves a queue's messages from its
store into memory ("pages them in") at most ``maxPageSize`` at a time (200 unless the broker's
destination policy says otherwise), and only when the queue is woken: by a message sent to it,
an acknowledgement, a consumer added or removed, a consumer's prefetch changed, or the expiry
scan (every 30 s). Dispatching a page wakes nothing. So a ``client`` / ``client-individual``
subscription with a prefetch above the page size, on a queue whose backlog is already stored,
gets one page per wake-up: if it holds its messages unacknowledged (a batch acknowledged once
processed), it gets 200-600 of them and then one page every 30 s, whatever its prefetch and
whatever client it is (raw stomp.py measured the same; see docs/receiving.md).

The broker's own remedy is a ``maxPageSize`` at least the prefetch. From the client, what wakes
the queue without consuming anything is a consumer added and removed: a SUBSCRIBE to the same
queue with ``activemq.prefetchSize:0`` (a consumer ActiveMQ counts as full, so it is never sent a
message) and its UNSUBSCRIBE, two wake-ups, up to two pages. :class:`PageIn` writes such a pair
after every :data:`PAGE_IN_STEP` messages a watched subscription received without an
acknowledgement written in between; acknowledgements wake the queue themselves, so a
subscription that acknowledges as it goes never causes one, and a queue that has nothing more
to page in ends the deliveries and so the pairs.

Subscriptions the engine acknowledges itself (a user's ``auto`` ones,
``SubscriptionSpec.engine_acks``) are not watched: their acknowledgements keep coming, and the
pairs a delivery burst ahead of the handler would cause cost a callback consumer about 15% of
its throughput at prefetch 1,000 (ActiveMQ adds and removes a consumer for each) for nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from failover_client.adapter import SubscriptionSpec
from failover_client.stomp._flow import BrokerKind

__all__ = ["ACTIVEMQ_PAGE_SIZE", "PAGE_IN_STEP", "PageIn", "page_in_id"]

ACTIVEMQ_PAGE_SIZE = 200
"""ActiveMQ Classic's default ``maxPageSize``: a prefetch up to it fits in the first page."""

PAGE_IN_STEP = 100
"""Unacknowledged deliveries between two wake-ups: half a default page, so the next page is
asked for while the current one is still arriving."""

_SUFFIX = "~page-in"

Write = Callable[[Sequence[tuple[str, dict[str, str]]]], bool]
"""Writes bodiless frames ``(command, headers)`` together without waiting; False: not now."""


def page_in_id(subscription_id: str) -> str:
    """The id of the prefetch-0 subscription that wakes ``subscription_id``'s queue."""
    return subscription_id + _SUFFIX


def _needs_waking(spec: SubscriptionSpec, kind: BrokerKind) -> bool:
    return (
        kind == "activemq"
        and not spec.engine_acks
        and spec.ack in ("client", "client-individual")
        and spec.destination.startswith("/queue/")
        and spec.prefetch > ACTIVEMQ_PAGE_SIZE
    )


class PageIn:
    """The subscriptions of one session whose queue may need waking, and their counts.

    Thread-safe: deliveries are counted on the I/O thread, acknowledgements on callers'.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[str, tuple[str, int]] = {}
        """subscription id -> (queue, deliveries since the last acknowledgement or wake-up)"""
        self.wakeups = 0
        """Pairs written so far (SUBSCRIBE and UNSUBSCRIBE of a prefetch-0 consumer)."""

    def watch(self, spec: SubscriptionSpec, kind: BrokerKind) -> None:
        """Start counting for ``spec`` if ActiveMQ may stop paging its queue in for it."""
        if _needs_waking(spec, kind):
            with self._lock:
                self._watched[spec.id] = (spec.destination, 0)

    def forget(self, subscription_id: str) -> None:
        """The subscription ended: its late deliveries wake nothing."""
        with self._lock:
            self._watched.pop(subscription_id, None)

    def acknowledged(self, subscription_id: str) -> None:
        """An ACK or NACK was written for the subscription: the broker wakes its queue."""
        with self._lock:
            entry = self._watched.get(subscription_id)
            if entry is not None:
                self._watched[subscription_id] = (entry[0], 0)

    def delivered(self, subscription_id: str, write: Write) -> None:
        """Count one message of the subscription; every :data:`PAGE_IN_STEP`, wake its queue.

        ``write`` writes the pair together or not at all (False when another thread is
        writing: what it writes, an ACK or a SEND, wakes the queue too), and may raise
        (:class:`BrokerUnavailable` when the session is gone). The count is reset first, so
        a pair not written is not retried before another step of messages.
        """
        with self._lock:
            entry = self._watched.get(subscription_id)
            if entry is None:
                return
            queue, count = entry[0], entry[1] + 1
            due = count >= PAGE_IN_STEP
            self._watched[subscription_id] = (queue, 0 if due else count)
        if not due:
            return
        nudge = page_in_id(subscription_id)
        # client-individual: were a message ever dispatched to it, the UNSUBSCRIBE would
        # return it to the queue unconsumed (auto would consume it).
        subscribe = {
            "destination": queue,
            "id": nudge,
            "ack": "client-individual",
            "activemq.prefetchSize": "0",
        }
        if write((("SUBSCRIBE", subscribe), ("UNSUBSCRIBE", {"id": nudge}))):
            with self._lock:
                self.wakeups += 1
