"""The STOMP adapter over TLS to ActiveMQ: chain and host-name verification, loss detection.

The broker's certificate is issued by a CA made for this module, for the name ``localhost``
only, so connecting to ``127.0.0.1`` shows the host-name check.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trustme

from failover_client import BrokerAddress, BrokerUnavailable, FailoverOptions, TLSFailure
from failover_client.adapter import Cancel, Received
from failover_client.stomp import StompConnector
from failover_client.testing.brokers import Broker, Cluster, TlsOptions, broker_tls

pytestmark = pytest.mark.integration

SAFETY = 15.0


class Recorder:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.lost: list[tuple[float, BaseException]] = []

    def on_message(self, session: Any, message: Received) -> None:
        pass

    def on_lost(self, session: Any, cause: BaseException) -> None:
        with self.cond:
            self.lost.append((time.monotonic(), cause))
            self.cond.notify_all()

    def wait_lost(self) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: bool(self.lost), SAFETY)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_material(
    ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> tuple[TlsOptions, str]:
    directory = tmp_path_factory.mktemp("stomp-tls")
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return broker_tls(ca, directory, hostnames=("localhost",)), str(ca_file)


@pytest.fixture
def tls_broker(
    broker_cluster: Callable[..., Cluster], tls_material: tuple[TlsOptions, str]
) -> Broker:
    return broker_cluster("activemq", 1, tls=tls_material[0])[0]


def _address(broker: Broker, host: str) -> BrokerAddress:
    ep = broker.endpoint("stomp+ssl")
    return BrokerAddress("stomp+ssl", host, ep.port)


def _adapter_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("stomp-")]


def test_trusted_ca_and_matching_name_connect_and_confirm(
    tls_broker: Broker, tls_material: tuple[TlsOptions, str], unique_queue: str
) -> None:
    connector = StompConnector(FailoverOptions(tls_ca_file=tls_material[1]), heartbeat=(1000, 1000))
    session = connector.connect(
        _address(tls_broker, "localhost"), timeout=5.0, listener=Recorder(), cancel=Cancel()
    )
    done = threading.Event()
    outcome: list[BaseException | None] = []

    def confirm(error: BaseException | None) -> None:
        outcome.append(error)
        done.set()

    session.send(unique_queue, b"over tls", {}, confirm)
    assert done.wait(SAFETY)
    assert outcome == [None]
    session.close()
    assert _adapter_threads() == []


def test_wrong_ca_is_a_tls_failure(tls_broker: Broker, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    connector = StompConnector(FailoverOptions(tls_ca_file=str(other)))
    with pytest.raises(TLSFailure, match="certificate verification failed") as info:
        connector.connect(
            _address(tls_broker, "localhost"), timeout=5.0, listener=Recorder(), cancel=Cancel()
        )
    print(f"\n{info.value}")
    assert _adapter_threads() == []


def test_host_name_mismatch_is_a_tls_failure_unless_switched_off(
    tls_broker: Broker, tls_material: tuple[TlsOptions, str]
) -> None:
    options = FailoverOptions(tls_ca_file=tls_material[1])
    with pytest.raises(TLSFailure, match="certificate verification failed") as info:
        StompConnector(options).connect(
            _address(tls_broker, "127.0.0.1"), timeout=5.0, listener=Recorder(), cancel=Cancel()
        )
    print(f"\n{info.value}")
    relaxed = StompConnector(options.replace(tls_verify_hostname=False))
    session = relaxed.connect(
        _address(tls_broker, "127.0.0.1"), timeout=5.0, listener=Recorder(), cancel=Cancel()
    )
    session.close()
    assert _adapter_threads() == []


def test_tls_session_notices_a_killed_broker(
    tls_broker: Broker, tls_material: tuple[TlsOptions, str]
) -> None:
    listener = Recorder()
    connector = StompConnector(FailoverOptions(tls_ca_file=tls_material[1]), heartbeat=(0, 0))
    session = connector.connect(
        _address(tls_broker, "localhost"), timeout=5.0, listener=listener, cancel=Cancel()
    )
    killed = time.monotonic()
    tls_broker.kill()
    assert listener.wait_lost()
    noticed, cause = listener.lost[0]
    print(f"\nTLS: SIGKILL noticed after {1000 * (noticed - killed):.1f} ms: {cause}")
    assert isinstance(cause, BrokerUnavailable)
    session.close()
    assert len(listener.lost) == 1
    assert _adapter_threads() == []
