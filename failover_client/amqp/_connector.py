"""The AMQP connector: the engine's factory of :class:`AmqpSession` objects.

It holds what every session of one connection shares: the validated
:class:`~failover_client.net._settings.ConnectorSettings` (the failover options, default
credentials, the idle timeout, the close timeout, the client id: the AMQP container id, which
durable subscriptions are bound to) and one TLS domain, built through the same
:class:`~failover_client.net._tls.LazyTls` as every adapter's, so that an unusable certificate
file is a configuration error at once rather than a "broker unavailable" on every reconnect.
"""

from __future__ import annotations

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError, ConnectCancelled
from failover_client.adapter import Cancel, SessionListener
from failover_client.amqp._handler import ConnectSettings
from failover_client.amqp._sending import RecentDestinations
from failover_client.amqp._session import AmqpSession
from failover_client.amqp._tls import ssl_domain
from failover_client.net._settings import ConnectorSettings
from failover_client.net._tls import LazyTls
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

    Member parameters read from :class:`BrokerAddress`: ``vhost`` (the open frame's
    hostname; RabbitMQ reads ``vhost:<name>`` there; default: the member's host name).

    Raises :class:`ConfigurationError` at once for unusable TLS files, heart-beat values or
    timeouts (the same checks and messages as every adapter's).

    A subscription's link credit is its own ``SubscriptionSpec.prefetch`` (the URI option
    ``consumer.prefetch``, 100 by default, or ``subscribe(prefetch=)``).
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
    ) -> None:
        self._settings = ConnectorSettings(
            options if options is not None else FailoverOptions(),
            login=login,
            passcode=passcode,
            heartbeat=heartbeat,
            close_timeout=close_timeout,
            client_id=client_id,
        )
        self._clock: Clock = clock if clock is not None else SystemClock()
        # The same eagerness as every adapter's TLS (files named: built and checked now).
        self._ssl_domain = LazyTls(self._settings.options, ssl_domain)
        self._recent = RecentDestinations()
        """Where this connector's sessions sent last: a new session attaches them at once."""
        self._sniffed: set[str] = set()
        """Brokers whose silence was already probed for STOMP (see :meth:`connect`)."""

    @property
    def heartbeat(self) -> tuple[int, int]:
        return self._settings.beats

    @property
    def settings(self) -> ConnectorSettings:
        """The validated settings shared with every session this connector opens."""
        return self._settings

    def credentials_for(self, address: BrokerAddress) -> tuple[str | None, str | None]:
        """(user, password) for ``address``: the member's own beat the connector's defaults."""
        return self._settings.credentials_for(address)

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
        shared = self._settings
        user, password = shared.credentials_for(address)
        receive = shared.beats[1]
        settings = ConnectSettings(
            url=_url(address),
            hostname=address.param("vhost") or address.host,
            user=user,
            password=password,
            idle_timeout=receive / 1000.0 if receive else None,
            ssl_domain=self._ssl_domain.get() if address.tls else None,
            close_timeout=shared.close_timeout,
            sasl_mechanisms="PLAIN" if user is not None else "ANONYMOUS",
        )
        session = AmqpSession(
            address,
            listener=listener,
            clock=self._clock,
            settings=settings,
            container_id=shared.client_id,
            recent=self._recent,
        )
        # A port that stays silent is asked once whether it speaks STOMP (the first try of
        # each broker, which for a wrong port is the start-up's): later tries of a hung broker
        # must not pay the probe's second on every failover.
        sniff = address.key not in self._sniffed
        self._sniffed.add(address.key)
        session.open(timeout, cancel, sniff=sniff)
        return session

    def __repr__(self) -> str:
        shared = self._settings
        return (
            f"AmqpConnector(heartbeat={shared.beats}, login={shared.login!r}, "
            f"client_id={shared.client_id!r})"
        )


def _url(address: BrokerAddress) -> str:
    """The URL proton dials: scheme and authority only (credentials go separately)."""
    scheme = "amqps" if address.tls else "amqp"
    return f"{scheme}://{address.authority}"
