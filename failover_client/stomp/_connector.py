"""The STOMP connector: the engine's factory of :class:`StompSession` objects.

It holds what every session of one connection shares: the validated
:class:`~failover_client.net._settings.ConnectorSettings` (the failover options, default
credentials, heart-beat wishes, close timeout, client id and one TLS context, built up front so
that an unusable certificate file is a configuration error at once rather than a "broker
unavailable" on every reconnect), plus what only STOMP has: the confirm mode and the grace
of the heart-beat watchdog.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError
from failover_client.adapter import Cancel, SessionListener
from failover_client.net._settings import ConnectorSettings
from failover_client.stomp._batch import ConfirmMode
from failover_client.stomp._handshake import ConnectSettings
from failover_client.stomp._heartbeat import DEFAULT_GRACE
from failover_client.stomp._loopread import ReadLoop
from failover_client.stomp._session import StompSession
from failover_client.stomp._transport import BoundTransport
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["StompConnector"]


class StompConnector:
    """Opens STOMP sessions to single brokers for the connection manager.

    :param options: the failover options; read for ``heartbeat``, ``confirm_mode``,
        ``max_frame_size`` and the ``tls_*`` settings.
    :param login: default STOMP login; a member URI's ``user`` overrides it.
    :param passcode: default passcode (never shown in any message or repr); a member URI's
        password overrides it, and a member that names a user without a password sends none.
    :param heartbeat: (send, receive) milliseconds; default ``options.heartbeat``. The broker is
        declared lost after ``heartbeat_grace`` receive intervals without a byte from it.
    :param clock: time source for the connect deadline and the heart-beat watchdog.
    :param client_id: sent as ``client-id`` on CONNECT; needed for durable subscriptions
        (ActiveMQ refuses a second connection with the same id while the first is alive).
    :param close_timeout: how long ``close()`` waits for the broker's DISCONNECT receipt and
        for the I/O thread to end.
    :param ssl_context: a ready client context for TLS members, instead of one built from the
        ``tls_*`` options.
    :param transport_factory: builds the stomp.py transport (takes :class:`BoundTransport`'s
        arguments); a seam for tests that script a broker without sockets.
    :param confirm_mode: how confirmed sends are confirmed; default ``options.confirm_mode``:
        ``receipt`` (one RECEIPT per SEND), ``transaction`` (group commit: the sends written
        together share one transaction and its COMMIT's receipt, see ``_batch``), or
        ``auto`` (group commit on brokers known to make it safe, ActiveMQ Classic 5.14+;
        receipts elsewhere). Group commit needs a plain TCP session; TLS sessions use receipts.

    Member parameters read from :class:`BrokerAddress`: ``vhost`` (the STOMP ``host`` header,
    RabbitMQ's virtual host; default: the member's host name).

    Raises :class:`ConfigurationError` at once for unusable TLS files, heart-beat values or
    timeouts (the same checks and messages as every adapter's).
    """

    __slots__ = (
        "_clock",
        "_confirm_mode",
        "_grace",
        "_options",
        "_read_loop",
        "_settings",
        "_transport_factory",
    )

    def __init__(
        self,
        options: FailoverOptions | None = None,
        *,
        login: str | None = None,
        passcode: str | None = None,
        heartbeat: tuple[int, int] | None = None,
        clock: Clock | None = None,
        client_id: str | None = None,
        close_timeout: float = 2.0,
        heartbeat_grace: float = DEFAULT_GRACE,
        ssl_context: ssl.SSLContext | None = None,
        transport_factory: Callable[..., BoundTransport] = BoundTransport,
        confirm_mode: ConfirmMode | None = None,
    ) -> None:
        self._settings = ConnectorSettings(
            options if options is not None else FailoverOptions(),
            login=login,
            passcode=passcode,
            heartbeat=heartbeat,
            close_timeout=close_timeout,
            client_id=client_id,
            ssl_context=ssl_context,
        )
        self._options = self._settings.options
        self._transport_factory = transport_factory
        self._confirm_mode: ConfirmMode = (
            confirm_mode if confirm_mode is not None else self._options.confirm_mode
        )
        if self._confirm_mode not in ("auto", "receipt", "transaction"):
            raise ConfigurationError(
                f"confirm_mode must be auto, receipt or transaction, got {self._confirm_mode!r}"
            )
        if isinstance(heartbeat_grace, bool) or not isinstance(heartbeat_grace, int | float):
            raise ConfigurationError(f"heartbeat_grace must be a number, got {heartbeat_grace!r}")
        if not heartbeat_grace >= 1.0:  # also refuses NaN
            raise ConfigurationError(f"heartbeat_grace must be >= 1.0, got {heartbeat_grace}")
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._grace = float(heartbeat_grace)
        self._read_loop: Callable[[], ReadLoop | None] | None = None

    def read_on_loop(self, where: Callable[[], ReadLoop | None]) -> None:
        """Have an event loop read the plain TCP sessions opened from now on (asyncio).

        ``where()`` is asked as each session starts: ``(loop, ident of its thread)``, or None
        for an I/O thread. Used by :class:`~failover_client.aio.AsyncFailoverConnection` for
        the connector it builds; TLS sessions keep their thread (see ``_loopread``).
        """
        self._read_loop = where

    @property
    def heartbeat(self) -> tuple[int, int]:
        return self._settings.beats

    @property
    def settings(self) -> ConnectorSettings:
        """The validated settings shared with every session this connector opens."""
        return self._settings

    def credentials_for(self, address: BrokerAddress) -> tuple[str | None, str | None]:
        """(login, passcode) for ``address``: the member's own beat the connector's defaults."""
        return self._settings.credentials_for(address)

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel,
    ) -> StompSession:
        """Connect to ``address`` and finish the STOMP handshake within ``timeout`` seconds.

        Returns only after CONNECTED. Raises :class:`BrokerUnavailable` (refused, reset,
        timed out, closed), :class:`AuthenticationFailed`, :class:`TLSFailure` or
        :class:`ProtocolViolation`, each ``from`` the underlying error, naming the broker.
        Cancelling ``cancel`` (from any thread) ends the TCP connect, the TLS handshake or the
        wait for CONNECTED at once with :class:`ConnectCancelled`. Nothing (socket, thread) is
        left behind when it raises, except that a host-name lookup cut short finishes on its
        own daemon thread.
        """
        if address.protocol == "amqp":
            raise ConfigurationError(f"{address}: an AMQP member cannot be opened over STOMP")
        settings = self._settings
        login, passcode = settings.credentials_for(address)
        session = StompSession(
            address,
            listener=listener,
            clock=self._clock,
            close_timeout=settings.close_timeout,
            settings=ConnectSettings(
                login=login,
                passcode=passcode,
                heartbeat=settings.beats,
                grace=self._grace,
                client_id=settings.client_id,
                ssl_context=settings.tls_context() if address.tls else None,
                transport_factory=self._transport_factory,
                confirm_mode=self._confirm_mode,
                max_frame_size=self._options.max_frame_size,
                read_loop=self._read_loop,
            ),
        )
        session.open(timeout, cancel)
        return session

    def __repr__(self) -> str:
        settings = self._settings
        return (
            f"StompConnector(heartbeat={settings.beats}, login={settings.login!r}, "
            f"client_id={settings.client_id!r}, confirm_mode={self._confirm_mode})"
        )
