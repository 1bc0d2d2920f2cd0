"""The AMQP connector: the engine's factory of :class:`AmqpSession` objects.

It holds what every session of one connection shares: the failover options, default
credentials, the idle timeout, the client id (the AMQP container id, which durable
subscriptions are bound to) and one TLS domain, built up front so that an unusable
certificate file is a configuration error at once rather than a "broker unavailable" on every
reconnect.
"""

from __future__ import annotations

import threading

from proton import SSLDomain

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError, ConnectCancelled
from failover_client.adapter import Cancel, SessionListener
from failover_client.amqp._handler import ConnectSettings
from failover_client.amqp._receiving import DEFAULT_PREFETCH
from failover_client.amqp._session import AmqpSession
from failover_client.amqp._tls import ssl_domain
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["AmqpConnector"]


class AmqpConnector:
    """Opens AMQP 1.0 sessions to single brokers for the connection manager.

    :param options: the failover options; read for ``heartbeat`` and the ``tls_*`` settings.
    :param login: default SASL user; a member URI's ``user`` overrides it (SASL PLAIN; without
        a user, SASL ANONYMOUS).
    :param passcode: default password (never shown in any message or repr); a member URI's
        password overrides it, and a member that names a user without a password sends none.
    :param heartbeat: (send, receive) milliseconds; default ``options.heartbeat``. The receive
        half is the AMQP idle timeout we announce: the broker keeps sending at least that often
        (empty frames when idle) and the connection is declared lost when nothing arrived for
        that long (checked once per timeout, so a hung broker is found within two). 0 turns it
        off. What we send is the broker's wish, from its own open.
    :param clock: time source for the connect deadline.
    :param client_id: the AMQP container id (needed for durable subscriptions); default: a
        random one per session.
    :param close_timeout: how long ``close()`` waits for the broker to answer the AMQP close.
    :param prefetch: credit per subscription: at most this many messages delivered and not
        yet settled (no URI option sets it yet).

    Member parameters read from :class:`BrokerAddress`: ``vhost`` (the open frame's
    hostname; RabbitMQ reads ``vhost:<name>`` there; default: the member's host name).

    Raises :class:`ConfigurationError` at once for unusable TLS files or settings.
    """

    def __init__(
        self,
        options: FailoverOptions | None = None,
        *,
        login: str | None = None,
        passcode: str | None = None,
        heartbeat: tuple[int, int] | None = None,
        clock: Clock | None = None,
        client_id: str | None = None,
        close_timeout: float = 1.0,
        prefetch: int = DEFAULT_PREFETCH,
    ) -> None:
        self._options = options if options is not None else FailoverOptions()
        beats = heartbeat if heartbeat is not None else self._options.heartbeat
        if len(beats) != 2 or any(int(b) < 0 for b in beats):
            raise ConfigurationError(f"heartbeat must be two non-negative ms values, got {beats}")
        if close_timeout < 0:
            raise ConfigurationError(f"close_timeout must be >= 0, got {close_timeout}")
        if prefetch < 1:
            raise ConfigurationError(f"prefetch must be >= 1, got {prefetch}")
        self._heartbeat = (int(beats[0]), int(beats[1]))
        self._login = login
        self._passcode = passcode
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._client_id = client_id
        self._close_timeout = close_timeout
        self._prefetch = prefetch
        self._ssl_lock = threading.Lock()
        self._ssl_domain: SSLDomain | None = None
        if any((self._options.tls_ca_file, self._options.tls_cert_file)):
            # Files named in the options fail now, as configuration errors.
            self._ssl_domain = ssl_domain(self._options)

    @property
    def heartbeat(self) -> tuple[int, int]:
        return self._heartbeat

    def _tls_domain(self) -> SSLDomain:
        with self._ssl_lock:
            if self._ssl_domain is None:
                self._ssl_domain = ssl_domain(self._options)
            return self._ssl_domain

    def credentials_for(self, address: BrokerAddress) -> tuple[str | None, str | None]:
        """(user, password) for ``address``: the member's own beat the connector's defaults."""
        if address.user is not None:
            return address.user, address.password
        return self._login, self._passcode

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel,
    ) -> AmqpSession:
        """Connect to ``address`` and finish SASL and the AMQP open within ``timeout`` seconds.

        Returns only after the broker's open. Raises :class:`BrokerUnavailable` (refused,
        reset, timed out, closed, redirected), :class:`AuthenticationFailed` (SASL refused) or
        :class:`TLSFailure`, each ``from`` proton's report, naming the broker. Cancelling
        ``cancel`` (from any thread) ends it at once with :class:`ConnectCancelled`; the
        session's thread and socket end with it (a host-name lookup under way finishes first,
        on that daemon thread).
        """
        if address.protocol != "amqp":
            raise ConfigurationError(f"{address}: a {address.protocol} member cannot speak AMQP")
        if cancel.cancelled:
            raise ConnectCancelled("connect cancelled", broker=str(address))
        user, password = self.credentials_for(address)
        settings = ConnectSettings(
            url=_url(address),
            hostname=address.param("vhost") or address.host,
            user=user,
            password=password,
            idle_timeout=self._heartbeat[1] / 1000.0 if self._heartbeat[1] else None,
            ssl_domain=self._tls_domain() if address.tls else None,
            close_timeout=self._close_timeout,
            sasl_mechanisms="PLAIN" if user is not None else "ANONYMOUS",
        )
        session = AmqpSession(
            address,
            listener=listener,
            clock=self._clock,
            settings=settings,
            prefetch=self._prefetch,
            container_id=self._client_id,
        )
        session.open(timeout, cancel)
        return session

    def __repr__(self) -> str:
        return (
            f"AmqpConnector(heartbeat={self._heartbeat}, login={self._login!r}, "
            f"client_id={self._client_id!r}, prefetch={self._prefetch})"
        )


def _url(address: BrokerAddress) -> str:
    """The URL proton dials: scheme and authority only (credentials go separately)."""
    scheme = "amqps" if address.tls else "amqp"
    return f"{scheme}://{address.authority}"
