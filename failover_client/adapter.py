"""The public interface between the connection engine and a protocol adapter.

Implement it to teach :class:`~failover_client.FailoverConnection` a new protocol (pass your
connector as ``connector=``). The engine is protocol-neutral: it sees a :class:`Connector` that
opens a :class:`Session` to one broker, and a :class:`SessionListener` through which the session
reports messages, loss and broker lists that arrive on the data connection. The STOMP adapter
(:mod:`failover_client.stomp`), the AMQP 1.0 adapter and the scripted fake in
:mod:`failover_client.testing` all implement it, and
:mod:`failover_client.testing.contract` checks that an adapter keeps it.

The contract, in short:

* ``Connector.connect`` returns only after the protocol handshake, within ``timeout``, and ends
  promptly with :class:`~failover_client.ConnectCancelled` when its ``cancel`` token fires;
* every failure is one of the library's errors (:mod:`failover_client` exceptions), raised
  ``from`` the library's own exception; an adapter never reconnects by itself;
* ``SessionListener.on_lost`` is called exactly once per session that dies (not after the
  engine's own ``close()``), and every confirmation still outstanding then is completed with a
  :class:`~failover_client.ConnectionFailure` (the engine replays those sends elsewhere);
* a session that is closed or lost raises :class:`~failover_client.BrokerUnavailable` from
  ``send``, ``subscribe``, ``unsubscribe``, ``ack`` and ``nack``; ``close`` never raises.

Settings every connector shares (heart-beats, close timeout, TLS files, default credentials)
are checked by one value, :class:`failover_client.ConnectorSettings`, at construction: a wrong
setting is a :class:`~failover_client.ConfigurationError` there, never a connect failure that
the reconnect loop would retry.

A connect can be cut short: the engine hands each ``connect`` a :class:`Cancel` token and
cancels it when the application closes the connection, so ``close()`` does not wait for a
handshake with a hung broker to time out.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from failover_client.uri import BrokerAddress

__all__ = [
    "AckMode",
    "AdvertisedBrokers",
    "Cancel",
    "ConfirmCallback",
    "Connector",
    "Received",
    "Session",
    "SessionListener",
    "SubscriptionSpec",
    "Syncing",
]

_log = logging.getLogger("failover_client")

AckMode = Literal["auto", "client", "client-individual"]

ConfirmCallback = Callable[[BaseException | None], None]
"""Called once per confirmed send: ``None`` on success, the error (already mapped) otherwise.

