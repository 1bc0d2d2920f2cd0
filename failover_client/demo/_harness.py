"""The demo's brokers, from the shipped harness: what runs for each protocol, and where.

STOMP: a full-mesh network of ActiveMQ Classic brokers, so messages flow to wherever the
consumer is; the brokers advertise their OpenWire addresses to each other and to clients, as
ActiveMQ does by default (the demo's topology sources map them, see :mod:`._sources`).
AMQP 1.0: independent RabbitMQ nodes with the AMQP 1.0 plugin. RabbitMQ nodes do not pass
messages on, so a message stays on the node it was sent to until a consumer there (or
the demo's final drain) takes it; the demo's queue is declared durable on every node first,
because RabbitMQ's AMQP 1.0 ``/queue/x`` address declares a queue that a restart loses.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from failover_client.testing.brokers import (
    BackendUnavailable,
    Broker,
    BrokerError,
    BrokerKind,
    Cluster,
    ClusterSpec,
    ReceivedMessage,
    start_cluster,
)
from failover_client.uri import parse

__all__ = [
    "PROTOCOLS",
    "BrokersUnavailable",
    "DemoBrokers",
    "broker_ports",
    "client_destination",
    "describe_brokers",
    "drain_all",
    "start_brokers",
]

PROTOCOLS = ("stomp", "amqp")
"""What the demo's clients can speak (``--protocol``)."""


class BrokersUnavailable(RuntimeError):
    """The brokers cannot run (or did not start) here; the message says why."""


@runtime_checkable
class _DurableQueues(Protocol):
    """A broker whose queues must be declared (durable) before clients use them."""

    def declare_queue(self, queue: str) -> None: ...

    def sync_definitions(self, timeout: float = ...) -> None: ...


def describe_brokers(protocol: str, size: int) -> str:
    """What :func:`start_brokers` starts, for the demo's first line."""
    if protocol == "amqp":
        return f"{size} independent RabbitMQ nodes with AMQP 1.0"
    return f"{size} ActiveMQ Classic brokers as a network of brokers"


def start_brokers(protocol: str, size: int, root: Path, backend: str | None, queue: str) -> Cluster:
    """Start ``size`` brokers for clients speaking ``protocol``, with ``queue`` ready on each.

    ``queue`` is a queue name (no ``/queue/`` prefix). Raises :class:`BrokersUnavailable` when
    this machine cannot run them or one did not start (the reason included); nothing it
    started is left running then.
    """
    if protocol == "stomp":
        network = ClusterSpec(BrokerKind.ACTIVEMQ, size=size, network=True, advertise="tcp")
        return _started(network, root, backend)
    cluster = _started(ClusterSpec(BrokerKind.RABBITMQ, size=size), root, backend)
    try:
        _declare_everywhere(cluster, queue)
    except BaseException:
        for broker in cluster:
            broker.kill()
        cluster.close()
        raise
    return cluster


def _started(spec: ClusterSpec, root: Path, backend: str | None) -> Cluster:
    try:
        return start_cluster(spec, root, backend)
    except BackendUnavailable as exc:
        raise BrokersUnavailable(f"{exc} (bash .ci/install-brokers installs them)") from exc
    except BrokerError as exc:
        raise BrokersUnavailable(str(exc)) from exc


def _declare_everywhere(cluster: Cluster, queue: str) -> None:
    brokers = list(cluster)
    for broker in brokers:
        if not isinstance(broker, _DurableQueues):
            raise BrokersUnavailable(f"{broker.name} cannot declare the demo's durable queue")
    declarable = [b for b in brokers if isinstance(b, _DurableQueues)]

    def declare(broker: _DurableQueues) -> None:
        broker.declare_queue(queue)
        # RabbitMQ writes queue definitions behind: without this, a node killed seconds
        # after the declaration comes back without the queue and the messages it held.
        broker.sync_definitions()

    try:
        # One rabbitmqctl per node: together, they take the time of one.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(declarable)) as pool:
            list(pool.map(declare, declarable))
    except BrokerError as exc:
        raise BrokersUnavailable(f"declaring queue {queue!r}: {exc}") from exc


def client_destination(protocol: str, destination: str) -> str:
    """Where the clients send and subscribe for the portable ``/queue/<name>`` destination.

    RabbitMQ's AMQP 1.0 address of an existing queue is ``/amq/queue/<name>``.
    """
    if protocol == "amqp" and destination.startswith("/queue/"):
        return "/amq/queue/" + destination.removeprefix("/queue/")
    return destination


def broker_ports(cluster: Cluster, protocol: str = "stomp") -> list[int]:
    """Each broker's port for ``protocol``, in cluster order."""
    return [broker.endpoint(protocol).port for broker in cluster]


@dataclass
class DemoBrokers:
    """The cluster by label, and what the scenario did to it (for ``hung`` / ``dead``)."""

    cluster: Cluster
    labels: list[str]
    known: int
    """Brokers the clients know of: the first ones, plus each that joined."""
    protocol: str = "stomp"
    hung: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)

    def broker(self, name: str) -> Broker:
        return self.cluster[self.labels.index(name)]

    def key(self, name: str) -> str:
        """The ``host:port`` key the clients' pools know broker ``name`` by."""
        return parse(self.broker(name).uri(self.protocol)).members[0].key

    def status(self, name: str) -> str:
        if self.labels.index(name) >= self.known and name in self.dead:
            return "not started"
        if name in self.hung:
            return "hung"
        return "dead" if name in self.dead else "up"

    def balanced_over(self, priority: Sequence[str] = ()) -> dict[str, str]:
        """Label -> key of the brokers rebalancing spreads clients over now: the known brokers
        that are up, only the ``priority`` ones among them when any of those is up."""
        live = [n for n in self.labels[: self.known] if self.status(n) == "up"]
        preferred = [n for n in live if n in priority]
        return {n: self.key(n) for n in (preferred or live)}


def drain_all(cluster: Cluster, destination: str, protocol: str) -> list[str]:
    """Every message still on any broker of ``cluster``, as failover message ids.

    The brokers must be up. Drained with the clients' protocol: RabbitMQ hands AMQP messages
    to STOMP still encoded.
    """

    def drain(broker: Broker) -> list[ReceivedMessage]:
        return broker.drain(destination, timeout=10.0, idle=1.0, protocol=protocol)

    ids: list[str] = []
    # Rounds until one finds nothing: a network bridge can move a message to a broker whose
    # drain has just finished.
    for _ in range(4):
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(cluster)) as pool:
            found = list(pool.map(drain, list(cluster)))
        batch = [m.headers.get("failover-message-id", "?") for msgs in found for m in msgs]
        ids += batch
        if not batch:
            break
    return ids
