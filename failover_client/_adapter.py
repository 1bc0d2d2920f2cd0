"""The small interface between the connection manager and a protocol adapter.

The manager is protocol-neutral: it sees a :class:`Connector` that opens a :class:`Session` to one
broker, and a :class:`SessionListener` through which the session reports messages and loss. The
STOMP adapter (stomp.py), the AMQP 1.0 adapter (python-qpid-proton) and the scripted fake in
:mod:`failover_client.testing` all implement it. Adapters map their library's exceptions onto
:mod:`failover_client._errors` at this boundary and never reconnect by themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from failover_client.uri import BrokerAddress

__all__ = [
    "AckMode",
    "ConfirmCallback",
    "Connector",
    "Received",
    "Session",
    "SessionListener",
    "SubscriptionSpec",
]

AckMode = Literal["auto", "client", "client-individual"]

ConfirmCallback = Callable[[BaseException | None], None]
"""Called once per confirmed send: ``None`` on success, the error (already mapped) otherwise."""


@dataclass(frozen=True)
class SubscriptionSpec:
    """What the manager needs to (re)create a subscription on any broker."""

    id: str
    destination: str
    ack: AckMode = "auto"
    durable_name: str | None = None
    """Durable topic subscription name (STOMP ``activemq.subscriptionName`` / AMQP link name)."""
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Received:
    """A message as a session delivers it to the manager."""

    subscription_id: str
    destination: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    message_id: str | None = None
    ack_id: str | None = None
    """Adapter-specific token passed back to :meth:`Session.ack`."""
    redelivered: bool = False


class SessionListener(Protocol):
    """How a session talks back to the manager. Called on the adapter's I/O thread."""

    def on_message(self, session: Session, message: Received) -> None: ...

    def on_lost(self, session: Session, cause: BaseException) -> None:
        """The session is dead (socket closed, heart-beat missed, ERROR frame). Called once."""


class Session(Protocol):
    """A handshaken connection to one broker. Not thread-safe unless the adapter says so."""

    @property
    def address(self) -> BrokerAddress: ...

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        """Write one message; ``on_confirm`` (if given) fires when the broker confirms it.

        Raises :class:`~failover_client.BrokerUnavailable` when the session is already dead.
        """

    def subscribe(self, spec: SubscriptionSpec) -> None: ...

    def unsubscribe(self, subscription_id: str) -> None: ...

    def ack(self, message: Received) -> None: ...

    def nack(self, message: Received) -> None: ...

    def close(self) -> None:
        """Close politely if possible; never raises; idempotent."""


class Connector(Protocol):
    """Opens sessions. Holds protocol-wide settings (heart-beats, TLS context, credentials)."""

    def connect(
        self, address: BrokerAddress, *, timeout: float, listener: SessionListener
    ) -> Session:
        """Connect and finish the protocol handshake within ``timeout`` seconds.

        Returns only after STOMP CONNECTED / AMQP open. Raises BrokerUnavailable,
        AuthenticationFailed, TLSFailure or ProtocolViolation (mapped, ``from`` the cause).
        """
