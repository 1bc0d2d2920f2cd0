"""The demo's brokers: a network of ActiveMQ Classic brokers from the shipped harness."""

from __future__ import annotations

from pathlib import Path

from failover_client.testing.brokers import (
    BackendUnavailable,
    BrokerError,
    BrokerKind,
    Cluster,
    ClusterSpec,
    start_cluster,
)

__all__ = ["BrokersUnavailable", "broker_ports", "start_network"]


class BrokersUnavailable(RuntimeError):
    """The brokers cannot run (or did not start) here; the message says why."""


def start_network(size: int, root: Path, backend: str | None) -> Cluster:
    """Start ``size`` ActiveMQ Classic brokers in a full-mesh network of brokers under ``root``.

    Raises :class:`BrokersUnavailable` when this machine cannot run them or one did not start
    (the reason included); nothing it started is left running then.
    """
    spec = ClusterSpec(BrokerKind.ACTIVEMQ, size=size, network=True, advertise="stomp")
    try:
        return start_cluster(spec, root, backend)
    except BackendUnavailable as exc:
        raise BrokersUnavailable(f"{exc} (bash .ci/install-brokers installs them)") from exc
    except BrokerError as exc:
        raise BrokersUnavailable(str(exc)) from exc


def broker_ports(cluster: Cluster) -> list[int]:
    """Each broker's STOMP port, in cluster order."""
    return [broker.endpoint("stomp").port for broker in cluster]
