"""Artemis UDP discovery: ``udp://231.7.7.7:9876``, the client side of a broadcast group.

Every ``broadcast-period`` (2 s by default) each Artemis broker of a cluster sends one datagram
to its ``broadcast-group``'s address (``BroadcastGroupImpl.broadcastConnectors``)::

    string  node id            (the broker's UUID)
    string  unique id          (a UUID of this broadcast group instance)
    int     connector count
    connector * count          (TransportConfiguration.encode)
        string name, string factory class name, int parameter count,
        parameter * count: string key, byte type, value
            type 0 boolean (one byte, non-zero is true), 1 int, 2 long, 3 string

Integers are big-endian. A string (``UTF8Util.writeString``) is an int of its length in UTF-16
units, then: below 9 units, each unit as a 2-byte big-endian short; below 0xfff, a 2-byte byte
count and the text in Java's modified UTF-8 (a surrogate is 3 bytes of its own); else an int byte
count and the UTF-16 little-endian bytes (a ``SimpleString``). Extra properties carry the key
prefix ``$.EP.``. A connector made from a URI (``tcp://host:61616``) carries ``host`` and
``port`` as strings; one built in code carries ``port`` as an int; both are read.

A listener keeps one entry per node id and forgets a node not heard for ``refreshTimeout``
(10 s); when a node lists several connectors the last one counts, as in Artemis'
``DiscoveryGroup``. The advertised connector is usually the all-protocols acceptor (61616),
which speaks STOMP and AMQP on the same port: ``tcp`` maps to ``stomp`` on the advertised port
unless ``topology.schemeMap`` says otherwise (``tcp:amqp``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from failover_client._clock import Clock
from failover_client.uri import BrokerAddress

from ._datagram import Datagrams, MulticastSocket, group_address
from ._heard import HeardTable
from ._listening import DecodeError, ListeningSource, SchemeRewrite, advertised_address

__all__ = [
    "DEFAULT_REFRESH_TIMEOUT",
    "EXTRA_PROPERTY_PREFIX",
    "NETTY_CONNECTOR_FACTORY",
    "ArtemisBroadcast",
    "ArtemisConnector",
    "ArtemisUdpSource",
    "parse_artemis_broadcast",
]

DEFAULT_REFRESH_TIMEOUT = 10.0
"""Seconds a node stays known after its last broadcast (Artemis ``refreshTimeout``)."""
NETTY_CONNECTOR_FACTORY = (
    "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory"
)
EXTRA_PROPERTY_PREFIX = "$.EP."
_DEFAULT_HOST = "localhost"  # Artemis TransportConstants.DEFAULT_HOST / DEFAULT_PORT
_DEFAULT_PORT = 61616
MAX_NODES = 1024
"""Nodes tracked at most; broadcasts of more are refused until some expire."""
_MAX_CONNECTORS = 64
_MAX_PARAMS = 256

ParamValue = bool | int | str


@dataclass(frozen=True)
class ArtemisConnector:
    """One advertised ``TransportConfiguration``: name, factory class and parameters."""

    name: str
    factory: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return str(self.params.get("host", _DEFAULT_HOST))

    @property
    def port(self) -> int | None:
        value = self.params.get("port", _DEFAULT_PORT)
        if isinstance(value, bool):
            return None
        try:
            return int(value)
        except ValueError:
            return None

    @property
    def ssl(self) -> bool:
        value = self.params.get("sslEnabled", False)
        return value is True or (isinstance(value, str) and value.lower() == "true")


@dataclass(frozen=True)
class ArtemisBroadcast:
    """One decoded broadcast: who sent it and the connectors it advertises."""

    node_id: str
    unique_id: str
    connectors: tuple[ArtemisConnector, ...]


class _Reader:
    """Bounds-checked reads of Artemis' buffer encoding (every short read is a DecodeError)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self._at + size > len(self._data):
            raise DecodeError(f"{what}: needs {size} bytes at offset {self._at}, packet ends")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int32(self, what: str) -> int:
        value: int = struct.unpack(">i", self.take(4, what))[0]
        return value

    def count(self, what: str, limit: int) -> int:
        value = self.int32(what)
        if not 0 <= value <= limit:
            raise DecodeError(f"{what} {value} is outside 0..{limit}")
        return value

    def string(self, what: str) -> str:
        units = self.int32(what)
        if units < 0:
            raise DecodeError(f"{what}: negative length {units}")
        try:
            if units < 9:
                return self.take(2 * units, what).decode("utf-16-be", "surrogatepass")
            if units < 0xFFF:
                size = struct.unpack(">H", self.take(2, what))[0]
                text = self.take(size, what).decode("utf-8", "surrogatepass")
            else:
                size = self.int32(what)
                if size % 2:
                    raise DecodeError(f"{what}: odd UTF-16 byte count {size}")
                text = self.take(size, what).decode("utf-16-le", "surrogatepass")
            # Surrogates written one by one become pairs again (or the text is not text).
            return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{what} is not text: {exc.reason}") from None

    def value(self, what: str) -> ParamValue:
        kind = self.take(1, what)[0]
        if kind == 0:
            return self.take(1, what)[0] != 0
        if kind == 1:
            return self.int32(what)
        if kind == 2:
            value: int = struct.unpack(">q", self.take(8, what))[0]
            return value
        if kind == 3:
            return self.string(what)
        raise DecodeError(f"{what}: unknown value type {kind}")

    def connector(self, index: int) -> ArtemisConnector:
        where = f"connector {index}"
        name = self.string(f"{where} name")
        factory = self.string(f"{where} factory")
        params: dict[str, ParamValue] = {}
        for _ in range(self.count(f"{where} parameter count", _MAX_PARAMS)):
            key = self.string(f"{where} parameter name")
            params[key] = self.value(f"{where} parameter {key[:40]!r}")
        return ArtemisConnector(name, factory, MappingProxyType(params))

    def done(self) -> bool:
        return self._at == len(self._data)


