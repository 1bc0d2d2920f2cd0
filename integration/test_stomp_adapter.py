"""The STOMP adapter against real brokers: handshake, receipts, subscriptions, kill, hang.

Latencies are printed (run with ``-s`` to see them), never asserted: a timed assertion would
depend on the machine. Waits have generous safety timeouts and return as soon as the condition
holds. Every test checks that closing left no adapter thread and no extra socket behind.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from failover_client import (
    AuthenticationFailed,
    BrokerAddress,
    BrokerUnavailable,
    FailoverOptions,
    SendRejected,
)
from failover_client.adapter import Cancel, Received, SubscriptionSpec
from failover_client.stomp import StompConnector, StompSession
from failover_client.testing.brokers import Broker, BrokerKind, Cluster

pytestmark = pytest.mark.integration

SAFETY = 15.0  # seconds; only against a hung test
ADAPTER_THREADS = ("stomp-io", "stomp-heartbeat")


class Recorder:
    """SessionListener that records everything under one condition variable."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list[Received] = []
        self.lost: list[tuple[float, BaseException]] = []

    def on_message(self, session: Any, message: Received) -> None:
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    def on_lost(self, session: Any, cause: BaseException) -> None:
        with self.cond:
            self.lost.append((time.monotonic(), cause))
            self.cond.notify_all()

    def wait_for(self, condition: Callable[[], bool], timeout: float = SAFETY) -> bool:
        with self.cond:
            return self.cond.wait_for(condition, timeout)


