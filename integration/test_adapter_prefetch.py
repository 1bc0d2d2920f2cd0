"""A subscription's prefetch bounds delivery on real brokers, and release() hands messages back.

For each broker and protocol the harness starts (ActiveMQ over STOMP, RabbitMQ over STOMP and
AMQP 1.0; the Debian ActiveMQ has no AMQP module): with ``prefetch=10`` and 200 messages
queued, exactly 10 arrive before any acknowledgement, in ``client-individual`` and ``client``
mode, and acknowledging them lets the next 10 come. "Exactly" is checked after a quiet period
in which an adapter or broker that ignored the window would have delivered more (the broker
has 190 more waiting): a check that can only fail for a real overrun, never time a thing.

The broker facts the adapters rely on are pinned here as well: in ``auto`` mode the STOMP
prefetch headers bound nothing (so the engine subscribes ``auto`` users as
``client-individual``), and ActiveMQ's STOMP NACK dead-letters a message at once (so its
release writes nothing).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from failover_client import BrokerAddress, FailoverOptions
from failover_client.adapter import AckMode, Cancel, Connector, Received, Session, SubscriptionSpec
from failover_client.amqp import AmqpConnector
from failover_client.stomp import StompConnector, _handshake
from failover_client.testing.contract import ContractListener
from integration.test_failover_common import SAFETY, durable_queue, queue_name

if TYPE_CHECKING:
    from failover_client.testing.brokers import Broker, Cluster

pytestmark = pytest.mark.integration

PREFETCH = 10
QUEUED = 200
QUIET = 1.0
"""Seconds in which nothing more may arrive once the window is full: a broker with 190
messages waiting and a free window delivers in milliseconds."""

TARGETS = ["activemq-stomp", "rabbitmq-stomp", "rabbitmq-amqp"]


@dataclass
class Target:
    broker: Broker
    protocol: str
    subscribe_to: str
    publish_to: str

    def connector(self) -> Connector:
        login, passcode = self.broker.credentials or (None, None)
        kind = StompConnector if self.protocol == "stomp" else AmqpConnector
        return kind(
            FailoverOptions(), login=login, passcode=passcode, heartbeat=(0, 0), close_timeout=2.0
        )

    def address(self) -> BrokerAddress:
        endpoint = self.broker.endpoint(self.protocol)
        vhost = self.broker.vhost if self.protocol == "stomp" else None
        params = (("vhost", vhost),) if vhost else ()
        return BrokerAddress(endpoint.scheme, endpoint.host, endpoint.port, params=params)

    def publish(self, bodies: list[bytes]) -> None:
        self.broker.send(self.publish_to, bodies, protocol=self.protocol)

    def drain(self, expect: int | None = None) -> list[bytes]:
        got = self.broker.drain(self.publish_to, expect=expect, protocol=self.protocol)
        return [m.body for m in got]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    kind, protocol = str(request.param).split("-")
    cluster: Cluster = request.getfixturevalue(f"{kind}_cluster")
    queue = durable_queue(cluster)
    subscribe_to = queue
    if kind == "rabbitmq":
        subscribe_to = f"/amq/queue/{queue_name(queue)}"  # pre-declared, durable
    return Target(cluster[0], protocol, subscribe_to, queue)


@contextmanager
def session_of(target: Target, listener: ContractListener) -> Iterator[Session]:
    session = target.connector().connect(
        target.address(), timeout=SAFETY, listener=listener, cancel=Cancel()
    )
    try:
        yield session
    finally:
        session.close()


def subscribe(
    session: Session, listener: ContractListener, target: Target, ack: AckMode, key: int = 0
) -> SubscriptionSpec:
    spec = SubscriptionSpec(f"prefetch-{key}", target.subscribe_to, ack=ack, prefetch=PREFETCH)
    session.subscribe(spec, listener.confirmation(key))
    assert listener.wait_for(lambda: key in listener.confirmations, SAFETY)
    assert listener.confirmations[key] == [None]
    return spec


def count_after_quiet(listener: ContractListener, at_least: int) -> int:
    """Wait for ``at_least`` messages, then for a quiet period; the number that arrived."""
    assert listener.wait_for(lambda: len(listener.messages) >= at_least, SAFETY), (
        f"{len(listener.messages)} of {at_least} messages arrived"
    )
    # Returns early only if the window was overrun; then the assertion after it fails.
    listener.wait_for(lambda: len(listener.messages) > at_least, QUIET)
    return len(listener.messages)


def bodies(count: int) -> list[bytes]:
    return [f"m-{n}".encode() for n in range(count)]


@pytest.mark.parametrize("ack", ["client-individual", "client"])
def test_prefetch_bounds_unacknowledged_deliveries(target: Target, ack: AckMode) -> None:
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, ack)
        target.publish(bodies(QUEUED))
        assert count_after_quiet(listener, PREFETCH) == PREFETCH
        first = list(listener.messages)
        if ack == "client":
            session.ack(first[-1])  # cumulative: the whole window
        else:
            for message in first:
                session.ack(message)
        assert count_after_quiet(listener, 2 * PREFETCH) == 2 * PREFETCH
        assert [m.body for m in listener.messages] == bodies(2 * PREFETCH)
    # The rest stayed on the broker (the second window, unacknowledged, went back on close).
    assert len(target.drain(expect=QUEUED - PREFETCH)) == QUEUED - PREFETCH


@pytest.mark.parametrize("kind", ["activemq", "rabbitmq"])
def test_stomp_prefetch_does_not_bound_auto_acknowledgement(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """Why the engine subscribes a user's ``auto`` subscription as ``client-individual``."""
    cluster: Cluster = request.getfixturevalue(f"{kind}_cluster")
    queue = durable_queue(cluster)
    subscribe_to = f"/amq/queue/{queue_name(queue)}" if kind == "rabbitmq" else queue
    target = Target(cluster[0], "stomp", subscribe_to, queue)
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, "auto")
        target.publish(bodies(QUEUED))
        assert listener.wait_for(lambda: len(listener.messages) == QUEUED, SAFETY)