def parse_artemis_broadcast(packet: bytes) -> ArtemisBroadcast:
    """Decode one broadcast datagram; :class:`DecodeError` says where it is wrong."""
    reader = _Reader(packet)
    node_id = reader.string("node id")
    unique_id = reader.string("unique id")
    if not node_id:
        raise DecodeError("empty node id")
    connectors = tuple(
        reader.connector(i) for i in range(reader.count("connector count", _MAX_CONNECTORS))
    )
    if not reader.done():
        raise DecodeError("bytes left after the last connector")
    return ArtemisBroadcast(node_id, unique_id, connectors)


def broadcast_address(broadcast: ArtemisBroadcast, scheme_map: SchemeRewrite) -> BrokerAddress:
    """The broker a node advertises: its last network connector, mapped (Artemis keeps the
    last entry per node too). DecodeError when it advertises none (an in-VM connector)."""
    for connector in reversed(broadcast.connectors):
        if connector.factory != NETTY_CONNECTOR_FACTORY:
            continue
        scheme = "ssl" if connector.ssl else "tcp"
        return advertised_address(scheme, connector.host, connector.port, scheme_map)
    raise DecodeError(f"node {broadcast.node_id[:40]!r} advertises no network connector")


class ArtemisUdpSource(ListeningSource):
    """Brokers of an Artemis cluster heard on its UDP broadcast group.

    :param address: the group's IPv4 address (``group-address`` of the broadcast group).
    :param port: its UDP port (``group-port``).
    :param refresh_timeout: seconds a node stays after its last broadcast (Artemis' 10 s).
    :param scheme_map: advertised ``tcp``/``ssl`` to this connection's scheme and port
        (default ``{"tcp": ("stomp", None), "ssl": ("stomp+ssl", None)}``: same port).
    :param local_address: join on the interface with this IPv4 address (``localAddress``).
    :param datagrams: opens the packet stream (default: join the group); tests give a queue.
    """

    def __init__(
        self,
        address: str,
        port: int,
        *,
        refresh_timeout: float = DEFAULT_REFRESH_TIMEOUT,
        scheme_map: SchemeRewrite | None = None,
        local_address: str | None = None,
        clock: Clock | None = None,
        datagrams: Callable[[], Datagrams] | None = None,
        name: str | None = None,
    ) -> None:
        where = f"udp://{address}:{port}"
        self.address = group_address(address, where)
        self.port = port
        self.refresh_timeout = refresh_timeout
        self._scheme_map: SchemeRewrite = dict(
            scheme_map or {"tcp": ("stomp", None), "ssl": ("stomp+ssl", None)}
        )
        self._table: HeardTable[str, BrokerAddress] = HeardTable(refresh_timeout, MAX_NODES)

        def join() -> Datagrams:
            return MulticastSocket(self.address, port, interface_address=local_address)

        super().__init__(name or where, datagrams or join, clock=clock)

    def take(self, packet: bytes, now: float) -> bool:
        broadcast = parse_artemis_broadcast(packet)
        address = broadcast_address(broadcast, self._scheme_map)
        return self._table.heard(broadcast.node_id, address, now)

    def expire(self, now: float) -> bool:
        return self._table.expire(now)

    def next_expiry(self) -> float | None:
        return self._table.next_expiry()

    def brokers(self) -> Sequence[BrokerAddress]:
        return self._table.values()
