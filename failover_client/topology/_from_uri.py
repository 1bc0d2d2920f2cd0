"""The topology sources a failover URI asks for, which the connection starts by itself.

Three parts of a URI name sources:

* ``updateURIsURL=<path or URL>`` (ActiveMQ Classic): a :class:`UrlSource`, rebalancing on a
  change unless ``rebalanceUpdateURIs=false``;
* ``discovery:(agent)`` agents: ``dns://<name>[:port]`` is a :class:`DnsSource` (SRV records
  when the name starts with ``_`` as SRV names do, else A/AAAA records on the agent's port),
  ``file:<path>`` a :class:`FileSource`, ``multicast://default`` (ActiveMQ Classic's multicast
  discovery) a :class:`MulticastSource` and ``udp://group:port`` (an Artemis broadcast group,
  also written bare) an :class:`ArtemisUdpSource` (see :mod:`._dynamic`); ActiveMQ's zeroconf
  agent and HTTP discovery registry are other protocols, refused with a message that says
  what works instead;
* ``topology=openwire,advisory``: sources that take their settings from the connection itself
  (its members, credentials and clock, plus ``topology.openwirePort`` and
  ``topology.schemeMap``), looked up in the source registry.

A ``dns://`` agent takes two parameters of its own: ``scheme`` (the brokers' scheme; default:
the SRV service label when it is one, such as ``_amqp._tcp``, else the members' scheme, else
``stomp``) and ``resolver`` (``ip[:port]`` of the DNS server to ask; default: the system's).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from pathlib import Path

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client.net._tls import build_ssl_context
from failover_client.uri import (
    DEFAULT_PORTS,
    SCHEMES,
    BrokerAddress,
    DiscoveryAgent,
    FailoverOptions,
    SchemeMapEntries,
)

from ._base import TopologySource
from ._dns import DnsSource
from ._dynamic import multicast_source, udp_source
from ._file import FileSource, SchemeRewrite
from ._registry import topology_source_factory
from ._url import UrlSource

__all__ = ["URI_SOURCE_NAME", "uri_sources"]

URI_SOURCE_NAME = "updateURIsURL"
"""The ``source`` of the lists an ``updateURIsURL`` source pushes (shown in events)."""

_DNS_PARAMS = ("resolver", "scheme")
_OWN_SETTINGS = {
    "file": "discovery:(file:<path>)",
    "url": "updateURIsURL=<path or URL>",
    "dns": "discovery:(dns://<name>)",
}
"""Built-in sources that need settings of their own, and where a URI gives them."""

_SUPPORTED = (
    "failover-client discovers brokers through discovery:(multicast://default) (ActiveMQ "
    "Classic), udp://<group>:<port> (an Artemis broadcast group), discovery:(dns://<name>) (SRV, "
    "or A/AAAA records with a port), discovery:(file:<path>), updateURIsURL=<path or URL>, and "
    "topology=openwire|advisory"
)


def uri_sources(
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    agents: Sequence[DiscoveryAgent],
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock,
) -> list[TopologySource]:
    """New, unstarted sources for what a parsed URI asks for, in that order (see the module).

    Raises :class:`ConfigurationError` (a :class:`TopologySourceError` for an unknown name) for
    an agent or a source name that cannot be served.
    """
    rewrite = scheme_rewrite(options.topology_scheme_map)
    sources: list[TopologySource] = []
    if options.update_uris_url:
        https = options.update_uris_url.lower().startswith("https:")
        sources.append(
            UrlSource(
                options.update_uris_url,
                clock=clock,
                # The connection's trust (tls.caFile...) also verifies the list's server.
                tls=build_ssl_context(options) if https else None,
                rebalance=options.rebalance_update_uris,
                scheme_map=rewrite,
                name=URI_SOURCE_NAME,
            )
        )
    sources.extend(_agent_source(agent, members, options, clock) for agent in agents)
    for name in options.topology:
        sources.append(
            _named_source(name, members, options, login=login, passcode=passcode, clock=clock)
        )
    return sources


def scheme_rewrite(entries: SchemeMapEntries) -> SchemeRewrite | None:
    """``topology.schemeMap`` as the mapping the sources take; None when it is empty."""
    return {source: (target, port) for source, target, port in entries} or None


def _named_source(
    name: str,
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock,
) -> TopologySource:
    # Through the registry: built-in names cannot be replaced, and only registered code runs.
    factory: Callable[..., TopologySource] = topology_source_factory(name)
    rewrite = scheme_rewrite(options.topology_scheme_map)
    if name in _OWN_SETTINGS:
        raise ConfigurationError(
            f"topology={name} needs settings of its own; write {_OWN_SETTINGS[name]} instead"
        )
    common = {"login": login, "passcode": passcode, "clock": clock}
    # Every source takes the connection's TLS settings (tls.caFile, client certificate...).
    if name == "openwire":
        return factory(
            tuple(members),
            openwire_port=options.topology_openwire_port,
            scheme_map=rewrite,
            tls=options,
            **common,
        )
    if name == "advisory":
        return factory(tuple(members), scheme_map=rewrite, options=options, **common)
    try:
        # A plug-in named in a URI gets what the built-ins get from the connection.
        return factory(tuple(members), **common)
    except TypeError as exc:
        raise ConfigurationError(
            f"topology source {name!r} cannot be built from the connection's settings "
            f"(members, login, passcode, clock): {exc}"
        ) from exc


def _agent_source(
    agent: DiscoveryAgent, members: Sequence[BrokerAddress], options: FailoverOptions, clock: Clock
) -> TopologySource:
    if agent.scheme == "multicast":
        return multicast_source(agent, members, options, clock)
    if agent.scheme == "udp":
        return udp_source(agent, members, options, clock)
    if agent.scheme == "dns":
        return _dns_source(agent, members, clock)
    if agent.scheme == "file":
        if agent.params:
            raise ConfigurationError(f"discovery agent {agent} takes no parameters")
        path = _agent_path(agent)
        return FileSource(path, clock=clock, action="replace", name=f"file:{path}")
    if agent.scheme in ("http", "https"):
        raise ConfigurationError(
            f"discovery agent {agent} is ActiveMQ's HTTP discovery registry, a protocol of its "
            "own (brokers register themselves there), which is not supported; to read a list "
            f"of broker URIs over HTTP write failover:()?updateURIsURL={agent.scheme}://... "
            f"({_SUPPORTED})"
        )
    raise ConfigurationError(f"discovery agent {agent} is not supported: {_SUPPORTED}")


def _agent_path(agent: DiscoveryAgent) -> Path:
    location = agent.location
    if location.startswith("//"):  # file://host/path: only this host
        host, _, rest = location[2:].partition("/")
        if host not in ("", "localhost"):
            raise ConfigurationError(
                f"discovery agent {agent} names a file on another host; use a local path"
            )
        location = "/" + rest
    return Path(location)


def _dns_source(agent: DiscoveryAgent, members: Sequence[BrokerAddress], clock: Clock) -> DnsSource:
    unknown = sorted({k for k, _ in agent.params} - set(_DNS_PARAMS))
    if unknown:
        raise ConfigurationError(
            f"discovery agent {agent}: unknown parameter {unknown[0]!r} "
            f"(a dns:// agent takes {', '.join(_DNS_PARAMS)})"
        )
    name = agent.host
    if not name:
        raise ConfigurationError(
            f"discovery agent {agent} needs a name: dns://_stomp._tcp.example.com (SRV) or "
            "dns://brokers.example.com:61613 (A/AAAA)"
        )
    srv = name.startswith("_")
    scheme = _dns_scheme(agent, name, members)
    port = agent.port
    if srv and port is not None:
        raise ConfigurationError(
            f"discovery agent {agent}: an SRV name takes no port (its records carry them)"
        )
    if not srv and port is None:
        protocol, tls = SCHEMES[scheme]
        port = DEFAULT_PORTS[protocol][1 if tls else 0]
    address, resolver_port = _resolver(agent)
    return DnsSource(
        name,
        scheme=scheme,
        port=port,
        srv=srv,
        resolver_address=address,
        resolver_port=resolver_port,
        clock=clock,
    )


def _dns_scheme(agent: DiscoveryAgent, name: str, members: Sequence[BrokerAddress]) -> str:
    given = agent.param("scheme")
    if given is not None:
        # A query decodes '+' as a space; only a scheme such as stomp+ssl holds one here.
        scheme = given.replace(" ", "+").lower()
        if scheme not in SCHEMES or SCHEMES[scheme][0] == "openwire":
            known = ", ".join(s for s, (proto, _) in SCHEMES.items() if proto != "openwire")
            raise ConfigurationError(
                f"discovery agent {agent}: scheme {given!r} is not a STOMP or AMQP scheme ({known})"
            )
        return scheme
    service = name.split(".", 1)[0][1:].lower()  # _amqps._tcp.example.com -> amqps
    if name.startswith("_") and SCHEMES.get(service, ("openwire",))[0] != "openwire":
        return service
    schemes = {m.scheme for m in members}
    return schemes.pop() if len(schemes) == 1 else "stomp"


def _resolver(agent: DiscoveryAgent) -> tuple[str | None, int]:
    text = agent.param("resolver")
    if text is None:
        return None, 53
    host, port = text, "53"
    if text.startswith("["):  # [::1]:5353
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else "53"
    elif text.count(":") == 1:  # 127.0.0.1:5353
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        number = 0
    if not 0 < number < 65536:
        raise ConfigurationError(
            f"discovery agent {agent}: resolver must be ip[:port] such as 127.0.0.1:5353, "
            f"got {text!r}"
        )
    return host, number
