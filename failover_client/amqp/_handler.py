"""What one AMQP session hears from proton (container thread only).

:class:`Events` is the proton handler of the session's container: it opens the connection,
tells the session when the broker's open arrived, routes link and delivery events to the
send side (``_sending``) and the receive side (``_receiving``), tells the sends' answers once
proton has handled what it read (``_book``), and turns the end of the connection into the
session's outcome: a handshake error for ``open()`` to raise, or the loss reported once
through ``on_lost``.

Broker-named brokers: a ``failover-server-list`` in the broker's open is reported as
``AdvertisedBrokers(source="amqp-open")``; a close with ``amqp:connection:redirect`` as
``AdvertisedBrokers(source="amqp-redirect", redirect=True)`` before the connect fails or the
session is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proton import Connection, Endpoint, Handler, Link, ProtonException, SSLDomain, symbol
from proton.handlers import IOHandler
from proton.reactor import Container

from failover_client._errors import BrokerUnavailable, ConnectionFailure
from failover_client.adapter import AdvertisedBrokers
from failover_client.amqp._errors import (
    REDIRECT,
    Condition,
    cause,
    closed_error,
    handshake_error,
    transport_error,
)
from failover_client.amqp._mismatch import mismatch_of
from failover_client.amqp._probe import Probes
from failover_client.amqp._receiving import Incoming
from failover_client.amqp._sending import Outgoing, RecentDestinations
from failover_client.amqp._server_list import parse_redirect, parse_server_list
from failover_client.amqp._state import SessionState
from failover_client.net._completions import run_all
from failover_client.net._dial import describe_failure

__all__ = ["ConnectSettings", "Events"]

_log = logging.getLogger("failover_client.amqp")

SERVER_LIST = symbol("failover-server-list")
_PRODUCT = symbol("product")
_VERSION = symbol("version")
_ESTABLISHMENT_FAILED = symbol("amqp:connection-establishment-failed")
"""Set in an open that is only there to carry the close with the reason (AMQP 1.0, 2.4.1)."""


@dataclass(frozen=True)
class ConnectSettings:
    """What ``Container.connect`` is given for one broker (the password never shown)."""

    url: str
    hostname: str
    user: str | None
    password: str | None
    idle_timeout: float | None
    ssl_domain: SSLDomain | None
    close_timeout: float
    sasl_mechanisms: str

    def __repr__(self) -> str:
        return (
            f"ConnectSettings(url={self.url!r}, hostname={self.hostname!r}, user={self.user!r}, "
            f"idle_timeout={self.idle_timeout}, tls={self.ssl_domain is not None})"
        )


class Events(Handler):
    """The proton handler of one session (see the module)."""

    def __init__(
        self,
        state: SessionState,
        settings: ConnectSettings,
        recent: RecentDestinations | None = None,
    ) -> None:
        super().__init__()
        self._state = state
        self._settings = settings
        self.outgoing = Outgoing(state, self.fail, recent)
        self.incoming = Incoming(state, self.fail)
        self.probes = Probes(state, self.incoming)
        self.connection: Connection | None = None
        self.remote_properties: dict[str, Any] = {}
        self._transport_condition: Condition | None = None
        self._opened = False
        self._stop: Callable[[], None] = lambda: None

    # -- the session's life -----------------------------------------------------------------

    def on_reactor_init(self, event: Any) -> None:
        container: Container = event.container
        self._stop = container.stop
        self._container = container
        settings = self._settings
        kwargs: dict[str, Any] = {
            "reconnect": False,  # the engine owns reconnecting
            "virtual_host": settings.hostname,
            "allowed_mechs": settings.sasl_mechanisms,
            "allow_insecure_mechs": True,
            "sasl_enabled": True,
        }
        if settings.user is not None:
            kwargs["user"] = settings.user
            kwargs["password"] = settings.password or ""
        if settings.idle_timeout:
            kwargs["heartbeat"] = settings.idle_timeout
        if settings.ssl_domain is not None:
            kwargs["ssl_domain"] = settings.ssl_domain
            kwargs["sni"] = settings.hostname
        connection = container.connect(url=settings.url, **kwargs)
        self.connection = connection
        self.outgoing.connection = connection
        self.incoming.connection = connection
        self.probes.connection = connection
        # In the same write as the open: the replayed send finds its link attached.
        self.outgoing.attach_recent()

    def on_connection_remote_open(self, event: Any) -> None:
        connection = event.connection
        properties = dict(connection.remote_properties or {})
        self.remote_properties = {str(k): v for k, v in properties.items()}
        if properties.get(_ESTABLISHMENT_FAILED):
            return  # the close with the reason follows at once
        # RabbitMQ marks a first delivery first-acquirer and a redelivery not (``_convert``).
        rabbitmq = properties.get(_PRODUCT) == "RabbitMQ"
        self.incoming.first_acquirer_marks_first = rabbitmq
        # RabbitMQ 3.x holds a *modified* delivery till the link ends (``_receiving``).
        self.incoming.nack_releases = rabbitmq
        # ... and before 4.0 may deliver past a top-up's credit (``_receiving``).
        major = _major(properties.get(_VERSION))
        self.incoming.credit_overshoot = rabbitmq and major < 4
        # What a ``sync``'s probe may name as its target (``_probe``).
        self.probes.choose_target(
            connection.remote_offered_capabilities, rabbitmq=rabbitmq, major=major
        )
        if SERVER_LIST in properties:
            self._report_server_list(properties[SERVER_LIST])
        self._opened = True
        self._state.opened()

    def on_connection_remote_close(self, event: Any) -> None:
        connection = event.connection
        condition = Condition.of(connection.remote_condition)
        if condition is not None and condition.name == REDIRECT:
            self._report_redirect(condition)
        secrets = self._state.secrets
        broker = self._state.broker
        if self._opened:
            error: ConnectionFailure = closed_error(condition, broker=broker, secrets=secrets)
        else:
            error = handshake_error(condition, broker=broker, secrets=secrets)
        error.__cause__ = cause(condition, secrets)
        self.incoming.flush()  # deliveries read before the end reach the engine before it
        self._state.lose(error)
        if connection.state & Endpoint.LOCAL_ACTIVE:
            connection.close()

    def on_transport_error(self, event: Any) -> None:
        self._transport_condition = Condition.of(event.transport.condition)

    def on_transport_closed(self, event: Any) -> None:
        condition = self._transport_condition
        secrets = self._state.secrets
        broker = self._state.broker
        mismatch = None
        if condition is not None and not self._opened:
            mismatch = mismatch_of(condition.text(secrets), self._state.address)
        if self._opened:
            error: ConnectionFailure = transport_error(condition, broker=broker, secrets=secrets)
        elif mismatch is not None:
            error = BrokerUnavailable(mismatch)
        else:
            error = handshake_error(condition, broker=broker, secrets=secrets)
        error.__cause__ = cause(condition, secrets)
        self.incoming.flush()  # deliveries read before the end reach the engine before it
        self._state.lose(error)
        self._stop()

    def on_reactor_quiesced(self, event: Any) -> None:
        """proton handled all it read and is about to wait: hand over the deliveries decoded
        meanwhile (``_receiving``), tell the sends' answers (``_book``)."""
        self.incoming.flush()
        run_all(self._state.book.take_decided(), self._state.report)

    def write_now(self) -> None:
        """Put what proton has to send on the socket now (after a batch of posted calls).

        What proton's IO handler would do once the selector reports the socket writable, a
        turn of the loop later, and the same on a failed write. A partial write leaves the
        rest to that handler: :meth:`IOHandler.update` marks the socket writing.
        """
        connection = self.connection
        transport = None if connection is None else connection.transport
        selectable = None if transport is None else getattr(transport, "_selectable", None)
        if transport is None or selectable is None or selectable.is_terminal:
            return  # not connected yet (the connect selectable writes first) or ended
        try:
            pending = transport.pending()
        except ProtonException:
            pending = 0  # a closed transport: update() below ends its selectable
        if pending > 0:
            try:
                transport.pop(selectable.send(transport.peek(pending)))
            except BlockingIOError:
                pass  # a full socket buffer: update() marks it writing, the IO handler goes on
            except OSError as exc:
                _log.debug("%s: write failed: %s", self._state.broker, exc)
                transport.close_head()  # as proton's IO handler does when its write fails
        IOHandler.update(transport, selectable, self._container.now)

    def on_timer_task(self, event: Any) -> None:
        """The broker did not answer our close in time: drop the connection."""
        self.abort()

    # -- ends started by the session ----------------------------------------------------------

    def shutdown(self, polite: bool) -> None:
        """Close (with the AMQP close, when ``polite``) and end the container."""
        self.incoming.flush()
        self._state.shut = True
        connection = self.connection
        if connection is None or connection.transport is None:
            self._stop()
            return
        if polite and connection.state & Endpoint.LOCAL_ACTIVE:
            connection.close()
            self._container.schedule(self._settings.close_timeout, self)
            return
        self.abort()

    def abort(self) -> None:
        """Drop the connection now: both ends of the transport close, the socket with them."""
        connection = self.connection
        transport = None if connection is None else connection.transport
        if transport is None:
            self._stop()
            return
        # A TCP connect still under way has its socket in proton's connect selectable, which
        # the transport's close does not reach: end it too, or its descriptor stays open.
        connecting = getattr(transport, "_connect_selectable", None)
        if connecting is not None:
            connecting.terminate()
            connecting.update()
        transport.close_tail()
        transport.close_head()

    def fail(self, error: ConnectionFailure) -> None:
        """A part found the session dead while the connection is up: lose it, then drop it."""
        self.incoming.flush()  # deliveries read before the end reach the engine before it
        self._state.lose(error)
        self.abort()

    # -- links and deliveries -----------------------------------------------------------------

    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        if link.is_sender:
            if not self.probes.on_remote_attach(link):
                self.outgoing.on_remote_attach(link)
        else:
            self.incoming.on_remote_attach(link)

    def on_link_remote_close(self, event: Any) -> None:
        self._link_ended(event.link, Condition.of(event.link.remote_condition))

    def on_link_remote_detach(self, event: Any) -> None:
        self._link_ended(event.link, Condition.of(event.link.remote_condition))

    def on_session_remote_close(self, event: Any) -> None:
        session = event.session
        condition = Condition.of(session.remote_condition)
        connection = session.connection
        link = connection.link_head(0)
        ended: list[Link] = []
        while link is not None:
            if link.session == session:
                ended.append(link)
            link = link.next(0)
        for link in ended:
            self._link_ended(link, condition)
        self.probes.on_session_ended(session)
        if session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def _link_ended(self, link: Link, condition: Condition | None) -> None:
        if link.is_sender and self.probes.on_link_ended(link, condition):
            return
        if not (self.outgoing.on_link_ended(link, condition)):
            self.incoming.on_link_ended(link, condition)

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_sender:
            self.outgoing.on_flow(link)

    def on_delivery(self, event: Any) -> None:
        # The event's link is wrapped already; ``delivery.link`` would wrap it again, per message.
        if event.link.is_sender:
            self.outgoing.on_disposition(event.delivery)
        else:
            self.incoming.on_delivery(event.delivery, event.link)

    # -- brokers named by the broker ----------------------------------------------------------

    def _report_server_list(self, value: object) -> None:
        state = self._state
        try:
            brokers = parse_server_list(value, current=state.address)
        except Exception:  # noqa: BLE001 - a bad list must not fail the connect
            _log.warning("%s: unusable failover-server-list ignored", state.broker, exc_info=True)
            return
        self._tell(AdvertisedBrokers(brokers, source="amqp-open"))

    def _report_redirect(self, condition: Condition) -> None:
        state = self._state
        try:
            target = parse_redirect(condition.info or {}, current=state.address)
        except Exception:  # noqa: BLE001 - a bad redirect is still a refused connection
            _log.warning("%s: unusable redirect ignored", state.broker, exc_info=True)
            return
        if target is not None:
            self._tell(AdvertisedBrokers((target,), source="amqp-redirect", redirect=True))

    def _tell(self, advertised: AdvertisedBrokers) -> None:
        state = self._state
        try:
            state.listener.on_brokers(state.session, advertised)
        except Exception:  # noqa: BLE001 - the engine's bug must not kill the container thread
            _log.exception("%s: on_brokers listener failed", state.broker)


def _major(version: object) -> int:
    """The major number of a ``version`` property ("3.10.7" -> 3); 0 if there is none."""
    head = str(version or "").split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def crash_error(exc: BaseException, *, broker: str) -> BrokerUnavailable:
    """The loss for a container that raised (proton's socket code, or a bug of ours)."""
    if isinstance(exc, OSError):
        # proton's own I/O raised (a name that does not resolve ends up here): name the cause.
        error = BrokerUnavailable(describe_failure(exc), broker=broker)
    else:
        error = BrokerUnavailable(f"AMQP adapter failed: {type(exc).__name__}", broker=broker)
        _log.error("%s: the AMQP container failed", broker, exc_info=exc)
    error.__cause__ = exc
    return error
