"""Topology sources: where changes to the broker list come from while a connection runs.

A :class:`TopologySource` pushes broker lists into a :class:`TopologySink` (a
:class:`~failover_client.FailoverConnection` is one). Sources are found by name through a
registry (built in: ``file`` and ``dns``; more through the ``failover_client.topology_sources``
entry-point group or :func:`register_topology_source`), never through an import path::

    source = topology_source_factory("file")(path="brokers.txt", interval=10.0)
    source.start(connection)
    ...
    source.stop()

    dns = topology_source_factory("dns")(name="_stomp._tcp.example.com")  # SRV records
"""

from __future__ import annotations

from ._base import TopologySink, TopologySource
from ._dns import ZERO_WEIGHT, DnsAnswer, DnsLookupError, DnsResolve, DnsSource
from ._file import FileSource, read_broker_file
from ._registry import (
    ENTRY_POINT_GROUP,
    TopologySourceError,
    TopologySourceFactory,
    register_topology_source,
    registered_topology_sources,
    topology_source_factory,
    unregister_topology_source,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ZERO_WEIGHT",
    "DnsAnswer",
    "DnsLookupError",
    "DnsResolve",
    "DnsSource",
    "FileSource",
    "TopologySink",
    "TopologySource",
    "TopologySourceError",
    "TopologySourceFactory",
    "read_broker_file",
    "register_topology_source",
    "registered_topology_sources",
    "topology_source_factory",
    "unregister_topology_source",
]
