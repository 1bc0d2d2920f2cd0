"""A subscription's prefetch in each broker's own words, and what "release" writes there.

STOMP has no flow control of its own; each broker reads its own SUBSCRIBE header, and the
broker is known from the ``server`` header of its CONNECTED frame:

=================  ==========================  ============================================
broker             SUBSCRIBE header            unit
=================  ==========================  ============================================
ActiveMQ Classic   ``activemq.prefetchSize``   messages
RabbitMQ           ``prefetch-count``          messages (the subscription's own channel QoS)
Artemis            ``consumer-window-size``    bytes (Artemis 2.16 and later)
=================  ==========================  ============================================

Artemis counts its window in bytes of the encoded messages: the window is ``prefetch_bytes``
when the subscription sets one, else ``prefetch`` x :data:`ARTEMIS_BYTES_PER_MESSAGE` (4 KiB, a
typical small message with its headers), so ``prefetch`` small messages fit and larger ones
fewer. A broker the ``server`` header does not name gets all three headers: brokers ignore
SUBSCRIBE headers they do not know, and one that knows any of them then bounds delivery.
A header the caller passed in the subscription's own headers wins over the one derived here.

Where each window binds, measured on the brokers the tests start (see
``integration/test_adapter_prefetch.py``): ActiveMQ Classic 5.17 and RabbitMQ 3.10 deliver at
most ``prefetch`` unacknowledged messages in ``client`` and ``client-individual`` mode; in
``auto`` mode neither bounds anything (ActiveMQ counts a message acknowledged once dispatched,
RabbitMQ applies no QoS to an auto-ack consumer), which is why the engine subscribes a user's
``auto`` subscription in a ``client`` mode. Artemis reads ``consumer-window-size`` since
2.16 (ARTEMIS-589, "flow control for individual STOMP subscribers"; before, only the
acceptor-wide ``stompConsumerCredits``) and returns a window's credit as messages are
acknowledged; it is not measured here (the harness runs Artemis only where Docker is).

:func:`release_command` is what hands a message back unhandled. STOMP's NACK means different
things per broker: RabbitMQ requeues the message (its ``requeue`` header defaults to true), so
NACK is a release there. ActiveMQ Classic answers NACK with a *poison* acknowledgement
(``StompSubscription.onStompMessageNack`` in activemq-stomp 5.17 builds a ``MessageAck`` of
type 1, ``POSION_ACK_TYPE``), which sends the message to the dead-letter queue at once, and
Artemis counts a NACK as a failed delivery. Both return a message that was delivered and never
acknowledged to the queue when the subscription or the session ends, unmarked by a failure:
so there a release writes nothing, and the message comes back once the engine unsubscribes or
closes the session. Until then it still counts against the subscription's prefetch, and in
``client`` mode a later cumulative ACK would cover it: release only at the end of a
subscription (a drain, a close), as the engine does.
"""

from __future__ import annotations

import re
from typing import Literal

from failover_client._errors import ConfigurationError
from failover_client.adapter import SubscriptionSpec

__all__ = [
    "ARTEMIS_BYTES_PER_MESSAGE",
    "BrokerKind",
    "artemis_window",
    "broker_kind",
    "prefetch_headers",
    "release_command",
]

BrokerKind = Literal["activemq", "rabbitmq", "artemis", "unknown"]

ARTEMIS_BYTES_PER_MESSAGE = 4096
"""Bytes one message is counted as when Artemis's window is derived from ``prefetch``."""

_PREFETCH = {
    "activemq": "activemq.prefetchSize",
    "rabbitmq": "prefetch-count",
}
_WINDOW = "consumer-window-size"

# Artemis calls itself "ActiveMQ-Artemis/2.x ..."; Classic "ActiveMQ/5.x".
_SERVERS: tuple[tuple[re.Pattern[str], BrokerKind], ...] = (
    (re.compile(r"ActiveMQ-Artemis/", re.IGNORECASE), "artemis"),
    (re.compile(r"ActiveMQ/\d", re.IGNORECASE), "activemq"),
    (re.compile(r"RabbitMQ/", re.IGNORECASE), "rabbitmq"),
)


def broker_kind(server: str | None) -> BrokerKind:
    """The broker a CONNECTED frame's ``server`` header names; ``unknown`` when none."""
    for pattern, kind in _SERVERS:
        if server and pattern.match(server):
            return kind
    return "unknown"


def _check(spec: SubscriptionSpec) -> None:
    prefetch, window = spec.prefetch, spec.prefetch_bytes
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
        raise ConfigurationError(
            f"subscription {spec.id!r}: prefetch must be a whole number >= 1, got {prefetch!r}"
        )
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigurationError(
            f"subscription {spec.id!r}: prefetch_bytes must be a whole number >= 0 "
            f"(0: no byte bound), got {window!r}"
        )


def artemis_window(spec: SubscriptionSpec) -> int:
    """Artemis's ``consumer-window-size`` for ``spec``, in bytes (see the module)."""
    if spec.prefetch_bytes > 0:
        return spec.prefetch_bytes
    return spec.prefetch * ARTEMIS_BYTES_PER_MESSAGE


def prefetch_headers(spec: SubscriptionSpec, kind: BrokerKind) -> dict[str, str]:
    """The SUBSCRIBE headers that bound ``spec``'s delivery on a ``kind`` broker.

    Raises :class:`ConfigurationError` for a prefetch below 1 or a negative byte bound.
    """
    _check(spec)
    count = str(spec.prefetch)
    if kind == "artemis":
        return {_WINDOW: str(artemis_window(spec))}
    if kind in _PREFETCH:
        return {_PREFETCH[kind]: count}
    # Unknown: every broker's header; each broker reads its own and ignores the others.
    headers = dict.fromkeys(_PREFETCH.values(), count)
    headers[_WINDOW] = str(artemis_window(spec))
    return headers


def release_command(kind: BrokerKind) -> Literal["NACK"] | None:
    """The frame that hands a message back for redelivery, or None: write nothing."""
    return "NACK" if kind == "rabbitmq" else None
