"""Subscriptions that outlive sessions, and the messages they deliver.

A :class:`Subscription` belongs to the failover connection, not to a session: the connection
re-creates it, with the same id, on every new session after a fail-over. A :class:`Message`
remembers the session that delivered it; its :meth:`~Message.ack` goes back to *that* session,
or is dropped (and reported as an ``AckDropped`` event) when that session is dead, because an
ack sent to another broker would acknowledge nothing there, or the wrong message.

Every subscription goes on the wire with client acknowledgement, so the broker's prefetch
bounds what the client holds: a user's ``auto`` subscription is acknowledged by the engine
once its messages were handled. A callback subscription is subscribed as ``client`` and
acknowledged cumulatively, once per half window or when nothing more waits (``_autoack``); a
pull subscription as ``client-individual``, each message once the consumer asked for the next.
:attr:`Subscription.ack` is the user's mode, ``spec.ack`` the one on the wire.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from failover_client._errors import ConfigurationError
from failover_client.adapter import AckMode, Received, SubscriptionSpec

if TYPE_CHECKING:
    from failover_client.engine._inbox import Inbox

__all__ = ["AckRouter", "Handler", "Message", "Subscription", "SubscriptionRegistry"]


class AckRouter(Protocol):
    """The connection's side of ``Message.ack`` / ``Subscription.unsubscribe``."""

    def settle_message(self, message: Message, *, nack: bool) -> None: ...

    def unsubscribe(self, subscription: Subscription) -> None: ...

    def wait_active(self, subscription: Subscription, timeout: float | None) -> None: ...

    def receive(self, subscription: Subscription, timeout: float | None) -> Message | None: ...

    def is_active(self, subscription: Subscription) -> bool: ...


class Message:
    """A message delivered to a subscription handler.

    ``redelivered`` is the broker's own flag (STOMP ``redelivered`` header / AMQP
    ``delivery-count`` > 0): after a fail-over, messages the old broker had delivered but not
    seen acknowledged come again with it set. ``message_id`` is the ``failover-message-id`` a
    failover sender put on it, else the broker's id.
    """

    __slots__ = ("_received", "_router", "_session", "_settled", "subscription")

    def __init__(
        self,
        received: Received,
        subscription: Subscription,
        session: object,
        router: AckRouter,
    ) -> None:
        self._received = received
        self.subscription = subscription
        self._session = session
        self._router = router
        self._settled = False

    @property
    def body(self) -> bytes:
        return self._received.body

    @property
    def headers(self) -> Mapping[str, str]:
        return self._received.headers

    @property
    def destination(self) -> str:
        return self._received.destination

    @property
    def message_id(self) -> str | None:
        return self._received.headers.get("failover-message-id", self._received.message_id)

    @property
    def redelivered(self) -> bool:
        return self._received.redelivered

    @property
    def session(self) -> object:
        """The session slot that delivered this message (opaque; used to route the ack)."""
        return self._session

    @property
    def received(self) -> Received:
        return self._received

    @property
    def settled(self) -> bool:
        """Whether it was acknowledged, rejected or handed back (or its ack dropped)."""
        return self._settled

    def ack(self) -> None:
        """Acknowledge it on the session that delivered it (once; later calls do nothing).

        ``client`` / ``client-individual``: the application's to call. ``auto``: the engine
        acknowledges once the handler returned (or the pull consumer asked for the next
        message); calling it earlier settles it then.
        """
        self._settle(nack=False)

    def nack(self) -> None:
        """Reject it, so the broker redelivers or dead-letters it by its own rules (once)."""
        self._settle(nack=True)

    def mark_settled(self) -> None:
        """Settled on the wire by another message's cumulative ``client`` acknowledgement."""
        self._settled = True

    def _settle(self, *, nack: bool) -> None:
        if self._settled:
            return
        self._settled = True
        try:
            self._router.settle_message(self, nack=nack)
        except BaseException:
            self._settled = False  # refused (a forked child): the message is still unsettled
            raise

    def __repr__(self) -> str:
        return (
            f"<Message {self.message_id} on {self.destination} sub={self.subscription.id}"
            f" bytes={len(self.body)}{' redelivered' if self.redelivered else ''}>"
        )


Handler = Callable[[Message], None]


