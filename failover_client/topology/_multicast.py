"""ActiveMQ Classic multicast discovery: ``discovery:(multicast://default)``, listen side.

A broker whose transport connector has ``discoveryUri="multicast://default"`` sends, every
keep-alive interval (500 ms by default), one UDP datagram to the group 239.255.2.3:6155 that is
plain text (ActiveMQ 5.x ``MulticastDiscoveryAgent``)::

    <group>.ActiveMQ-4.alive.%<broker name>%<service URL>
    default.ActiveMQ-4.alive.%localhost%tcp://broker1:61616

``<group>`` is the agent's ``group`` (``default``), the broker name is always ``localhost`` in
5.x, and the service is the connector's published URL. A broker that stops cleanly sends the same
with ``dead.`` once. A listener forgets a service not heard for ten keep-alive intervals (5 s by
default: ``HEARTBEAT_MISS_BEFORE_DEATH``). This source only listens (the Java agent of a client
also only hears; it advertises nothing without a service to register).

The agent's URI options (``group``, ``keepAliveInterval``, ``interface``, ``networkInterface``,
``joinNetworkInterface``) are read as the Java agent reads them; ``timeToLive`` and
``loopBackMode`` concern sending and the reconnect-suppression options
(``initialReconnectDelay``, ``maxReconnectDelay``, ``useExponentialBackOff``,
``backOffMultiplier``, ``maxReconnectAttempts``) what the Java transport does with a failed
service: both are accepted and have no effect here (the connection's own quarantine and schedule
do that work).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from failover_client._clock import Clock
from failover_client.uri import BrokerAddress

from ._datagram import Datagrams, MulticastSocket, group_address
from ._heard import HeardTable
from ._listening import DecodeError, ListeningSource, SchemeRewrite, advertised_address

__all__ = [
    "DEFAULT_GROUP",
    "DEFAULT_GROUP_ADDRESS",
    "DEFAULT_KEEP_ALIVE",
    "DEFAULT_PORT",
    "HEARTBEAT_MISSES",
    "MulticastAdvert",
    "MulticastSource",
    "encode_multicast_advert",
    "parse_multicast_advert",
]

DEFAULT_GROUP_ADDRESS = "239.255.2.3"
"""The group ``multicast://default`` stands for (Java: ``activemq.partition.discovery``)."""
DEFAULT_PORT = 6155
DEFAULT_GROUP = "default"
DEFAULT_KEEP_ALIVE = 0.5
"""Seconds between a broker's announcements (``keepAliveInterval``, 500 ms)."""
HEARTBEAT_MISSES = 10
"""Keep-alive intervals without an announcement after which a service is dead."""
TYPE_SUFFIX = "ActiveMQ-4."
MAX_SERVICE = 1024
"""Longest service URL taken (the Java agent reads 8 KiB datagrams; a URL is far shorter)."""
MAX_SERVICES = 1024
"""Services tracked at most; announcements of more are refused until some expire."""


@dataclass(frozen=True)
class MulticastAdvert:
    """One decoded announcement: ``alive`` or dead, the broker name, the service URL."""

    alive: bool
    broker_name: str
    service: str


def parse_multicast_advert(packet: bytes, group: str = DEFAULT_GROUP) -> MulticastAdvert | None:
    """The announcement in ``packet``; None for another group's or another agent type's.

    Raises :class:`DecodeError` for a packet of this group that is not an announcement.
    """
    prefix = f"{group}.{TYPE_SUFFIX}".encode()
    if not packet.startswith(prefix):
        return None
    try:
        payload = packet[len(prefix) :].decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError("an announcement that is not UTF-8 text") from None
    alive = payload.startswith("alive.")
    if not alive and not payload.startswith("dead."):
        raise DecodeError(f"neither alive. nor dead. after {prefix.decode()!r}")
    rest = payload[len("alive." if alive else "dead.") :]
    # %<broker name>%<service>: the Java agent puts its delimiter right after the state.
    if not rest.startswith("%") or rest.find("%", 1) < 0:
        raise DecodeError("no %<broker name>% before the service")
    end = rest.find("%", 1)
    name, service = rest[1:end], rest[end + 1 :]
    if not service or len(service) > MAX_SERVICE or not service.isprintable():
        raise DecodeError(f"service of {len(service)} characters is not a URL")
    return MulticastAdvert(alive, name, service)


def encode_multicast_advert(
    service: str, *, group: str = DEFAULT_GROUP, alive: bool = True, broker_name: str = "localhost"
) -> bytes:
    """The datagram an ActiveMQ 5.x broker sends for ``service`` (for tests and peers)."""
    state = "alive." if alive else "dead."
    return f"{group}.{TYPE_SUFFIX}{state}%{broker_name}%{service}".encode()


def service_address(service: str, scheme_map: SchemeRewrite) -> BrokerAddress:
    """A service URL (``tcp://host:61616?...``) as a broker of this connection."""
    try:
        parts = urlsplit(service)
        port = parts.port
    except ValueError as exc:
        raise DecodeError(f"service {service[:80]!r} is not a URL: {exc}") from None
    return advertised_address(parts.scheme, parts.hostname, port, scheme_map)


class MulticastSource(ListeningSource):
    """Brokers announced on an ActiveMQ Classic discovery group, alive while they announce.

    :param address: the group's IPv4 address (``default`` in a URI stands for 239.255.2.3).
    :param port: the group's UDP port (6155).
    :param group: the agent's ``group`` name, the first word of every announcement.
    :param keep_alive: the brokers' keep-alive interval (s); a service not heard for
        :data:`HEARTBEAT_MISSES` of them is dropped.
    :param scheme_map: how advertised URLs become this connection's (``{"tcp": ("stomp",
        61613)}``); a URL of a scheme not in it is taken as it is.
    :param interface_address: join on the interface with this IPv4 address.
    :param interface_name: join on this interface (``eth0``).
    :param datagrams: opens the packet stream (default: join the group); tests give a queue.
    """

    def __init__(
        self,
        address: str = DEFAULT_GROUP_ADDRESS,
        port: int = DEFAULT_PORT,
        *,
        group: str = DEFAULT_GROUP,
        keep_alive: float = DEFAULT_KEEP_ALIVE,
        scheme_map: SchemeRewrite | None = None,
        interface_address: str | None = None,
        interface_name: str | None = None,
        clock: Clock | None = None,
        datagrams: Callable[[], Datagrams] | None = None,
        name: str | None = None,
    ) -> None:
        where = f"multicast://{address}:{port}"
        self.address = group_address(address, where)
        self.port = port
        self.group = group
        self.keep_alive = keep_alive
        self._scheme_map: SchemeRewrite = dict(scheme_map or {})
        self._table: HeardTable[str, BrokerAddress] = HeardTable(
            keep_alive * HEARTBEAT_MISSES, MAX_SERVICES
        )

        def join() -> Datagrams:
            return MulticastSocket(
                self.address,
                port,
                interface_address=interface_address,
                interface_name=interface_name,
            )

        super().__init__(name or f"{where}?group={group}", datagrams or join, clock=clock)

    def take(self, packet: bytes, now: float) -> bool:
        advert = parse_multicast_advert(packet, self.group)
        if advert is None:
            return False
        if not advert.alive:
            return self._table.forget(advert.service)
        return self._table.heard(
            advert.service, service_address(advert.service, self._scheme_map), now
        )

    def expire(self, now: float) -> bool:
        return self._table.expire(now)

    def next_expiry(self) -> float | None:
        return self._table.next_expiry()

    def brokers(self) -> Sequence[BrokerAddress]:
        return self._table.values()
