"""A stomp+ssl connector made from a trustme CA answers a verified TLS STOMP handshake."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from failover_client.testing.brokers import BrokerKind, Cluster, broker_tls

pytestmark = pytest.mark.integration


def _stomp_over_tls(context: ssl.SSLContext, host: str, port: int) -> bytes:
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        return tls.recv(4096)


def test_stomp_ssl_connector_with_test_ca(
    broker_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    ca = trustme.CA()
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 1, tls=broker_tls(ca, tmp_path))
    ep = cluster[0].endpoint("stomp+ssl")
    assert cluster[0].uri("stomp+ssl").startswith("stomp+ssl://127.0.0.1:")

    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    assert _stomp_over_tls(trusting, ep.host, ep.port).startswith(b"CONNECTED")

    stranger = ssl.create_default_context()  # does not know the test CA
    with pytest.raises(ssl.SSLCertVerificationError):
        _stomp_over_tls(stranger, ep.host, ep.port)
