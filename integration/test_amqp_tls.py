"""AMQP 1.0 over TLS (``amqps://``) against a RabbitMQ node whose certificate a test CA signed.

Verification is on by default: the CA named by ``tls.caFile`` is trusted, the system store does
not know the test CA, and a certificate issued for another host name fails unless host-name
checking is switched off. Each failure is a TLSFailure that the reconnect loop does not retry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from failover_client import (
    AllBrokersFailed,
    BrokerAddress,
    FailoverConnection,
    FailoverOptions,
    TLSFailure,
)
from failover_client.adapter import Cancel
from failover_client.amqp import AmqpConnector
from failover_client.testing.brokers import BrokerKind, Cluster, broker_tls
from failover_client.testing.contract import ContractListener
from integration.test_failover_common import SAFETY, durable_queue, queue_name

pytestmark = pytest.mark.integration


@pytest.fixture
def tls_node(broker_cluster: Callable[..., Cluster], tmp_path: Path) -> tuple[Cluster, Path]:
    """One RabbitMQ node with an amqps listener, and the file of the CA that signed it.

    The certificate names ``localhost`` only: connecting to 127.0.0.1 is a host-name mismatch.
    """
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    tls = broker_tls(ca, tmp_path / "broker", hostnames=("localhost",))
    return broker_cluster(BrokerKind.RABBITMQ, 1, tls=tls), ca_file


def _member(cluster: Cluster, host: str) -> str:
    endpoint = cluster[0].endpoint("amqps")
    return f"amqps://{host}:{endpoint.port}"


def test_a_verified_amqps_connection_sends_and_receives(tls_node: tuple[Cluster, Path]) -> None:
    cluster, ca_file = tls_node
    login, passcode = cluster[0].credentials or (None, None)
    queue = queue_name(durable_queue(cluster))
    uri = f"failover:({_member(cluster, 'localhost')})?tls.caFile={ca_file}&maxReconnectAttempts=0"
    with FailoverConnection(uri, login=login, passcode=passcode) as conn:
        conn.connect()
        conn.send(f"/amq/queue/{queue}", b"over tls", timeout=SAFETY)
        assert conn.broker is not None
        assert conn.broker.startswith("amqps://localhost:")
    (message,) = cluster[0].drain(f"/queue/{queue}", expect=1, protocol="amqp")
    assert message.body == b"over tls"


def test_a_ca_the_client_does_not_trust_is_a_tls_failure_that_is_not_retried(
    tls_node: tuple[Cluster, Path],
) -> None:
    cluster, _ = tls_node
    login, passcode = cluster[0].credentials or (None, None)
    uri = f"failover:({_member(cluster, 'localhost')})?maxReconnectAttempts=5"
    conn = FailoverConnection(uri, login=login, passcode=passcode)
    try:
        # The loop stops at the first TLSFailure: a CA the client lacks is not an outage.
        with pytest.raises(TLSFailure, match="certificate verify failed"):
            conn.connect()
        with pytest.raises(AllBrokersFailed) as info:
            conn.send("/amq/queue/never", b"x")
    finally:
        conn.close()
    (cause,) = info.value.causes.values()
    assert isinstance(cause, TLSFailure), cause


def test_a_host_name_the_certificate_does_not_name_fails_unless_its_check_is_off(
    tls_node: tuple[Cluster, Path],
) -> None:
    cluster, ca_file = tls_node
    login, passcode = cluster[0].credentials or (None, None)
    endpoint = cluster[0].endpoint("amqps")
    address = BrokerAddress("amqps", "127.0.0.1", endpoint.port)
    strict = AmqpConnector(
        FailoverOptions(tls_ca_file=str(ca_file)), login=login, passcode=passcode
    )
    with pytest.raises(TLSFailure):
        strict.connect(address, timeout=SAFETY, listener=ContractListener(), cancel=Cancel())
    lenient = AmqpConnector(
        FailoverOptions(tls_ca_file=str(ca_file), tls_verify_hostname=False),
        login=login,
        passcode=passcode,
    )
    session = lenient.connect(address, timeout=SAFETY, listener=ContractListener(), cancel=Cancel())
    session.close()
