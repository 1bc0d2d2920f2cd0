"""Topology sources: where changes to the broker list come from while a connection runs.

A :class:`TopologySource` pushes broker lists into a :class:`TopologySink`: the one a
:class:`~failover_client.FailoverConnection` gives the sources it is given
(``FailoverConnection(uri, topology=[source])``), or any other (:class:`BaseSink`).
Sources are found by name through a registry (built in: ``file``, ``url``, ``dns``,
``advisory`` and ``openwire``; more through the ``failover_client.topology_sources``
entry-point group or :func:`register_topology_source`), never through an import path::

    source = topology_source_factory("file")(path="brokers.txt", interval=10.0)
    connection = FailoverConnection(uri, topology=[source])  # started and stopped with it

    dns = topology_source_factory("dns")(name="_stomp._tcp.example.com")  # SRV records

    # ActiveMQ's updateURIsURL: a list at a path or URL, re-read on an interval and on reconnect
    url = topology_source_factory("url")(url="https://config.example.com/brokers.txt")

    # An ActiveMQ Classic network of brokers, from its bridge advisories (OpenWire URLs mapped):
    network = topology_source_factory("advisory")(uri, scheme_map={"tcp": ("stomp", 61613)})

    # Dynamic discovery, as a URI asks for it: discovery:(multicast://default), udp://group:port
    classic = MulticastSource(scheme_map={"tcp": ("stomp", 61613)})  # 239.255.2.3:6155
    artemis = ArtemisUdpSource("231.7.7.7", 9876, refresh_timeout=10.0)
"""

from __future__ import annotations

from ._advisory import (
    ADVISORY_TOPIC,
    MAX_ADVISORY_BODY,
    AdvisoryError,
    AdvisorySource,
    Bridge,
    SchemeMap,
    map_broker_url,
    parse_advisory,
)
from ._artemis_udp import (
    ArtemisBroadcast,
    ArtemisConnector,
    ArtemisUdpSource,
    parse_artemis_broadcast,
)
from ._base import BaseSink, TopologySink, TopologySource
from ._datagram import Datagrams, MulticastSocket
from ._dns import ZERO_WEIGHT, DnsAnswer, DnsLookupError, DnsResolve, DnsSource
from ._file import FileSource, SchemeRewrite, parse_broker_list, read_broker_file
from ._from_uri import URI_SOURCE_NAME, uri_sources
from ._multicast import (
    MulticastAdvert,
    MulticastSource,
    encode_multicast_advert,
    parse_multicast_advert,
)
from ._openwire import OpenWireSource
from ._registry import (
    ENTRY_POINT_GROUP,
    TopologySourceError,
    TopologySourceFactory,
    register_topology_source,
    registered_topology_sources,
    topology_source_factory,
    unregister_topology_source,
)
from ._url import DEFAULT_MAX_BYTES, UrlReadError, UrlSource

__all__ = [
    "ADVISORY_TOPIC",
    "DEFAULT_MAX_BYTES",
    "ENTRY_POINT_GROUP",
    "MAX_ADVISORY_BODY",
    "URI_SOURCE_NAME",
    "ZERO_WEIGHT",
    "AdvisoryError",
    "AdvisorySource",
    "ArtemisBroadcast",
    "ArtemisConnector",
    "ArtemisUdpSource",
    "BaseSink",
    "Bridge",
    "Datagrams",
    "DnsAnswer",
    "DnsLookupError",
    "DnsResolve",
    "DnsSource",
    "FileSource",
    "MulticastAdvert",
    "MulticastSocket",
    "MulticastSource",
    "OpenWireSource",
    "SchemeMap",
    "SchemeRewrite",
    "TopologySink",
    "TopologySource",
    "TopologySourceError",
    "TopologySourceFactory",
    "UrlReadError",
    "UrlSource",
    "encode_multicast_advert",
    "map_broker_url",
    "parse_advisory",
    "parse_artemis_broadcast",
    "parse_broker_list",
    "parse_multicast_advert",
    "read_broker_file",
    "register_topology_source",
    "registered_topology_sources",
    "topology_source_factory",
    "unregister_topology_source",
    "uri_sources",
]