def test_released_messages_come_again_and_are_not_dead_lettered(target: Target) -> None:
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, "client-individual")
        target.publish(bodies(3))
        assert listener.wait_for(lambda: len(listener.messages) >= 3, SAFETY)
        for message in listener.messages[:3]:
            session.release(message)
        # RabbitMQ (NACK, AMQP released) may redeliver on this subscription at once; ActiveMQ
        # returns them when the session ends. Either way all three come again.
    again = ContractListener()
    with session_of(target, again) as session:
        subscribe(session, again, target, "client-individual", key=1)
        assert again.wait_for(lambda: len(again.messages) >= 3, SAFETY)
        assert sorted(m.body for m in again.messages) == bodies(3)
        assert all(m.redelivered for m in again.messages) or target.protocol == "amqp"
        for message in again.messages:
            session.ack(message)


def test_activemq_stomp_nack_dead_letters_at_once(activemq_cluster: Cluster) -> None:
    """The broker fact behind release() writing nothing on ActiveMQ."""
    broker = activemq_cluster[0]
    queue = durable_queue(activemq_cluster)
    target = Target(broker, "stomp", queue, queue)
    marker = f"nacked-{uuid.uuid4().hex[:8]}".encode()
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, "client-individual")
        target.publish([marker])
        assert listener.wait_for(lambda: bool(listener.messages), SAFETY)
        message: Received = listener.messages[0]
        session.nack(message)
        # The NACK is answered as a poison ack: the message is on the dead-letter queue now,
        # while this session is still open, not back on its own queue.
        dead = broker.drain("/queue/ActiveMQ.DLQ", expect=None, idle=1.0)
        assert marker in [m.body for m in dead]
    assert target.drain() == []


@pytest.mark.parametrize("protocol", ["stomp", "amqp"])
def test_a_nack_on_rabbitmq_is_redelivered_on_the_same_subscription(
    rabbitmq_cluster: Cluster, protocol: str
) -> None:
    """RabbitMQ requeues a STOMP NACK; over AMQP a nack settles *released* there, because
    RabbitMQ 3.10 holds a *modified* delivery until the link ends (measured: not redelivered
    on the link within 3 s, back on the queue once the session closed)."""
    queue = durable_queue(rabbitmq_cluster)
    target = Target(rabbitmq_cluster[0], protocol, f"/amq/queue/{queue_name(queue)}", queue)
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, "client-individual")
        target.publish([b"failed-once"])
        assert listener.wait_for(lambda: bool(listener.messages), SAFETY)
        session.nack(listener.messages[0])
        assert listener.wait_for(lambda: len(listener.messages) >= 2, SAFETY)
        assert [m.body for m in listener.messages] == [b"failed-once"] * 2
        assert listener.messages[1].redelivered
        session.ack(listener.messages[1])
    assert target.drain() == []


@pytest.mark.parametrize("kind", ["activemq", "rabbitmq"])
def test_every_brokers_header_at_once_still_bounds_delivery(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A broker whose CONNECTED names no server gets all three headers: each broker reads
    its own and ignores the others (no ERROR, the same bound)."""
    monkeypatch.setattr(_handshake, "broker_kind", lambda server: "unknown")
    cluster: Cluster = request.getfixturevalue(f"{kind}_cluster")
    queue = durable_queue(cluster)
    subscribe_to = f"/amq/queue/{queue_name(queue)}" if kind == "rabbitmq" else queue
    target = Target(cluster[0], "stomp", subscribe_to, queue)
    listener = ContractListener()
    with session_of(target, listener) as session:
        subscribe(session, listener, target, "client-individual")
        target.publish(bodies(5 * PREFETCH))
        assert count_after_quiet(listener, PREFETCH) == PREFETCH
    assert listener.lost == []
