"""A URI's dynamic-discovery agents as sources: ``multicast://`` (ActiveMQ), ``udp://`` (Artemis).

``discovery:(multicast://default)`` or ``discovery:(multicast://239.255.2.3:6155?group=g)``
becomes a :class:`MulticastSource`; ``udp://231.7.7.7:9876`` (bare, as Artemis writes it, or in
``discovery:(...)``) an :class:`ArtemisUdpSource`. Each agent's own options are checked here,
by the names its Java original reads, and an unknown one is an error naming the valid ones.

Advertised OpenWire URLs need a scheme map: ``topology.schemeMap`` when the URI gives one, else
ActiveMQ's default ports for the connection's protocol (``tcp`` -> ``stomp`` on 61613, ``ssl``
-> ``stomp+ssl`` on 61612; AMQP members: ``amqp`` 5672, ``amqps`` 5671). An Artemis connector is
usually the all-protocols acceptor, so there the default keeps the advertised port.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client.uri import BrokerAddress, DiscoveryAgent, FailoverOptions

from ._artemis_udp import DEFAULT_REFRESH_TIMEOUT, ArtemisUdpSource
from ._listening import SchemeRewrite
from ._multicast import (
    DEFAULT_GROUP,
    DEFAULT_GROUP_ADDRESS,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_PORT,
    MulticastSource,
)

__all__ = [
    "MULTICAST_PARAMS",
    "UDP_PARAMS",
    "multicast_source",
    "udp_source",
]

MULTICAST_PARAMS = {
    "group": "the group name every announcement starts with (default)",
    "keepAliveInterval": "the brokers' announcement period in ms (500); dead after 10 missed",
    "interface": "IPv4 address of the interface to join the group on",
    "networkInterface": "name of the interface to join the group on",
    "joinNetworkInterface": "name of the interface to join the group on",
    "timeToLive": "hops of a sent announcement (no effect: this client only listens)",
    "loopBackMode": "whether sent announcements loop back (no effect: this client only listens)",
    "initialReconnectDelay": "the Java agent's suppression of a failed service (no effect)",
    "maxReconnectDelay": "the Java agent's suppression of a failed service (no effect)",
    "useExponentialBackOff": "the Java agent's suppression of a failed service (no effect)",
    "backOffMultiplier": "the Java agent's suppression of a failed service (no effect)",
    "maxReconnectAttempts": "the Java agent's suppression of a failed service (no effect)",
}
"""The ``multicast://`` agent's options (``MulticastDiscoveryAgent`` setters) and their use."""

UDP_PARAMS = (
    "refreshTimeout",
    "discoveryInitialWaitTimeout",
    "initialWaitTimeout",
    "localAddress",
    "localBindAddress",
    "localPort",
    "localBindPort",
)
"""The ``udp://`` agent's options, as Artemis' documents spell them (both spellings)."""

_CLASSIC_PORTS = {
    "stomp": {"tcp": ("stomp", 61613), "nio": ("stomp", 61613)},
    "amqp": {"tcp": ("amqp", 5672), "nio": ("amqp", 5672)},
}
_CLASSIC_TLS = {
    "stomp": {"ssl": ("stomp+ssl", 61612), "nio+ssl": ("stomp+ssl", 61612)},
    "amqp": {"ssl": ("amqps", 5671), "nio+ssl": ("amqps", 5671)},
}


def _protocol(members: Sequence[BrokerAddress]) -> str:
    protocols = {m.protocol for m in members}
    return "amqp" if protocols == {"amqp"} else "stomp"


def _scheme_map(options: FailoverOptions, default: SchemeRewrite) -> SchemeRewrite:
    given = {source: (target, port) for source, target, port in options.topology_scheme_map}
    return given or default


def _check_params(agent: DiscoveryAgent, known: Sequence[str]) -> None:
    for key, _ in agent.params:
        if key not in known:
            raise ConfigurationError(
                f"discovery agent {agent}: unknown option {key!r} (a {agent.scheme}:// agent "
                f"takes {', '.join(known)})"
            )


def _ms(agent: DiscoveryAgent, names: Sequence[str], default: float) -> float:
    """Seconds from the first of ``names`` the agent sets (ms), else ``default``."""
    for name in names:
        text = agent.param(name)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value <= 0:
            raise ConfigurationError(
                f"discovery agent {agent}: {name} must be a number of ms > 0, got {text!r}"
            )
        return value / 1000.0
    return default


def _ipv4(agent: DiscoveryAgent, name: str) -> str | None:
    text = agent.param(name)
    if text is None:
        return None
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise ConfigurationError(
            f"discovery agent {agent}: {name} must be an IPv4 address of this host, got {text!r}"
        ) from None


def multicast_source(
    agent: DiscoveryAgent,
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    clock: Clock,
) -> MulticastSource:
    """The source a ``multicast://`` agent asks for (its options checked)."""
    _check_params(agent, list(MULTICAST_PARAMS))
    host = agent.host
    if not host:
        raise ConfigurationError(
            f"discovery agent {agent} needs a group: multicast://default or multicast://ip:port"
        )
    address = DEFAULT_GROUP_ADDRESS if host.lower() == "default" else host
    group = agent.param("group", DEFAULT_GROUP) or ""
    if not group:
        raise ConfigurationError(f"discovery agent {agent}: group must not be empty")
    protocol = _protocol(members)
    default = {**_CLASSIC_PORTS[protocol], **_CLASSIC_TLS[protocol]}
    name = agent.param("networkInterface") or agent.param("joinNetworkInterface")
    return MulticastSource(
        address,
        agent.port or DEFAULT_PORT,
        group=group,
        keep_alive=_ms(agent, ("keepAliveInterval",), DEFAULT_KEEP_ALIVE),
        scheme_map=_scheme_map(options, default),
        interface_address=_ipv4(agent, "interface"),
        interface_name=name,
        clock=clock,
        name=str(agent),
    )


def udp_source(
    agent: DiscoveryAgent,
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    clock: Clock,
) -> ArtemisUdpSource:
    """The source an Artemis ``udp://group:port`` asks for (its options checked)."""
    _check_params(agent, UDP_PARAMS)
    if not agent.host or agent.port is None:
        raise ConfigurationError(
            f"discovery agent {agent} needs the broadcast group's address and port, "
            "such as udp://231.7.7.7:9876"
        )
    # Checked here; the connection reads it (first_list_wait) to wait for the first broadcast.
    _ms(agent, ("discoveryInitialWaitTimeout", "initialWaitTimeout"), 0.0)
    plain, tls = ("amqp", "amqps") if _protocol(members) == "amqp" else ("stomp", "stomp+ssl")
    return ArtemisUdpSource(
        agent.host,
        agent.port,
        refresh_timeout=_ms(agent, ("refreshTimeout",), DEFAULT_REFRESH_TIMEOUT),
        scheme_map=_scheme_map(options, {"tcp": (plain, None), "ssl": (tls, None)}),
        local_address=_ipv4(agent, "localAddress") or _ipv4(agent, "localBindAddress"),
        clock=clock,
        name=str(agent),
    )