class Confirmations:
    """Collects on_confirm outcomes, counting calls per send."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.outcomes: dict[int, list[BaseException | None]] = {}

    def callback(self, key: int) -> Callable[[BaseException | None], None]:
        def confirm(outcome: BaseException | None) -> None:
            with self.cond:
                self.outcomes.setdefault(key, []).append(outcome)
                self.cond.notify_all()

        return confirm

    def wait_all(self, count: int, timeout: float = SAFETY) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.outcomes) >= count, timeout)


def _socket_count() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


def _adapter_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(ADAPTER_THREADS)]


class LeakCheck:
    """Counts sockets when made; ``assert_clean()`` after the adapter closed what it opened.

    Checked right after ``close()`` and before any harness helper runs: the harness's raw
    stomp.py clients close their sockets from their own I/O thread, a moment later.
    """

    def __init__(self) -> None:
        self.sockets = _socket_count()

    def assert_clean(self) -> None:
        assert _adapter_threads() == []
        assert _socket_count() == self.sockets


def stomp_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the adapter logged as errors that did not end a session (a listener's bug, ERROR)."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "failover_client.stomp" and record.levelno >= logging.ERROR
    ]


@pytest.fixture
def leaks() -> LeakCheck:
    return LeakCheck()


def address_of(broker: Broker, endpoint: str = "stomp", **kwargs: Any) -> BrokerAddress:
    ep = broker.endpoint(endpoint)
    params = (("vhost", broker.vhost),) if broker.vhost else ()
    return BrokerAddress(ep.scheme, ep.host, ep.port, params=params, **kwargs)


def connector_for(broker: Broker, **kwargs: Any) -> StompConnector:
    login, passcode = broker.credentials or (None, None)
    return StompConnector(FailoverOptions(), login=login, passcode=passcode, **kwargs)


RABBITMQ_DURABLE_QUEUE = {"durable": "true", "auto-delete": "false", "exclusive": "false"}


def queue_headers(broker: Broker) -> dict[str, str]:
    # RabbitMQ declares a /queue/x on first use; it must be durable and shared, or it vanishes
    # with the connection that declared it (see BROKERS.md).
    return dict(RABBITMQ_DURABLE_QUEUE) if broker.kind is BrokerKind.RABBITMQ else {}


@pytest.fixture(params=["activemq", "rabbitmq"])
def broker(request: pytest.FixtureRequest, broker_cluster: Callable[..., Cluster]) -> Broker:
    size = 3 if request.param == "activemq" else 2  # share the plugin's standard clusters
    return broker_cluster(request.param, size)[0]


# --- handshake, receipts, subscriptions --------------------------------------------------------


def test_handshake_many_outstanding_receipts_and_clean_close(
    broker: Broker, unique_queue: str, leaks: LeakCheck
) -> None:
    listener = Recorder()
    connector = connector_for(broker, heartbeat=(1000, 1000))
    started = time.monotonic()
    session = connector.connect(address_of(broker), timeout=5.0, listener=listener, cancel=Cancel())
    print(f"\n{broker.kind.value}: connected in {1000 * (time.monotonic() - started):.1f} ms")
    confirmations = Confirmations()
    count = 300
    started = time.monotonic()
    for i in range(count):
        session.send(unique_queue, b"m-%d" % i, queue_headers(broker), confirmations.callback(i))
    assert confirmations.wait_all(count)
    elapsed = time.monotonic() - started
    print(f"{broker.kind.value}: {count} confirmed sends, {count / elapsed:.0f} msg/s")
    assert all(v == [None] for v in confirmations.outcomes.values())
    assert session.outstanding == 0
    session.close()
    session.close()
    leaks.assert_clean()
    assert listener.lost == []
    assert sorted(m.body for m in broker.drain(unique_queue, expect=count)) == sorted(
        b"m-%d" % i for i in range(count)
    )


def test_client_individual_ack_and_redelivery(
    broker: Broker, unique_queue: str, leaks: LeakCheck, caplog: pytest.LogCaptureFixture
) -> None:
    connector = connector_for(broker, heartbeat=(0, 0))
    first = Recorder()
    session = connector.connect(address_of(broker), timeout=5.0, listener=first, cancel=Cancel())
    confirmations = Confirmations()
    for i in range(3):
        session.send(unique_queue, b"%d" % i, queue_headers(broker), confirmations.callback(i))
    assert confirmations.wait_all(3)
    spec = SubscriptionSpec(
        id="s1",
        destination=unique_queue,
        ack="client-individual",
        headers=tuple(queue_headers(broker).items()),
    )
    session.subscribe(spec, None)
    assert first.wait_for(lambda: len(first.messages) == 3)
    by_body = {m.body: m for m in first.messages}
    assert not any(m.redelivered for m in first.messages)
    session.ack(by_body[b"0"])
    session.ack(by_body[b"2"])
    session.unsubscribe("s1")
    session.close()  # message 1 was never acknowledged: the broker keeps it

    second = Recorder()
    session = connector.connect(address_of(broker), timeout=5.0, listener=second, cancel=Cancel())
    session.subscribe(spec, None)
    assert second.wait_for(lambda: len(second.messages) == 1)
    (again,) = second.messages
    assert again.body == b"1"
    assert again.redelivered is True
    assert again.message_id is not None
    session.ack(again)
    session.close()
    leaks.assert_clean()
    assert stomp_errors(caplog) == []  # nothing went wrong beside the session's work


def test_activemq_rejected_send_fails_that_confirmation_and_the_session_goes_on(
    activemq_cluster: Cluster, unique_queue: str, leaks: LeakCheck
) -> None:
    broker = activemq_cluster[0]
    listener = Recorder()
    session = connector_for(broker).connect(
        address_of(broker), timeout=5.0, listener=listener, cancel=Cancel()
    )
    confirmations = Confirmations()
    session.send(unique_queue, b"x", {"transaction": "no-such-tx"}, confirmations.callback(0))
    session.send(unique_queue, b"y", {}, confirmations.callback(1))
    assert confirmations.wait_all(2)
    (rejected,) = confirmations.outcomes[0]
    assert isinstance(rejected, SendRejected)
    assert "no-such-tx" in str(rejected)
    # The ERROR names the refused SEND and ActiveMQ keeps the connection: the later send is
    # confirmed on the same session, and nothing is lost or replayed.
    (later,) = confirmations.outcomes[1]
    assert later is None
    assert session.is_open
    assert listener.lost == []
    session.close()
    leaks.assert_clean()


def test_rabbitmq_wrong_credentials_are_authentication_failed(
    rabbitmq_cluster: Cluster, leaks: LeakCheck
) -> None:
    broker = rabbitmq_cluster[0]
    connector = StompConnector(login="guest", passcode="not-the-password")
    with pytest.raises(AuthenticationFailed) as info:
        connector.connect(address_of(broker), timeout=5.0, listener=Recorder(), cancel=Cancel())
    print(f"\nrabbitmq: {info.value}")
    assert "not-the-password" not in str(info.value)
    # Credentials in the member URI beat the connector's.
    session = connector.connect(
        address_of(broker, user="guest", password="guest"),
        timeout=5.0,
        listener=Recorder(),
        cancel=Cancel(),
    )
    session.close()
    leaks.assert_clean()


# --- broker death and hangs --------------------------------------------------------------------


def test_sigkill_is_noticed_at_once_and_each_confirmation_completes_once(
    broker: Broker, unique_queue: str, leaks: LeakCheck
) -> None:
    listener = Recorder()
    session = connector_for(broker, heartbeat=(1000, 1000)).connect(
        address_of(broker), timeout=5.0, listener=listener, cancel=Cancel()
    )
    confirmations = Confirmations()
    sent = 0
    for i in range(200):
        session.send(unique_queue, b"%d" % i, queue_headers(broker), confirmations.callback(i))
        sent += 1
    killed = time.monotonic()
    broker.kill()
    assert listener.wait_for(lambda: bool(listener.lost))
    noticed, cause = listener.lost[0]
    print(f"\n{broker.kind.value}: SIGKILL noticed after {1000 * (noticed - killed):.1f} ms")
    assert isinstance(cause, BrokerUnavailable)
    assert confirmations.wait_all(sent)
    assert all(len(v) == 1 for v in confirmations.outcomes.values())
    assert {type(v[0]) for v in confirmations.outcomes.values()} <= {type(None), BrokerUnavailable}
    with pytest.raises(BrokerUnavailable):
        session.send(unique_queue, b"late", {}, None)
    session.close()
    leaks.assert_clean()
    assert len(listener.lost) == 1


def test_sigstop_is_noticed_by_the_heartbeat_watchdog(broker: Broker, leaks: LeakCheck) -> None:
    listener = Recorder()
    session = connector_for(broker, heartbeat=(1000, 1000)).connect(
        address_of(broker), timeout=5.0, listener=listener, cancel=Cancel()
    )
    assert session.heartbeat_state is not None
    limit = session.heartbeat_state.plan.silence_limit
    hung = time.monotonic()
    broker.hang()
    try:
        assert listener.wait_for(lambda: bool(listener.lost))
        noticed, cause = listener.lost[0]
        print(
            f"\n{broker.kind.value}: SIGSTOP noticed after {noticed - hung:.2f} s "
            f"(silence limit {limit} s, plan {session.heartbeat_state.plan})"
        )
        assert isinstance(cause, BrokerUnavailable)
        assert "presumed hung" in str(cause)
        session.close()
        leaks.assert_clean()
    finally:
        broker.resume()
    assert len(listener.lost) == 1


def test_close_does_not_wait_for_a_hung_activemq(
    activemq_cluster: Cluster, unique_queue: str, leaks: LeakCheck
) -> None:
    broker = activemq_cluster[0]
    listener = Recorder()
    # A close that waited for the DISCONNECT receipt (it used to) would take the whole
    # close_timeout, four times the deadline the test gives close().
    close_timeout = 4 * SAFETY
    session = connector_for(broker, heartbeat=(0, 0), close_timeout=close_timeout).connect(
        address_of(broker), timeout=5.0, listener=listener, cancel=Cancel()
    )
    broker.hang()
    try:
        confirmations = Confirmations()
        session.send(unique_queue, b"x", {}, confirmations.callback(0))
        started = time.monotonic()
        closing = threading.Thread(target=session.close, name="test-close", daemon=True)
        closing.start()
        closing.join(SAFETY)
        assert not closing.is_alive(), f"close() waited for the receipt ({close_timeout} s)"
        print(f"\nclose() with a hung ActiveMQ took {time.monotonic() - started:.3f} s")
        assert confirmations.wait_all(1)
        (outcome,) = confirmations.outcomes[0]
        assert isinstance(outcome, BrokerUnavailable)
        assert listener.lost == []
        leaks.assert_clean()
    finally:
        broker.resume()


def test_connect_to_a_hung_broker_times_out(broker: Broker, leaks: LeakCheck) -> None:
    connector = connector_for(broker, heartbeat=(1000, 1000))
    broker.hang()
    try:
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable, match=r"no CONNECTED frame within 1 s"):
            connector.connect(address_of(broker), timeout=1.0, listener=Recorder(), cancel=Cancel())
        print(
            f"\n{broker.kind.value}: hung broker gave up after {time.monotonic() - started:.3f} s"
        )
        leaks.assert_clean()
    finally:
        broker.resume()


def test_refused_port_is_broker_unavailable(activemq_cluster: Cluster, leaks: LeakCheck) -> None:
    broker = activemq_cluster[1]
    broker.kill()
    with pytest.raises(BrokerUnavailable, match="connection refused during TCP connect"):
        connector_for(broker).connect(
            address_of(broker), timeout=2.0, listener=Recorder(), cancel=Cancel()
        )
    leaks.assert_clean()


def test_send_from_many_threads(broker: Broker, unique_queue: str, leaks: LeakCheck) -> None:
    listener = Recorder()
    session: StompSession = connector_for(broker).connect(
        address_of(broker), timeout=5.0, listener=listener, cancel=Cancel()
    )
    confirmations = Confirmations()
    per_thread, threads = 50, 4

    def produce(t: int) -> None:
        for i in range(per_thread):
            key = t * per_thread + i
            session.send(
                unique_queue, b"%d" % key, queue_headers(broker), confirmations.callback(key)
            )

    workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(SAFETY)
    assert confirmations.wait_all(per_thread * threads)
    assert all(v == [None] for v in confirmations.outcomes.values())
    session.close()
    leaks.assert_clean()
    bodies = sorted(m.body for m in broker.drain(unique_queue, expect=per_thread * threads))
    assert bodies == sorted(b"%d" % k for k in range(per_thread * threads))
