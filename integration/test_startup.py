"""Start-up that says what is wrong, against real sockets and brokers: a closed port, an unknown
host, a plain broker URI, and a member that speaks the other protocol."""

from __future__ import annotations

import socket

import pytest

from failover_client import AllBrokersFailed, FailoverConnection
from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connect_timeout_against_a_closed_port_names_the_refusal() -> None:
    port = closed_port()
    connection = FailoverConnection(f"failover:(stomp://127.0.0.1:{port})")
    with pytest.raises(AllBrokersFailed) as info:
        connection.connect(timeout=2)
    (cause,) = info.value.causes.values()
    assert "refused" in str(cause).lower()
    assert connection.state == "closed"


def test_connect_timeout_against_an_unknown_host_names_the_lookup() -> None:
    connection = FailoverConnection("failover:(stomp://no-such-host.invalid:61613)")
    with pytest.raises(AllBrokersFailed) as info:
        connection.connect(timeout=5)
    text = str(info.value)
    assert "no-such-host.invalid" in text
    assert "resolve" in text.lower() or "name" in text.lower(), text
    assert connection.state == "closed"


def test_a_plain_broker_uri_fails_after_one_pass_without_a_timeout() -> None:
    port = closed_port()
    connection = FailoverConnection(f"stomp://127.0.0.1:{port}")
    try:
        with pytest.raises(AllBrokersFailed, match="gave up after 1") as info:
            connection.connect()
        assert list(info.value.causes) == [f"stomp://127.0.0.1:{port}"]
    finally:
        connection.close()


def test_amqp_to_a_stomp_port_is_a_protocol_mismatch(activemq_cluster: Cluster) -> None:
    stomp = activemq_cluster.members("stomp")[0]
    amqp_uri = "amqp://" + stomp.split("://", 1)[1]
    connection = FailoverConnection(amqp_uri)
    try:
        with pytest.raises(AllBrokersFailed) as info:
            connection.connect(timeout=10)
    finally:
        connection.close()
    text = str(info.value)
    assert "protocol mismatch" in text, text
    assert "answered like a STOMP broker" in text, text


def test_stomp_to_an_amqp_port_is_a_protocol_mismatch(rabbitmq_cluster: Cluster) -> None:
    amqp = rabbitmq_cluster.members("amqp")[0]
    stomp_uri = "stomp://" + amqp.split("://", 1)[1].split("?", 1)[0]
    connection = FailoverConnection(stomp_uri)
    try:
        with pytest.raises(AllBrokersFailed) as info:
            connection.connect(timeout=10)
    finally:
        connection.close()
    text = str(info.value)
    assert "protocol mismatch" in text, text
    assert "answered like an AMQP" in text, text
