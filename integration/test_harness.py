"""The harness itself: port block, broker.xml, specs, readiness that cannot be fooled, plugin."""

from __future__ import annotations

import os
import socket
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from failover_client.testing.brokers import (
    BrokerKind,
    ClusterSpec,
    Connector,
    Endpoint,
    LocalBroker,
    PortTakenError,
    allocate_ports,
    stomp_connected,
)
from failover_client.testing.brokers._activemq_config import ActiveMQConfig, render_broker_xml
from failover_client.testing.brokers._ownership import PortState
from failover_client.testing.brokers._ports import PortAllocator

pytest_plugins = ["pytester"]
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


# --- readiness proves the broker is the one started ------------------------------------------

# Answers every STOMP CONNECT with CONNECTED, as a broker left over from another run would.
STOMP_STUB = """
import socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen()
while True:
    try:
        conn, _ = listener.accept()
    except OSError:
        break
    with conn:
        data = b""
        while b"\\0" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        conn.sendall(b"CONNECTED\\nversion:1.2\\n\\n\\0")
"""


class _StubBroker(LocalBroker):
    """A 'broker' whose readiness probe is the real STOMP one; its process is ``argv``."""

    kind = BrokerKind.ACTIVEMQ

    def __init__(self, port: int, argv: list[str], base_dir: Path) -> None:
        super().__init__(
            "stub", {"stomp": Endpoint("stomp", "127.0.0.1", port)}, argv, None, base_dir
        )

    def probe(self, timeout: float = 1.0) -> bool:
        return stomp_connected("127.0.0.1", self.endpoint().port, timeout)


@pytest.fixture
def stranger() -> Iterator[int]:
    """A port on which this test process, not the broker, answers STOMP."""
    (port,) = allocate_ports(1)
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the listener was closed: the test is over
            with conn:
                conn.recv(4096)
                conn.sendall(b"CONNECTED\nversion:1.2\n\n\0")

    server = threading.Thread(target=serve, name="test-stomp-stranger", daemon=True)
    server.start()
    yield port
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    server.join(10)


def test_a_stranger_answering_stomp_on_the_port_fails_the_start(
    stranger: int, tmp_path: Path
) -> None:
    assert stomp_connected("127.0.0.1", stranger)  # the protocol alone would be fooled
    idle = [sys.executable, "-c", "import signal; signal.pause()"]
    broker = _StubBroker(stranger, idle, tmp_path)
    with pytest.raises(PortTakenError) as info:
        broker.start(timeout=30)
    assert info.value.port == stranger
    assert f"port {stranger} is held by pid {os.getpid()} (" in str(info.value)
    assert not broker.running()  # what it started is not left behind


def test_a_plain_listening_socket_on_the_port_fails_the_start(tmp_path: Path) -> None:
    (port,) = allocate_ports(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        stub = [sys.executable, "-c", STOMP_STUB, str(port)]
        broker = _StubBroker(port, stub, tmp_path)
        with pytest.raises(PortTakenError, match=f"port {port} is held by pid {os.getpid()}"):
            broker.start(timeout=30)
        assert not broker.running()


def test_a_broker_holding_its_own_port_is_ready(tmp_path: Path) -> None:
    (port,) = allocate_ports(1)
    broker = _StubBroker(port, [sys.executable, "-c", STOMP_STUB, str(port)], tmp_path)
    broker.start(timeout=30)
    try:
        assert [o.state for o in broker.ports()] == [PortState.OURS]
        assert broker.is_up()
    finally:
        broker.kill()


# --- the opt-in plugin, as a user runs it -------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "test_app_failover.py"


def test_a_user_test_kills_the_broker_under_a_producer(pytester: pytest.Pytester) -> None:
    # Activated by the ini key (the examples test covers --failover-brokers).
    pytester.makeini("[pytest]\nfailover_brokers = true\n")
    pytester.makepyfile(test_user=EXAMPLE.read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
