"""``stomp+ssl://`` members through ``FailoverConnection``: verified TLS that fails over.

Two ActiveMQ brokers with a TLS connector whose certificate comes from a CA made for this
module. With that CA (``tls.caFile`` in the URI) the connection works and fails over over TLS;
with another CA it stops with TLSFailure after one pass instead of retrying forever.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from failover_client import FailedOver, FailoverConnection, GaveUp, ReconnectAttempt, TLSFailure
from failover_client.testing.brokers import Cluster, TlsOptions, fresh_ca_and_broker_tls
from integration.test_failover_common import FAST, Events, LeakCheck, broker_at, failover_uri

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[TlsOptions, Path]:
    return fresh_ca_and_broker_tls(tmp_path_factory.mktemp("failover-tls"))


@pytest.fixture
def tls_cluster(
    broker_cluster: Callable[..., Cluster], tls_material: tuple[TlsOptions, Path]
) -> Cluster:
    return broker_cluster("activemq", 2, tls=tls_material[0], label="activemq-tls")


def test_trusted_ca_connects_and_fails_over_over_tls(
    tls_cluster: Cluster, tls_material: tuple[TlsOptions, Path], unique_queue: str
) -> None:
    options = {**FAST, "tls.caFile": str(tls_material[1])}
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(tls_cluster, options, endpoint="stomp+ssl"), listeners=[events]
    )
    conn.connect()
    first = broker_at(tls_cluster, conn.broker)
    assert conn.broker == first.uri("stomp+ssl")
    conn.send(unique_queue, "first, over tls")
    mark = events.mark()
    first.kill()
    moved = events.wait_for(FailedOver, after=mark)
    assert moved.to_broker.startswith("stomp+ssl://")
    conn.send(unique_queue, "second, over tls")
    conn.close()
    leaks.assert_clean()
    second = broker_at(tls_cluster, moved.to_broker)
    assert [m.text for m in second.drain(unique_queue, expect=1)] == ["second, over tls"]


def test_wrong_ca_is_a_tls_failure_after_one_pass(tls_cluster: Cluster, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    leaks = LeakCheck()
    events = Events()
    # No attempt limit: only the TLS verdict may stop the loop.
    conn = FailoverConnection(
        failover_uri(tls_cluster, {**FAST, "tls.caFile": str(other)}, endpoint="stomp+ssl"),
        listeners=[events],
    )
    with pytest.raises(TLSFailure) as info:
        conn.connect()
    conn.close()
    print(f"\n{info.value}")
    assert [e.broker for e in events.of(ReconnectAttempt)] == tls_cluster.members("stomp+ssl")
    assert isinstance(events.wait_for(GaveUp).error, TLSFailure)
    leaks.assert_clean()


def test_a_closed_tls_connection_releases_every_descriptor_without_gc(
    tls_cluster: Cluster, tls_material: tuple[TlsOptions, Path], unique_queue: str
) -> None:
    options = {**FAST, "tls.caFile": str(tls_material[1])}
    leaks = LeakCheck()
    # An automatic collection could free the selector at any moment: keep it out so the
    # outcome does not depend on allocation counts.
    gc.disable()
    try:
        with FailoverConnection(failover_uri(tls_cluster, options, endpoint="stomp+ssl")) as conn:
            conn.send(unique_queue, "over tls")
        leaks.assert_clean(allow_gc=False)
    finally:
        gc.enable()