class Subscription:
    """One subscription of the failover connection; survives fail-over with the same ``id``.

    With a handler, the connection runs it for each message on a worker thread of this
    subscription. Without one (a pull subscription), :meth:`receive` or iteration hands the
    messages out. Either way the buffer holds at most ``prefetch`` messages per session: the
    rest waits on the broker.
    """

    def __init__(
        self,
        spec: SubscriptionSpec,
        handler: Handler | None,
        router: AckRouter,
        inbox: Inbox,
        *,
        ack: AckMode | None = None,
    ) -> None:
        self.spec = spec
        self.handler = handler
        self._router = router
        self.inbox = inbox
        self._ack: AckMode = spec.ack if ack is None else ack
        self.delivered = 0
        self.error: BaseException | None = None
        """Why the broker refused it (a :class:`~failover_client.SubscriptionRefused`); once
        set, the subscription is gone: not active, never restored."""
        self.losses = 0
        """Sessions that died with this subscription unanswered (poison detection)."""
        self.suspect = False
        """Restored alone, waiting for its confirmation, on the next session."""
        self.outstanding: Message | None = None
        """Pull, ``auto``: the message handed out last, acknowledged when the next is asked."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def destination(self) -> str:
        return self.spec.destination

    @property
    def ack(self) -> AckMode:
        """The application's acknowledgement mode (``spec.ack`` is the one on the wire)."""
        return self._ack

    @property
    def durable_name(self) -> str | None:
        return self.spec.durable_name

    @property
    def prefetch(self) -> int:
        return self.spec.prefetch

    @property
    def last_delivery_at(self) -> float | None:
        """``clock.monotonic()`` when the last message was put in its buffer (None: never)."""
        return self.inbox.last_delivery_at

    @property
    def handled(self) -> int:
        """Messages handled: the handler returned or raised, or a pull consumer was done."""
        return self.inbox.handled

    @property
    def in_flight(self) -> int:
        """Messages delivered and not yet settled: buffered, being handled, or held unacked.

        Per session at most ``prefetch`` (the broker's window). A message of a session that
        died counts until it is handled or acknowledged (its ack is dropped then)."""
        return self.inbox.in_flight

    @property
    def active(self) -> bool:
        """Whether the broker in use has confirmed this subscription."""
        return self._router.is_active(self)

    def receive(self, timeout: float | None = None) -> Message | None:
        """The next message of a pull subscription (``handler=None``), or None.

        Waits up to ``timeout`` seconds (None: until a message comes or the subscription
        ends); returns None on timeout and once unsubscribed, drained or closed. With
        ``ack="auto"`` the previous message counts as handled (is acknowledged) now, unless
        it was settled already; ``client`` modes: call ``message.ack()``. ConfigurationError
        for a subscription with a handler.
        """
        return self._router.receive(self, timeout)

    def __iter__(self) -> Iterator[Message]:
        """The messages as they come; ends when unsubscribed or the connection closes."""
        while (message := self.receive()) is not None:
            yield message

    def unsubscribe(self) -> None:
        """Stop the subscription on the current broker and stop restoring it.

        What was buffered and never handled is handed back to the broker (``MessagesReleased``).
        """
        self._router.unsubscribe(self)

    def wait_active(self, timeout: float | None = None) -> None:
        """Block until the broker in use has confirmed this subscription.

        Raises :class:`~failover_client.SubscriptionRefused` if a broker refused it (a bad
        selector, an unknown exchange, no permission), :class:`TimeoutError` when no broker
        confirmed it within ``timeout`` seconds (``None``: wait as long as it takes), the
        connection's error if it closed or gave up, and ConfigurationError once unsubscribed.
        """
        self._router.wait_active(self, timeout)

    def __repr__(self) -> str:
        refused = " refused" if self.error is not None else ""
        return (
            f"<Subscription {self.id} {self.destination} ack={self.ack} "
            f"prefetch={self.prefetch} delivered={self.delivered} handled={self.handled} "
            f"in_flight={self.in_flight}{refused}>"
        )


class SubscriptionRegistry:
    """The live subscriptions, in creation order (restored in that order)."""

    __slots__ = ("_ids", "_lock", "_subscriptions")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: dict[str, Subscription] = {}
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        with self._lock:
            while True:
                candidate = f"sub-{next(self._ids)}"
                if candidate not in self._subscriptions:
                    return candidate

    def add(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription.id in self._subscriptions:
                raise ConfigurationError(f"subscription id {subscription.id!r} is already in use")
            self._subscriptions[subscription.id] = subscription

    def remove(self, subscription_id: str) -> Subscription | None:
        with self._lock:
            return self._subscriptions.pop(subscription_id, None)

    def get(self, subscription_id: str) -> Subscription | None:
        with self._lock:
            return self._subscriptions.get(subscription_id)

    def specs(self) -> list[SubscriptionSpec]:
        with self._lock:
            return [s.spec for s in self._subscriptions.values()]

    def all(self) -> list[Subscription]:
        with self._lock:
            return list(self._subscriptions.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._subscriptions)
