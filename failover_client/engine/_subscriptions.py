"""Subscriptions that outlive sessions, and the messages they deliver.

A :class:`Subscription` belongs to the failover connection, not to a session: the connection
re-creates it, with the same id, on every new session after a fail-over. A :class:`Message`
remembers the session that delivered it; its :meth:`~Message.ack` goes back to *that* session,
or is dropped (and reported as an ``AckDropped`` event) when that session is dead, because an
ack sent to another broker would acknowledge nothing there, or the wrong message.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from failover_client._errors import ConfigurationError
from failover_client.adapter import AckMode, Received, SubscriptionSpec

__all__ = ["AckRouter", "Handler", "Message", "Subscription", "SubscriptionRegistry"]


class AckRouter(Protocol):
    """The connection's side of ``Message.ack`` / ``Subscription.unsubscribe``."""

    def settle_message(self, message: Message, *, nack: bool) -> None: ...

    def unsubscribe(self, subscription: Subscription) -> None: ...

    def wait_active(self, subscription: Subscription, timeout: float | None) -> None: ...


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

    def ack(self) -> None:
        """Acknowledge (``client`` / ``client-individual`` modes; a no-op for ``auto``)."""
        self._settle(nack=False)

    def nack(self) -> None:
        """Reject so the broker redelivers or dead-letters it (a no-op for ``auto``)."""
        self._settle(nack=True)

    def _settle(self, *, nack: bool) -> None:
        if self.subscription.ack == "auto" or self._settled:
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
    """One subscription of the failover connection; survives fail-over with the same ``id``."""

    def __init__(self, spec: SubscriptionSpec, handler: Handler, router: AckRouter) -> None:
        self.spec = spec
        self.handler = handler
        self._router = router
        self.delivered = 0
        self.last_delivery_at: float | None = None
        """``clock.monotonic()`` when its last message arrived (None: none yet)."""
        self.error: BaseException | None = None
        """Why the broker refused it (a :class:`~failover_client.SubscriptionRefused`); once
        set, the subscription is gone: not active, never restored."""
        self.losses = 0
        """Sessions that died with this subscription unanswered (poison detection)."""
        self.suspect = False
        """Restored alone, waiting for its confirmation, on the next session."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def destination(self) -> str:
        return self.spec.destination

    @property
    def ack(self) -> AckMode:
        return self.spec.ack

    @property
    def durable_name(self) -> str | None:
        return self.spec.durable_name

    def unsubscribe(self) -> None:
        """Stop the subscription on the current broker and stop restoring it."""
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
            f"delivered={self.delivered}{refused}>"
        )


class SubscriptionRegistry:
    """The live subscriptions, in creation order (restored in that order)."""

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

    def __len__(self) -> int:
        with self._lock:
            return len(self._subscriptions)
