"""The reconnect loop of ``FailoverConnection`` against real brokers killed for real.

Shown here: a producer keeps going on another broker when the one in use is SIGKILLed; the
attempt limits (``maxReconnectAttempts``, ``startupMaxReconnectAttempts``) give up with every
broker's cause, or connect once a broker comes up; a broker counts only once it finished the
STOMP handshake (a hung broker and a silent socket are skipped); refused credentials stop the
loop instead of retrying. Every test checks that the connection left no thread or socket.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from failover_client import (
    AllBrokersFailed,
    AuthenticationFailed,
    BrokerUnavailable,
    Connected,
    FailedOver,
    FailoverConnection,
    GaveUp,
    ReconnectAttempt,
)
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    LeakCheck,
    Producer,
    broker_at,
    check_delivery,
    drain_all,
    failover_uri,
)

pytestmark = pytest.mark.integration


def test_producer_continues_on_another_broker_after_sigkill(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(failover_uri(activemq_cluster, FAST), listeners=[events])
    conn.connect()
    first = broker_at(activemq_cluster, conn.broker)
    assert first is activemq_cluster[0]
    producer = Producer(conn, unique_queue)
    producer.start()
    producer.wait_confirmed(50)
    with producer.cond:
        confirmed_before_kill = set(producer.confirmed)
    mark = events.mark()
    killed = time.monotonic()
    first.kill()
    moved = events.wait_for(FailedOver, after=mark)
    producer.wait_confirmed(50)
    confirmed = producer.finish()
    conn.close()
    print(f"\nfailed over after {1000 * (events.time_of(moved) - killed):.1f} ms: {moved}")

    assert moved.from_broker == first.uri()
    assert moved.to_broker == activemq_cluster[1].uri()  # randomize=false: the next in order
    assert broker_at(activemq_cluster, conn.broker) is activemq_cluster[1]
    assert conn.stats()["failovers"] == 1
    leaks.assert_clean()
    first.start()
    # A blocking producer has at most one message in flight: the only possible duplicate.
    in_flight = {b for b in confirmed if b not in confirmed_before_kill}
    check_delivery(drain_all(activemq_cluster, unique_queue), confirmed, in_flight)


def test_startup_attempts_give_up_with_every_brokers_cause(activemq_cluster: Cluster) -> None:
    for broker in activemq_cluster:
        broker.kill()
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "startupMaxReconnectAttempts": 2}),
        listeners=[events],
    )
    with pytest.raises(AllBrokersFailed) as info:
        conn.connect()
    conn.close()
    print(f"\n{info.value}")

    assert set(info.value.causes) == set(activemq_cluster.members())
    assert all(isinstance(c, BrokerUnavailable) for c in info.value.causes.values())
    gave_up = events.wait_for(GaveUp)
    assert gave_up.error is info.value
    # Classic semantics: an attempt is one pass over the list; two passes of three brokers.
    assert len(events.of(ReconnectAttempt)) == 2 * len(activemq_cluster)
    leaks.assert_clean()


def test_max_reconnect_attempts_give_up_after_every_broker_died(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "maxReconnectAttempts": 3}), listeners=[events]
    )
    conn.connect()
    conn.send(unique_queue, "before")
    for broker in activemq_cluster:
        broker.kill()
    gave_up = events.wait_for(GaveUp)
    assert isinstance(gave_up.error, AllBrokersFailed)
    assert set(gave_up.error.causes) == set(activemq_cluster.members())
    assert {b for b, _ in gave_up.causes} == set(activemq_cluster.members())
    with pytest.raises(AllBrokersFailed) as info:
        conn.send(unique_queue, "after")
    assert info.value.causes == gave_up.error.causes
    assert info.value.__cause__ is gave_up.error
    assert conn.state == "failed"
    conn.close()
    leaks.assert_clean()


def test_startup_keeps_trying_until_a_broker_comes_up(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    for broker in activemq_cluster:
        broker.kill()
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "startupMaxReconnectAttempts": 10_000}),
        listeners=[events],
    )
    outcome: list[BaseException | None] = []
    connected = threading.Event()

    def connect() -> None:
        try:
            conn.connect()
        except Exception as exc:
            outcome.append(exc)
        else:
            outcome.append(None)
        connected.set()

    thread = threading.Thread(target=connect, name="test-connect")
    thread.start()
    try:
        # Two failed passes over all three prove it is retrying, not waiting idle.
        events.wait_for(ReconnectAttempt, lambda e: e.attempt >= 3)
        assert not connected.is_set()
        late = activemq_cluster[2]
        late.start()
        assert connected.wait(SAFETY)
        assert outcome == [None]
        assert broker_at(activemq_cluster, conn.broker) is late
        joined = events.wait_for(Connected)
        print(f"\nconnected after {joined.attempt} passes, {joined.elapsed:.2f} s")
        assert joined.attempt >= 3
        conn.send(unique_queue, "late")
    finally:
        conn.close()
        thread.join(SAFETY)
    leaks.assert_clean()
    assert [m.text for m in late.drain(unique_queue, expect=1)] == ["late"]


def test_a_hung_broker_is_skipped_within_the_connect_timeout(activemq_cluster: Cluster) -> None:
    hung = activemq_cluster[0]
    hung.hang()  # accepts TCP through the listen backlog, never answers CONNECT
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "connectTimeout": 1000}), listeners=[events]
    )
    started = time.monotonic()
    conn.connect()
    print(f"\nconnected past a hung broker in {time.monotonic() - started:.2f} s")
    try:
        assert broker_at(activemq_cluster, conn.broker) is activemq_cluster[1]
        tried = [e.broker for e in events.of(ReconnectAttempt)]
        assert tried == [hung.uri(), activemq_cluster[1].uri()]
    finally:
        conn.close()
        hung.resume()
    leaks.assert_clean()


@pytest.fixture
def silent_listener() -> Iterator[socket.socket]:
    """A socket that completes TCP handshakes (kernel backlog) and never says a word."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server
    server.close()


