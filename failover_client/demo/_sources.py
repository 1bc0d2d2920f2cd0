"""How the demo's clients learn of a broker that joins: from the brokers, or from a file.

Over STOMP the clients hear it from the ActiveMQ network itself, through one topology source
per connection (each application instance would have its own):

* ``openwire``: ActiveMQ's own cluster push (``updateClusterClients``), received on a small
  OpenWire control connection beside each STOMP connection
  (``failover_client.topology.OpenWireSource``);
* ``advisory``: the network-bridge advisories every broker publishes, read over STOMP
  (:class:`failover_client.topology.AdvisorySource`).

The brokers advertise their OpenWire address (``tcp://127.0.0.1:<port>``), as ActiveMQ does by
default. Every broker of the demo has its own ports, so :class:`PortMap` turns an advertised
address into that broker's address for the clients' protocol.

RabbitMQ tells AMQP clients nothing about other nodes, so over AMQP (or when asked for over
STOMP) the demo falls back on ``file``: each client re-reads a broker-list file
(:class:`failover_client.topology.FileSource`) and, at the join, the demo writes the new node
into it, as an operator or a deployment tool would. The screen says so: no broker pushes then.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from failover_client import Clock, topology
from failover_client.testing.brokers import Broker, Cluster
from failover_client.topology import AdvisorySource, FileSource, TopologySource
from failover_client.uri import BrokerAddress, parse

__all__ = [
    "SOURCES",
    "Discovery",
    "PortMap",
    "check_source",
    "default_source",
    "openwire_available",
]

SOURCES = ("openwire", "advisory", "file")
"""Where the clients learn of a joining broker (``--source``)."""

FILE_INTERVAL = 1.0
"""Seconds between two reads of the broker-list file (the fallback's delay to notice a join)."""


def openwire_available() -> bool:
    """Whether this version of the library has the OpenWire cluster-push source."""
    return hasattr(topology, "OpenWireSource")


def default_source(protocol: str) -> str:
    """The brokers' own push where there is one (OpenWire, else advisories); a file for AMQP."""
    if protocol != "stomp":
        return "file"
    return "openwire" if openwire_available() else "advisory"


def check_source(protocol: str, source: str) -> None:
    """ValueError when ``source`` cannot serve clients speaking ``protocol``."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r}: choose one of {', '.join(SOURCES)}")
    if protocol != "stomp" and source != "file":
        raise ValueError(
            f"source {source!r} needs ActiveMQ brokers (--protocol stomp): RabbitMQ pushes no "
            "broker list to AMQP clients, so only the 'file' fallback works there"
        )
    if source == "openwire" and not openwire_available():
        raise ValueError("source 'openwire': this version has no OpenWireSource; use 'advisory'")


class PortMap:
    """``scheme_map`` for the sources: an advertised address of a demo broker -> its client
    address. Matched by port, because every broker of the demo has its own ports; an address
    of no demo broker is skipped (None)."""

    def __init__(self, cluster: Cluster, protocol: str) -> None:
        self._by_port: dict[int, BrokerAddress] = {}
        self.openwire_ports: dict[str, int] = {}
        """Each broker's client ``host:port`` key -> its OpenWire port."""
        for broker in cluster:
            member = parse(broker.uri(protocol)).members[0]
            address = BrokerAddress(member.scheme, member.host, member.port)
            for endpoint in broker.endpoints.values():
                self._by_port[endpoint.port] = address
            if "tcp" in broker.endpoints:
                self.openwire_ports[address.key] = broker.endpoint("tcp").port

    def __call__(self, scheme: str, host: str, port: int) -> BrokerAddress | None:
        return self._by_port.get(port)


class Discovery:
    """Builds each client's topology source, and does what a join needs of the demo.

    With ``file`` the broker list lives in ``<root>/brokers.txt``, holding the brokers the
    clients know at the start; :meth:`joined` adds a broker to it.
    """

    def __init__(
        self,
        kind: str,
        cluster: Cluster,
        protocol: str,
        *,
        known: Sequence[Broker],
        root: Path,
        clock: Clock,
        login: str | None,
        passcode: str | None,
    ) -> None:
        check_source(protocol, kind)
        self.kind = kind
        self._protocol = protocol
        self._map = PortMap(cluster, protocol)
        self._clock = clock
        self._login = login
        self._passcode = passcode
        self._listed = [b.uri(protocol) for b in known]
        self.path = root / "brokers.txt"
        if kind == "file":
            self._write()

    def describe(self) -> str:
        """What the audience should know about how the clients learn of new brokers."""
        if self.kind == "openwire":
            return (
                "topology: every client gets ActiveMQ's own cluster push (updateClusterClients, "
                "rebalanceClusterClients) on an OpenWire control connection beside its data "
                "connection (OpenWireSource); nobody tells the clients about a new broker by hand"
            )
        if self.kind == "advisory":
            return (
                "topology: every client reads the brokers' network-bridge advisories over STOMP "
                "(AdvisorySource); nobody tells the clients about a new broker by hand"
            )
        why = (
            "RabbitMQ pushes no broker list to AMQP clients"
            if self._protocol != "stomp"
            else "asked for with --source file"
        )
        return (
            f"topology: FALLBACK, no broker push ({why}): every client re-reads {self.path} "
            f"every {FILE_INTERVAL:g} s (FileSource), and the demo writes a new broker into it "
            "when the broker starts, as an operator would"
        )

    def sources(self, uri: str) -> list[TopologySource]:
        """A new source for the connection to ``uri`` (one per connection)."""
        if self.kind == "file":
            return [FileSource(self.path, interval=FILE_INTERVAL, clock=self._clock)]
        parsed = parse(uri)
        # The watcher only listens: it neither rebalances nor prefers a tier.
        watch = parsed.options.replace(rebalance=False, priority_backup=False, priority_uris=())
        if self.kind == "advisory":
            return [
                AdvisorySource(
                    parsed.members,
                    login=self._login,
                    passcode=self._passcode,
                    clock=self._clock,
                    scheme_map=self._map,
                    options=watch,
                )
            ]
        openwire: Callable[..., TopologySource] = topology.OpenWireSource  # type: ignore[attr-defined,unused-ignore]
        return [
            openwire(
                parsed.members,
                openwire_port=self._map.openwire_ports,
                scheme_map=self._map,
                login=self._login,
                passcode=self._passcode,
                clock=self._clock,
            )
        ]

    def joined(self, broker: Broker) -> str | None:
        """``broker`` started: with ``file``, list it (returns what the audience should read)."""
        if self.kind != "file":
            return None
        self._listed.append(broker.uri(self._protocol))
        self._write()
        return f"wrote {broker.uri(self._protocol)} into {self.path.name} (the file fallback)"

    def _write(self) -> None:
        # Whole file at once: a reader never sees half a list.
        partial = self.path.with_suffix(".tmp")
        partial.write_text("".join(f"{uri}\n" for uri in self._listed), encoding="utf-8")
        os.replace(partial, self.path)
