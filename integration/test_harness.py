"""The harness's own pure parts: port block, broker.xml, specs (no broker needed)."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET

import pytest

from integration._activemq_config import ActiveMQConfig, render_broker_xml
from integration._ports import PortAllocator
from integration.brokers import BrokerKind, ClusterSpec, Connector

pytestmark = pytest.mark.integration

NS = "{http://activemq.apache.org/schema/core}"


def test_port_allocator_skips_ports_in_use_and_never_repeats() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        held = holder.getsockname()[1]
        allocator = PortAllocator(start=held, end=held + 50, offset=0)
        first = allocator.take(3)
        second = allocator.take(3)
    assert held not in first + second
    assert len(set(first + second)) == 6
    assert all(held < p < held + 50 for p in first + second)


def _connectors(cfg: ActiveMQConfig) -> list[ET.Element]:
    root = ET.fromstring(render_broker_xml(cfg))
    return list(root.iter(NS + "transportConnector"))


@pytest.mark.parametrize(("advertise", "first"), [("stomp", "stomp://"), ("tcp", "tcp://")])
def test_network_broker_flags_the_advertised_connector_first(advertise: str, first: str) -> None:
    cfg = ActiveMQConfig(
        "b0",
        "/data",
        "127.0.0.1",
        20001,
        20002,
        network_peers=["127.0.0.1:20004"],
        advertise=advertise,
    )
    connectors = _connectors(cfg)
    assert connectors[0].get("uri", "").startswith(first)
    assert all(c.get("updateClusterClients") == "true" for c in connectors)
    root = ET.fromstring(render_broker_xml(cfg))
    (bridge,) = root.iter(NS + "networkConnector")
    assert bridge.get("uri", "").startswith("static:(tcp://127.0.0.1:20004)?")


def test_plain_broker_has_no_cluster_flags_and_extra_connectors_get_ports() -> None:
    extra = Connector("stomp-hb", "stomp", "transport.hbGracePeriodMultiplier=2")
    cfg = ActiveMQConfig("b0", "/data", "127.0.0.1", 20001, 20002, extra={extra: 20003})
    connectors = _connectors(cfg)
    assert [c.get("uri") for c in connectors] == [
        "stomp://127.0.0.1:20001",
        "tcp://127.0.0.1:20002",
        "stomp://127.0.0.1:20003?transport.hbGracePeriodMultiplier=2",
    ]
    assert all(c.get("updateClusterClients") is None for c in connectors)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "rabbitmq", "network": True}, "only supported for ActiveMQ"),
        ({"kind": "activemq", "size": 0}, "at least one broker"),
        ({"kind": "activemq", "advertise": "amqp"}, "choose 'stomp' or 'tcp'"),
        ({"kind": "kafka"}, "kafka"),
        ({"kind": "activemq", "extra_connectors": (Connector("stomp", "stomp"),)}, "clash"),
    ],
)
def test_cluster_spec_rejects_bad_input(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterSpec(**kwargs)  # type: ignore[arg-type]


def test_cluster_spec_is_a_hashable_key() -> None:
    assert ClusterSpec(BrokerKind.ACTIVEMQ) == ClusterSpec("activemq")  # type: ignore[arg-type]
    assert hash(ClusterSpec(BrokerKind.ACTIVEMQ, 3)) == hash(ClusterSpec(BrokerKind.ACTIVEMQ, 3))
