"""Fleets of clients for the rebalancing benchmark: ours, the topology sources they learn from,
and where every client was.

A *fleet* is the clients of one kind in one scenario: ``OurFleet`` (FailoverConnections with
``rebalance=true``, each with its own topology source, as a real deployment would have) or
``JavaFleet`` (``_rebalance_java``). Both answer ``snapshot()`` (where each client is and every
broker it was on, with monotonic times) and ``status()`` (the time of the last change and how
many clients are on a broker), with brokers named by their index in the cluster, so every
figure is computed by the same code for both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from failover_client.uri import parse

from failover_client import BrokerAddress, Connected, Event, FailoverConnection
from failover_client.testing.brokers import Cluster
from failover_client.topology import AdvisorySource, TopologySource

__all__ = [
    "SOURCES",
    "BrokerIndex",
    "Fleet",
    "OurFleet",
    "Snapshot",
    "openwire_available",
    "source_factory",
]

SOURCES = ("advisory", "openwire")


@dataclass(frozen=True)
class Snapshot:
    """Where each client of a fleet is (broker index, None between brokers), and the brokers
    each was on: ``(monotonic time it arrived, broker index)`` in order."""

    current: tuple[int | None, ...]
    histories: tuple[tuple[tuple[float, int], ...], ...]


class Fleet(Protocol):
    name: str
    size: int

    def snapshot(self) -> Snapshot: ...

    def status(self) -> tuple[float, int]: ...

    def close(self) -> None: ...


class BrokerIndex:
    """Broker index of an address of any of its endpoints (the harness gives each its ports)."""

    def __init__(self, cluster: Cluster) -> None:
        self._by_port = {
            ep.port: i for i, broker in enumerate(cluster) for ep in broker.endpoints.values()
        }

    def __call__(self, address: str) -> int | None:
        try:
            port = urlsplit(address).port
        except ValueError:
            return None
        return None if port is None else self._by_port.get(port)


class _Track:
    """The brokers one connection was on (its Connected events), with arrival times."""

    def __init__(self, index_of: Callable[[str], int | None]) -> None:
        self._index_of = index_of
        self.lock = threading.Lock()
        self.history: list[tuple[float, int]] = []

    def __call__(self, event: Event) -> None:
        if not isinstance(event, Connected):
            return
        index = self._index_of(event.broker)
        with self.lock:
            if index is not None and (not self.history or self.history[-1][1] != index):
                self.history.append((time.monotonic(), index))


class OurFleet:
    """``FailoverConnection`` s with one topology source each; a ``Fleet``."""

    name = "ours"

    def __init__(
        self,
        uri: str,
        client_ids: Sequence[str],
        new_source: Callable[[str], TopologySource],
        index_of: Callable[[str], int | None],
    ) -> None:
        self._index_of = index_of
        self._tracks = [_Track(index_of) for _ in client_ids]
        self.conns = [
            FailoverConnection(uri, client_id=cid, listeners=[track], topology=[new_source(uri)])
            for cid, track in zip(client_ids, self._tracks, strict=True)
        ]
        self.size = len(self.conns)

    def open(self) -> None:
        for conn in self.conns:
            conn.connect()

    def snapshot(self) -> Snapshot:
        current = tuple(self._index_of(c.broker) if c.broker else None for c in self.conns)
        histories = []
        for track in self._tracks:
            with track.lock:
                histories.append(tuple(track.history))
        return Snapshot(current, tuple(histories))

    def status(self) -> tuple[float, int]:
        last = 0.0
        for track in self._tracks:
            with track.lock:
                if track.history:
                    last = max(last, track.history[-1][0])
        # "switching": on the old broker while the new one is made ready (a rebalance).
        connected = sum(1 for c in self.conns if c.state in ("connected", "switching"))
        return last, connected

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


# --- topology sources ---------------------------------------------------------------------------


def openwire_available() -> bool:
    """Whether this checkout has ``failover_client.topology.OpenWireSource``."""
    try:
        from failover_client.topology import OpenWireSource  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def _stomp_for_openwire(cluster: Cluster) -> Callable[[str, str, int], BrokerAddress | None]:
    """Advertised OpenWire ``tcp://host:port`` -> that broker's STOMP address (by port)."""
    by_port = {b.endpoint("tcp").port: b.endpoint("stomp") for b in cluster}

    def mapping(scheme: str, host: str, port: int) -> BrokerAddress | None:
        if scheme == "stomp":
            return BrokerAddress(scheme, host, port)
        stomp = by_port.get(port)
        return None if stomp is None else BrokerAddress("stomp", stomp.host, stomp.port)

    return mapping


def source_factory(kind: str, cluster: Cluster) -> Callable[[str], TopologySource]:
    """A new topology source of ``kind`` for a connection on a failover URI.

    ``advisory``: network-bridge advisories over STOMP, watched by its own connection over the
    URI's members (which neither rebalances nor prefers priority brokers: it only listens).
    ``openwire``: ActiveMQ's own push, ``ConnectionControl`` on an OpenWire control connection
    that follows the data connection's broker.
    """
    mapping = _stomp_for_openwire(cluster)
    if kind == "advisory":

        def advisory(uri: str) -> TopologySource:
            parsed = parse(uri)
            options = parsed.options.replace(rebalance=False, priority_backup=False)
            return AdvisorySource(parsed.members, scheme_map=mapping, options=options)

        return advisory
    if kind == "openwire":
        from failover_client.topology import OpenWireSource  # noqa: PLC0415 - may not exist

        ports: Mapping[str, int] = {
            BrokerAddress("stomp", b.endpoint("stomp").host, b.endpoint("stomp").port).key: (
                b.endpoint("tcp").port
            )
            for b in cluster
        }

        def openwire(uri: str) -> TopologySource:
            source: TopologySource = OpenWireSource(openwire_port=ports, scheme_map=mapping)
            return source

        return openwire
    raise ValueError(f"source {kind!r}: choose one of {', '.join(SOURCES)}")