def test_a_socket_that_never_speaks_stomp_is_skipped(
    activemq_cluster: Cluster, silent_listener: socket.socket, unique_queue: str
) -> None:
    port = silent_listener.getsockname()[1]
    leaks = LeakCheck()
    events = Events()
    uri = failover_uri(activemq_cluster, {**FAST, "connectTimeout": 1000})
    uri = uri.replace("failover:(", f"failover:(stomp://127.0.0.1:{port},", 1)
    with FailoverConnection(uri, listeners=[events]) as conn:
        assert broker_at(activemq_cluster, conn.broker) is activemq_cluster[0]
        conn.send(unique_queue, "past the silent one")
    tried = [e.broker for e in events.of(ReconnectAttempt)]
    assert tried == [f"stomp://127.0.0.1:{port}", activemq_cluster[0].uri()]
    leaks.assert_clean()


def test_refused_credentials_stop_the_loop(rabbitmq_cluster: Cluster) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(rabbitmq_cluster, FAST),
        login="guest",
        passcode="not-the-password",
        listeners=[events],
    )
    with pytest.raises(AuthenticationFailed) as info:
        conn.connect()
    conn.close()
    print(f"\n{info.value}")
    assert "not-the-password" not in str(info.value)
    # One pass (each node refused once), then a stop, not an endless back-off.
    assert [e.broker for e in events.of(ReconnectAttempt)] == [
        f"{b.uri()}?vhost=/" for b in rabbitmq_cluster
    ]
    assert isinstance(events.wait_for(GaveUp).error, AuthenticationFailed)
    leaks.assert_clean()


def test_one_member_with_wrong_credentials_does_not_stop_the_others(
    rabbitmq_cluster: Cluster,
) -> None:
    bad, good = rabbitmq_cluster
    uri = (
        f"failover:(stomp://guest:wrong@{bad.endpoint().host}:{bad.endpoint().port}?vhost=/,"
        f"{good.uri()}?vhost=/)?randomize=false"
    )
    leaks = LeakCheck()
    events = Events()
    with FailoverConnection(uri, login="guest", passcode="guest", listeners=[events]) as conn:
        assert broker_at(rabbitmq_cluster, conn.broker) is good
    attempts = events.of(ReconnectAttempt)
    assert len(attempts) == 2
    assert "wrong" not in repr(events.log)
    leaks.assert_clean()