The engine's callbacks also carry ``confirm_together``, a callable shared by all callbacks of
one connection: ``cb.confirm_together([cb1, cb2, ...])`` is the same as calling each with
``None``, in one pass. An adapter that confirms many sends by one answer (a transaction's
COMMIT) may use it (``failover_client.net._completions.confirm_all`` does); calling each
callback is always correct.
"""


@dataclass(frozen=True)
class SubscriptionSpec:
    """What the engine needs to (re)create a subscription on any broker."""

    id: str
    destination: str
    ack: AckMode = "auto"
    durable_name: str | None = None
    """Durable topic subscription name (STOMP ``activemq.subscriptionName`` / AMQP link name)."""
    headers: tuple[tuple[str, str], ...] = ()
    prefetch: int = 100
    """Messages the broker may have delivered on this subscription and not yet seen settled
    (acknowledged, rejected or released): the adapter translates it into the broker's flow
    control (ActiveMQ ``activemq.prefetchSize``, RabbitMQ ``prefetch-count``, Artemis
    ``consumer-window-size``, AMQP link credit). It binds in the ``client`` modes; the engine
    subscribes a user's ``auto`` subscription in one of them (a callback one as ``client``,
    acknowledged cumulatively once handled; a pull one as ``client-individual``), so the bound
    holds there too."""
    prefetch_bytes: int = 0
    """An optional byte bound besides ``prefetch`` (0: none); where a broker counts its window
    in bytes (Artemis) it is that window."""
    engine_acks: bool = False
    """The engine acknowledges every message as it is handled or the next one pulled (a user's
    ``auto`` subscription), so acknowledgements keep coming; False: the application does, and
    may hold messages unacknowledged (the STOMP adapter then keeps ActiveMQ paging in)."""


@dataclass(frozen=True)
class Received:
    """A message as a session delivers it to the engine."""

    subscription_id: str
    destination: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    message_id: str | None = None
    ack_id: str | None = None
    """Adapter-specific token passed back to :meth:`Session.ack`."""
    redelivered: bool = False


@dataclass(frozen=True)
class AdvertisedBrokers:
    """Brokers a broker named on the data connection (not a topology source beside it).

    AMQP 1.0 brokers send a ``failover-server-list`` in their open frame, and may close a
    connection with ``amqp:connection:redirect`` naming where to go instead. The adapter parses
    what the broker sent into addresses of its own scheme and reports them; the engine merges
    them into the pool (seeds are never removed, TLS is never downgraded, options never come
    from a broker) and emits ``TopologyChanged``.
    """

    brokers: tuple[BrokerAddress, ...]
    source: str
    """Where the list came from, e.g. ``amqp-open`` or ``amqp-redirect`` (shown in events)."""
    redirect: bool = False
    """The broker sent the client away: try ``brokers[0]`` first on the coming reconnect."""


class SessionListener(Protocol):
    """How a session talks back to the engine. Called on the adapter's I/O thread."""

    def on_message(self, session: Session, message: Received) -> None: ...

    def on_lost(self, session: Session, cause: BaseException) -> None:
        """The session is dead (socket closed, heart-beat missed, ERROR frame). Called once.

        ``cause`` is a :class:`~failover_client.BrokerRefused` when the broker ended the session
        on purpose with an error that named none of the frames in flight (a STOMP ERROR without
        a receipt of ours, an AMQP close with an error condition): the broker is alive and
        refused something it was sent, so the engine replays what was in flight one frame at
        a time to find the poison one.
        """

    def on_brokers(self, session: Session, advertised: AdvertisedBrokers) -> None:
        """The broker named other brokers on this connection (see :class:`AdvertisedBrokers`).

        May be called during ``connect`` (from the handshake) and at any time after it.
        """


class Session(Protocol):
    """A handshaken connection to one broker. Not thread-safe unless the adapter says so."""

    @property
    def address(self) -> BrokerAddress: ...

    @property
    def product(self) -> str | None:
        """The broker's own name for its software, from the handshake: STOMP CONNECTED's
        ``server`` header (``ActiveMQ/5.17.2``), the AMQP open's ``product`` property
        (``apache-activemq-artemis``); None when it sent none. The engine reads it to know
        whether the broker drops replayed copies by ``_AMQ_DUPL_ID``."""
        ...

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

    def subscribe(self, spec: SubscriptionSpec, on_confirm: ConfirmCallback | None) -> None:
        """Start ``spec`` on this session; ``on_confirm`` (if given) fires once with the outcome.

        ``None`` when the broker confirmed the subscription (STOMP RECEIPT, AMQP attach with a
        source); :class:`~failover_client.SubscriptionRefused` when the broker refused this one
        subscription (a STOMP ERROR naming its receipt, an AMQP attach refused with a
        condition); the loss cause when the session died first. Raises
        :class:`~failover_client.BrokerUnavailable` when the session is already dead.
        """

    def unsubscribe(self, subscription_id: str) -> None: ...

    def ack(self, message: Received) -> None: ...

    def nack(self, message: Received) -> None:
        """Reject ``message``: the broker redelivers or dead-letters it, by its own rules."""

    def release(self, message: Received) -> None:
        """Hand ``message`` back unhandled, for redelivery, without counting a failed delivery.

        What ``close(drain=...)`` and a drain use for messages delivered but never handled.
        Where a broker has no such frame and returns unsettled messages when the subscription
        or session ends (ActiveMQ, whose STOMP NACK dead-letters), this writes nothing.
        """

    def private_destination(self, name: str) -> tuple[str, Mapping[str, str]]:
        """A destination only this session reads, gone with the session (the canary's).

        Returns the address to send to and subscribe, and the extra SUBSCRIBE headers that
        make it private (e.g. a RabbitMQ auto-delete exclusive queue). ``name`` is unique
        per session.
        """

    def close(self) -> None:
        """Close politely if possible; never raises; idempotent."""


