"""One client connection of the test peer: its socket, SASL, and proton's AMQP engine.

proton's engine (a server ``Transport`` bound to a ``Connection``, events from a ``Collector``)
does the AMQP framing; the peer's thread moves bytes between it and the socket, so the peer
owns every socket and can close them all at once. What the connection answers comes from the
:class:`PeerBook` it shares with the other connections: the configuration, the queues that
client receivers drain and the records tests read.

This module imports proton at the top: :mod:`._amqp_peer` imports it only when a peer starts,
so importing the harness still needs no proton.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from proton import (
    Collector,
    Condition,
    Connection,
    Delivery,
    Endpoint,
    Event,
    Link,
    Message,
    Transport,
    symbol,
)

from ._amqp_peer_config import AmqpPeerConfig, PeerCondition, PeerMessage, PeerOpen, PeerOutcome
from ._amqp_peer_sasl import SaslServer

__all__ = ["PeerBook", "PeerConnection", "amqp_value"]

_T = TypeVar("_T")

_CHUNK = 65536
_STATES = {
    "accepted": Delivery.ACCEPTED,
    "rejected": Delivery.REJECTED,
    "released": Delivery.RELEASED,
    "modified": Delivery.MODIFIED,
}


class PeerBook(Protocol):
    """What every connection of one peer shares (called on the peer thread)."""

    @property
    def config(self) -> AmqpPeerConfig: ...

    def opened(self, record: PeerOpen) -> None: ...

    def received(self, record: PeerMessage) -> None: ...

    def take(self, address: str) -> Message | None:
        """The next queued message for ``address``, if any."""

    def put_back(self, address: str, message: Message) -> None:
        """Return a message to the head of its queue (released, or its connection ended)."""


class PeerConnection:
    """A client connection; every method runs on the peer thread."""

    def __init__(self, number: int, sock: socket.socket, book: PeerBook) -> None:
        self.number = number
        self.sock = sock
        self._book = book
        self._sasl = SaslServer(book.config.credentials)
        self._out = bytearray()  # SASL answers, written before anything of the transport
        self._in = bytearray()  # AMQP bytes the transport had no room for yet
        self._transport: Transport | None = None
        self._connection: Connection | None = None
        self._collector = Collector()
        self._senders: list[Link] = []
        self._outgoing: dict[Delivery, tuple[str, Message]] = {}
        self._held: list[Delivery] = []
        self._tags = itertools.count()
        self._lost = False
        self._eof = False
        self._handlers: dict[object, Callable[[Event], None]] = {
            Event.CONNECTION_REMOTE_OPEN: self._on_open,
            Event.CONNECTION_REMOTE_CLOSE: lambda e: _present(e.connection).close(),
            Event.SESSION_REMOTE_OPEN: lambda e: _present(e.session).open(),
            Event.SESSION_REMOTE_CLOSE: lambda e: _present(e.session).close(),
            Event.LINK_REMOTE_OPEN: self._on_attach,
            Event.LINK_REMOTE_CLOSE: self._on_detach,
            Event.LINK_REMOTE_DETACH: self._on_detach,
            Event.DELIVERY: self._on_delivery,
        }

    # -- state --------------------------------------------------------------------------------

    @property
    def open(self) -> bool:
        """The AMQP open was answered and the connection is not closing."""
        connection = self._connection
        return (
            connection is not None
            and not self.done
            and bool(connection.state & Endpoint.LOCAL_ACTIVE)
            and bool(connection.state & Endpoint.REMOTE_ACTIVE)
        )

    @property
    def done(self) -> bool:
        """Nothing more will be read or written: the socket can be closed."""
        if self._lost:
            return True
        if self._transport is None:
            return self._sasl.state == "failed" and not self._out
        return bool(self._transport.closed) and not self._out

    @property
    def wants_read(self) -> bool:
        if self._eof or self._lost:
            return False
        if self._transport is None:
            return self._sasl.state != "failed"
        return not self._in and self._transport.capacity() > 0

    @property
    def wants_write(self) -> bool:
        return bool(self._out) or (self._transport is not None and self._transport.pending() > 0)

    # -- I/O ----------------------------------------------------------------------------------

    def on_readable(self) -> None:
        try:
            data = self.sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._lost = True
            return
        if not data:
            self._eof = True
            if self._transport is None:
                self._lost = True
            else:
                self._transport.close_tail()
            return
        if self._transport is None:
            answer, data = self._sasl.feed(data)
            self._out += answer
            if self._sasl.state != "done":
                return
            self._start_amqp()
        self._in += data

    def flush(self) -> None:
        """Write what the socket takes now."""
        while not self._lost:
            transport = self._transport
            if self._out:
                chunk = bytes(self._out[:_CHUNK])
            elif transport is not None and transport.pending() > 0:
                chunk = transport.peek(min(transport.pending(), _CHUNK)) or b""
            else:
                return
            try:
                sent = self.sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._lost = True
                return
            if self._out:
                del self._out[:sent]
            elif transport is not None:
                transport.pop(sent)
            if sent < len(chunk):
                return

    def service(self, now: float) -> float | None:
        """Feed input, send queued messages, handle events, write; returns the next tick."""
        transport = self._transport
        if transport is None or self._lost:
            self.flush()
            return None
        while self._in and (room := transport.capacity()) > 0:
            transport.push(bytes(self._in[:room]))
            del self._in[:room]
            self._process()
        if self._in and transport.capacity() < 0:
            self._in.clear()  # the transport stopped reading (it failed or closed)
        self._send_queued()
        self._process()
        deadline = transport.tick(now)
        self._process()
        self.flush()
        return deadline or None

    # -- controls -----------------------------------------------------------------------------

    def close(self, condition: PeerCondition | None, symbol_keys: bool) -> None:
        """Close the AMQP connection, with ``condition`` as its error when given."""
        connection = self._connection
        if connection is None:
            return
        if condition is not None:
            connection.condition = as_condition(condition, symbol_keys)
        connection.close()
        self._process()

    def settle_held(self, outcome: PeerOutcome) -> int:
        """Settle the deliveries held so far with ``outcome``; returns how many."""
        held, self._held = self._held, []
        for delivery in held:
            _settle(delivery, outcome)
        self._process()
        return len(held)

    def ended(self) -> None:
        """The socket is gone: messages sent here and not settled go back to their queues."""
        self._return_unsettled(None)
        self._held.clear()

    def _return_unsettled(self, link: Link | None) -> None:
        """Put messages sent on ``link`` (None: on any link) and not settled back, in order.

        They count as delivered once more: the client may have seen them.
        """
        for delivery, (address, message) in reversed(list(self._outgoing.items())):
            if link is None or delivery.link == link:
                message.delivery_count = (message.delivery_count or 0) + 1
                self._book.put_back(address, message)
                del self._outgoing[delivery]

    # -- the AMQP engine ----------------------------------------------------------------------

    def _start_amqp(self) -> None:
        transport = Transport(Transport.SERVER)
        connection = Connection()
        connection.collect(self._collector)
        transport.bind(connection)
        self._transport, self._connection = transport, connection

    def _process(self) -> None:
        while (event := self._collector.peek()) is not None:
            handler = self._handlers.get(event.type)
            try:
                if handler is not None:
                    handler(event)
            finally:
                self._collector.pop()

    def _on_open(self, event: Event) -> None:
        connection = _present(event.connection)
        config = self._book.config
        remote = connection.remote_properties or {}
        self._book.opened(
            PeerOpen(
                number=self.number,
                mechanism=self._sasl.mechanism,
                user=self._sasl.user,
                hostname=connection.remote_hostname,
                container_id=connection.remote_container,
                properties={str(k): v for k, v in remote.items()},
                refused=config.refuse is not None,
            )
        )
        connection.container = config.container_id
        if config.properties:
            connection.properties = {
                symbol(k): amqp_value(v, config.symbol_keys) for k, v in config.properties.items()
            }
        connection.open()
        if config.refuse is not None:
            connection.condition = as_condition(config.refuse, config.symbol_keys)
            connection.close()

    def _on_attach(self, event: Event) -> None:
        link = _present(event.link)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_receiver:
            link.flow(self._book.config.credit)
        else:
            self._senders.append(link)

    def _on_detach(self, event: Event) -> None:
        link = _present(event.link)
        if link in self._senders:
            self._senders.remove(link)
            self._return_unsettled(link)
        link.close()

    def _on_delivery(self, event: Event) -> None:
        delivery, link = _present(event.delivery), _present(event.link)
        if link.is_sender:
            self._on_disposition(delivery)
            return
        if not delivery.readable or delivery.partial:
            return
        message = Message()
        message.decode(link.recv(delivery.pending) or b"")
        link.advance()
        config = self._book.config
        body = message.body
        self._book.received(
            PeerMessage(
                address=link.target.address or message.address,
                body=bytes(body) if isinstance(body, memoryview) else body,
                properties=dict(message.properties or {}),
                message_id=message.id,
                durable=bool(message.durable),
                connection=self.number,
                outcome=config.outcome,
            )
        )
        if delivery.settled:
            delivery.settle()  # the client sent it settled: nothing to answer
        elif config.outcome == "held":
            self._held.append(delivery)
        else:
            _settle(delivery, config.outcome)
        if link.credit < config.credit // 2 + 1:
            link.flow(config.credit - link.credit)

    def _on_disposition(self, delivery: Delivery) -> None:
        if not (delivery.updated or delivery.settled):
            return
        entry = self._outgoing.pop(delivery, None)
        if entry is not None and delivery.remote_state in (Delivery.RELEASED, Delivery.MODIFIED):
            address, message = entry
            if delivery.remote_state == Delivery.MODIFIED and delivery.remote.failed:
                message.delivery_count = (message.delivery_count or 0) + 1
            self._book.put_back(address, message)
        delivery.settle()

    def _send_queued(self) -> None:
        for link in self._senders:
            address = link.source.address
            while address and link.credit > 0 and link.state & Endpoint.REMOTE_ACTIVE:
                message = self._book.take(address)
                if message is None:
                    break
                delivery = link.send(message, tag=str(next(self._tags)))
                if link.snd_settle_mode != Link.SND_SETTLED:  # else it is settled already
                    self._outgoing[delivery] = (address, message)


def _settle(delivery: Delivery, outcome: PeerOutcome) -> None:
    if outcome == "rejected":
        delivery.local.condition = Condition("amqp:precondition-failed", "rejected by the peer")
    elif outcome == "modified":
        delivery.local.failed = True
    delivery.update(_STATES[outcome])
    delivery.settle()


def _present(value: _T | None) -> _T:
    """An event's connection, session, link or delivery, which its type promises."""
    if value is None:
        raise ValueError("an AMQP event without the endpoint its type names")
    return value


def as_condition(condition: PeerCondition, symbol_keys: bool) -> Condition:
    """A proton condition with ``info`` as :func:`amqp_value` encodes it."""
    info = None if condition.info is None else amqp_value(condition.info, symbol_keys)
    return Condition(condition.name, condition.description, info)


def amqp_value(value: object, symbol_keys: bool) -> Any:
    """``value`` with the plain ``str`` keys of its maps made symbols (``symbol_keys``) and
    tuples made lists; anything else is left as it is, for proton to encode."""
    if isinstance(value, Mapping):
        return {
            (symbol(k) if symbol_keys and type(k) is str else k): amqp_value(v, symbol_keys)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [amqp_value(v, symbol_keys) for v in value]
    return value
