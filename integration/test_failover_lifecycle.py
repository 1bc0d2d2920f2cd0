"""Bad input, closing, and many threads: clear errors and nothing left behind.

After every error path (malformed URI, nobody listening, use after close) and after a close
from another thread, no thread of the library is alive and no descriptor more is open than
before. Several threads send at once across a fail-over and every confirmed message is there.
"""

from __future__ import annotations

import threading

import pytest

from failover_client import (
    AllBrokersFailed,
    Closed,
    ConnectionClosed,
    FailedOver,
    FailoverConnection,
    URIError,
)
from failover_client.testing.brokers import Cluster, allocate_ports
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    LeakCheck,
    Producer,
    broker_at,
    check_delivery,
    connected_then_all_down,
    drain_all,
    failover_uri,
    library_threads,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("uri", "where"),
    [
        ("failover:(stomp://127.0.0.1:61613,stomp://127.0.0.1:61614", "unclosed"),
        ("failover:(stomp://127.0.0.1:61613)?maxReconnectAttempts=lots", "maxReconnectAttempts"),
        ("failover:(stomp://127.0.0.1:99999)", "99999"),
        ("failover:(stomp://127.0.0.1:61613)?noSuchOption=1", "noSuchOption"),
    ],
)
def test_malformed_uri_is_a_uri_error_and_starts_nothing(uri: str, where: str) -> None:
    leaks = LeakCheck()
    with pytest.raises(URIError) as info:
        FailoverConnection(uri)
    print(f"\n{info.value}")
    assert where.lower() in str(info.value).lower()
    leaks.assert_clean()


def test_unreachable_brokers_are_all_brokers_failed() -> None:
    ports = allocate_ports(2)  # reserved for us, nobody listens there
    uri = (
        f"failover:(stomp://127.0.0.1:{ports[0]},stomp://127.0.0.1:{ports[1]})"
        "?startupMaxReconnectAttempts=1&initialReconnectDelay=10&maxReconnectDelay=1000"
    )
    leaks = LeakCheck()
    conn = FailoverConnection(uri)
    with pytest.raises(AllBrokersFailed) as info:
        conn.connect()
    assert set(info.value.causes) == {f"stomp://127.0.0.1:{p}" for p in ports}
    conn.close()
    leaks.assert_clean()


def test_send_and_subscribe_after_close_are_connection_closed(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(failover_uri(activemq_cluster, FAST), listeners=[events])
    conn.connect()
    conn.send(unique_queue, "while open")
    conn.close()
    with pytest.raises(ConnectionClosed):
        conn.send(unique_queue, "after close")
    with pytest.raises(ConnectionClosed):
        conn.send_async(unique_queue, "after close")
    with pytest.raises(ConnectionClosed):
        conn.subscribe(unique_queue, lambda message: None)
    conn.close()  # idempotent
    assert len(events.of(Closed)) == 1
    assert conn.state == "closed"
    leaks.assert_clean()
    assert [m.text for m in activemq_cluster[0].drain(unique_queue, expect=1)] == ["while open"]


def test_concurrent_senders_across_a_failover(activemq_cluster: Cluster, unique_queue: str) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(failover_uri(activemq_cluster, FAST), listeners=[events])
    conn.connect()
    producers = [Producer(conn, unique_queue, prefix=f"t{n}") for n in range(4)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.wait_confirmed(20)
    before: set[str] = set()
    for producer in producers:
        with producer.cond:
            before.update(producer.confirmed)
    victim = broker_at(activemq_cluster, conn.broker)
    mark = events.mark()
    victim.kill()
    events.wait_for(FailedOver, after=mark)
    for producer in producers:
        producer.wait_confirmed(20)
    confirmed = [body for producer in producers for body in producer.finish()]
    conn.close()
    leaks.assert_clean()
    victim.start()
    check_delivery(drain_all(activemq_cluster, unique_queue), confirmed, set(confirmed) - before)


def test_close_from_another_thread_ends_blocked_senders(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    conn = connected_then_all_down(activemq_cluster, FAST)
    # Four senders block (every broker is down) with no timeout of their own.
    producers = [Producer(conn, unique_queue, prefix=f"b{n}", timeout=None) for n in range(4)]
    for producer in producers:
        producer.start()
    closer = threading.Thread(target=conn.close, name="test-closer")
    closer.start()
    closer.join(SAFETY)
    assert not closer.is_alive(), "close() did not return"
    # close() joined the library's threads before returning, and woke every blocked sender.
    assert library_threads() == []
    for producer in producers:
        producer.join(SAFETY)
        assert not producer.is_alive()
        assert isinstance(producer.error, ConnectionClosed)
        assert producer.confirmed == []
    leaks.assert_clean()