@runtime_checkable
class Syncing(Protocol):
    """A session that can confirm that the broker took every frame written before.

    Optional: the engine asks ``isinstance(session, Syncing)``, and a session without it
    cannot confirm its acknowledgements (the caller is told so). What it is for: an ``ack`` is
    fire-and-forget, and a process that ends (or a socket closed with unread data, which the
    kernel ends with a reset) right after writing acknowledgements can lose the ones the broker
    had not read yet, so the broker delivers those messages again.
    """

    def sync(self, on_confirm: ConfirmCallback) -> None:
        """Call ``on_confirm(None)`` once the broker took every frame written before this call.

        STOMP: a frame with a receipt behind them (a broker handles one connection's frames in
        order, so its RECEIPT confirms everything before); AMQP 1.0, whose settlements have no
        answer: the answer to a link attach written behind them on the same AMQP session
        (``failover_client.amqp._probe``). ``on_confirm`` gets the loss cause if the
        session ends first. Raises :class:`~failover_client.BrokerUnavailable` (and never
        calls ``on_confirm``) when the session is already closed or lost.
        """


class Cancel:
    """A one-shot, thread-safe cancellation token for one :meth:`Connector.connect` call.

    Whoever started the connect calls :meth:`cancel` (from any thread); the adapter registers
    callbacks with :meth:`add_callback` that unblock whatever the connect waits on (an event, a
    selector, a socket). Each callback runs exactly once, on the thread that cancels, in the
    order registered; one registered after the cancel runs at once, on the registering thread.
    A callback that raises is logged and does not keep the others from running: ``cancel()``
    never raises, because ``close()`` calls it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on cancel (at once if already cancelled); returns its remover.

        Calling the remover (idempotent, any thread) unregisters a callback that has not run
        yet; it cannot stop one that is already running on the cancelling thread.
        """
        with self._lock:
            if not self._cancelled:
                key = next(self._keys)
                self._callbacks[key] = callback
                return lambda: self._remove(key)
        _run_callback(callback)
        return _nothing

    def cancel(self) -> None:
        """Cancel (idempotent) and run the registered callbacks on this thread."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        # Outside the lock: a callback may take the adapter's own locks, or register another.
        for callback in callbacks:
            _run_callback(callback)

    def _remove(self, key: int) -> None:
        with self._lock:
            self._callbacks.pop(key, None)

    def __repr__(self) -> str:
        with self._lock:
            return f"Cancel(cancelled={self._cancelled}, callbacks={len(self._callbacks)})"


def _run_callback(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # noqa: BLE001 - one broken callback must not keep the rest from running
        _log.exception("a connect-cancel callback failed")


def _nothing() -> None:
    """The remover of a callback that already ran."""


class Connector(Protocol):
    """Opens sessions. Holds protocol-wide settings (heart-beats, TLS context, credentials)."""

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel,
    ) -> Session:
        """Connect and finish the protocol handshake within ``timeout`` seconds.

        Returns only after STOMP CONNECTED / AMQP open. Raises BrokerUnavailable,
        AuthenticationFailed, TLSFailure or ProtocolViolation (mapped, ``from`` the cause).

        ``cancel`` may be cancelled from another thread at any moment (the application
        closed the connection): the connect then ends promptly, not at ``timeout``, with
        :class:`~failover_client.ConnectCancelled`, leaving no thread or socket behind.
        """
