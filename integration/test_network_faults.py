"""Real network faults between FailoverConnection and ActiveMQ, made by a FaultProxy.

The first member of each failover URI is a proxy in front of broker 0; the others are the
other brokers, direct. Each test drains every broker at the end and asserts that no confirmed
message is lost (a message whose confirmation was lost may arrive twice, with one id).
Detection times and throughput are printed (``-s``) against the settings, never asserted.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from failover_client import Disconnected, FailedOver, FailoverConnection
from failover_client.testing.brokers import (
    TO_BROKER,
    TO_CLIENT,
    Cluster,
    Direction,
    FaultProxy,
    proxied_failover_uri,
)
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    Producer,
    check_delivery,
    credentials,
    drain_all,
)

pytestmark = pytest.mark.integration

HEARTBEAT_MS = 500
CONNECT_TIMEOUT_MS = 1000
OPTIONS = {
    **FAST,
    "heartbeat": f"{HEARTBEAT_MS},{HEARTBEAT_MS}",
    "connectTimeout": CONNECT_TIMEOUT_MS,
}


@pytest.fixture
def proxy(activemq_cluster: Cluster) -> Iterator[FaultProxy]:
    p = FaultProxy(activemq_cluster[0].endpoint("stomp"), rng=random.Random(11))
    yield p
    p.close()


def _uri(cluster: Cluster, proxy: FaultProxy, options: dict[str, str | int | float | bool]) -> str:
    return proxied_failover_uri(
        [proxy, *(b.endpoint("stomp") for b in cluster.brokers[1:])], options
    )


def _connect(cluster: Cluster, proxy: FaultProxy, events: Events) -> FailoverConnection:
    conn = FailoverConnection(
        _uri(cluster, proxy, OPTIONS), listeners=[events], **credentials(cluster)
    )
    conn.connect()
    assert conn.broker == proxy.uri()
    return conn


def _fault_then_failover(
    cluster: Cluster, proxy: FaultProxy, queue: str, label: str, fault: Callable[[], None]
) -> None:
    """Producer running; ``fault()`` on the proxy in use; traffic must move; nothing lost."""
    events = Events()
    conn = _connect(cluster, proxy, events)
    producer = Producer(conn, queue, prefix=label)
    producer.start()
    try:
        producer.wait_confirmed(20)
        mark = events.mark()
        started = time.monotonic()
        fault()
        lost = events.wait_for(Disconnected, after=mark)
        moved = events.wait_for(FailedOver, after=mark)
        print(
            f"\n{label}: noticed after {1000 * (events.time_of(lost) - started):.0f} ms"
            f" (heart-beat {HEARTBEAT_MS},{HEARTBEAT_MS} ms), moved after"
            f" {1000 * (events.time_of(moved) - started):.0f} ms; cause: {lost.cause}"
        )
        assert lost.broker == proxy.uri()
        producer.wait_confirmed(20)
    finally:
        confirmed = producer.finish()
        conn.close()
    proxy.close()  # the broker drops the abandoned connection (and its open work)
    delivery = check_delivery(drain_all(cluster, queue), confirmed, may_duplicate=confirmed)
    print(f"{label}: {len(confirmed)} confirmed, {sum(delivery.copies.values())} on the brokers")


def test_partition_is_noticed_by_heartbeats(
    activemq_cluster: Cluster, unique_queue: str, proxy: FaultProxy
) -> None:
    _fault_then_failover(activemq_cluster, proxy, unique_queue, "partition", proxy.partition)


@pytest.mark.parametrize("direction", [TO_CLIENT, TO_BROKER])
def test_one_way_partition(
    activemq_cluster: Cluster, unique_queue: str, proxy: FaultProxy, direction: Direction
) -> None:
    _fault_then_failover(
        activemq_cluster,
        proxy,
        unique_queue,
        f"one-way {direction}",
        lambda: proxy.one_way(direction),
    )


def test_reset_mid_frame(activemq_cluster: Cluster, unique_queue: str, proxy: FaultProxy) -> None:
    # 7 bytes into the broker's next frame (a RECEIPT): the client reads half a frame, then RST.
    _fault_then_failover(
        activemq_cluster, proxy, unique_queue, "reset mid-frame", lambda: proxy.reset_after(7)
    )


def test_blackholed_broker_at_startup_times_out_and_moves_on(
    activemq_cluster: Cluster, unique_queue: str, proxy: FaultProxy
) -> None:
    proxy.blackhole_after_handshake()
    events = Events()
    conn = FailoverConnection(
        _uri(activemq_cluster, proxy, OPTIONS), listeners=[events], **credentials(activemq_cluster)
    )
    started = time.monotonic()
    connecting = threading.Thread(target=conn.connect, name="test-connect", daemon=True)
    connecting.start()
    # The connect gives up on the silent member after its own timeout, far inside SAFETY
    # (there is no heart-beat before CONNECTED to do it); a connect that never did stays here.
    connecting.join(SAFETY)
    elapsed = time.monotonic() - started
    try:
        assert not connecting.is_alive(), f"connect() still waiting after {SAFETY} s"
        print(
            f"\nblackhole after handshake: connected to {conn.broker} after"
            f" {1000 * elapsed:.0f} ms (connectTimeout {CONNECT_TIMEOUT_MS} ms)"
        )
        assert conn.broker == activemq_cluster[1].uri()
        conn.send(unique_queue, "after the blackhole")
    finally:
        conn.close()
    proxy.close()
    check_delivery(drain_all(activemq_cluster, unique_queue), ["after the blackhole"])


def test_latency_throughput(
    activemq_cluster: Cluster, unique_queue: str, proxy: FaultProxy
) -> None:
    one_way = 0.05
    total = 3000
    window = 1024
    proxy.latency(one_way)
    events = Events()
    conn = FailoverConnection(
        _uri(activemq_cluster, proxy, {**OPTIONS, "confirmWindow": window}),
        listeners=[events],
        **credentials(activemq_cluster),
    )
    conn.connect()
    try:
        assert conn.broker == proxy.uri()
        started = time.monotonic()
        futures = [conn.send_async(unique_queue, f"l-{n}", timeout=SAFETY) for n in range(total)]
        conn.flush(timeout=SAFETY)
        elapsed = time.monotonic() - started
        assert all(f.exception(timeout=SAFETY) is None for f in futures)
        assert conn.broker == proxy.uri()
    finally:
        conn.close()
    rtt = 2 * one_way
    print(
        f"\nlatency {1000 * one_way:.0f} ms each way (RTT {1000 * rtt:.0f} ms): {total} sends"
        f" confirmed in {elapsed:.2f} s = {total / elapsed:.0f} msg/s;"
        f" window/RTT bound = {window / rtt:.0f} msg/s"
    )
    proxy.close()
    delivery = check_delivery(
        drain_all(activemq_cluster, unique_queue), [f"l-{n}" for n in range(total)]
    )
    assert sum(delivery.copies.values()) == total
