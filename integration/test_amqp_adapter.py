"""The AMQP 1.0 adapter against real RabbitMQ nodes: what the contract suite does not cover.

Credentials refused, a killed node (confirmations failed before the loss is reported), a hung
node found by the AMQP idle timeout, and a refused subscription that leaves the session alone.
Waits end as soon as their condition holds; none asserts how long something took.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest

from failover_client import (
    AuthenticationFailed,
    BrokerAddress,
    BrokerUnavailable,
    FailoverOptions,
    SubscriptionRefused,
)
from failover_client.adapter import Cancel, SubscriptionSpec
from failover_client.amqp import AmqpConnector, AmqpSession
from failover_client.testing.contract import ContractListener
from integration.test_failover_common import SAFETY, durable_queue, queue_name

if TYPE_CHECKING:
    from failover_client.testing.brokers import Broker, Cluster

pytestmark = pytest.mark.integration

# RabbitMQ answers refused credentials only after a delay of its own (about 3 s in 3.10):
# the connect deadline must be longer than that, and the idle timeout off, or the client gives
# up first and sees only an unanswered handshake.
SLOW_AUTH_TIMEOUT = 15.0


def _address(broker: Broker, **member: str) -> BrokerAddress:
    endpoint = broker.endpoint("amqp")
    return BrokerAddress(endpoint.scheme, endpoint.host, endpoint.port, **member)


def _connect(
    broker: Broker, listener: ContractListener, heartbeat: tuple[int, int] = (0, 0)
) -> AmqpSession:
    login, passcode = broker.credentials or (None, None)
    connector = AmqpConnector(
        FailoverOptions(), login=login, passcode=passcode, heartbeat=heartbeat, close_timeout=0.5
    )
    return connector.connect(_address(broker), timeout=SAFETY, listener=listener, cancel=Cancel())


def test_wrong_credentials_are_authentication_failed(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    connector = AmqpConnector(FailoverOptions(), heartbeat=(0, 0))
    address = _address(broker, user="guest", password="not-the-password")
    with pytest.raises(AuthenticationFailed) as info:
        connector.connect(
            address, timeout=SLOW_AUTH_TIMEOUT, listener=ContractListener(), cancel=Cancel()
        )
    assert "not-the-password" not in str(info.value)
    assert "not-the-password" not in repr(info.value.__cause__)


def test_a_killed_node_fails_outstanding_confirmations_then_reports_the_loss(
    rabbitmq_cluster: Cluster,
) -> None:
    broker = rabbitmq_cluster[0]
    queue = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    listener = ContractListener()
    session = _connect(broker, listener)
    try:
        broker.hang()  # nothing is confirmed from here on
        for n in range(5):
            session.send(queue, f"m-{n}".encode(), {}, listener.confirmation(n))
        broker.kill()
        assert listener.wait_for(lambda: bool(listener.lost), SAFETY)
    finally:
        session.close()
    assert listener.log == [f"confirm:{n}" for n in range(5)] + ["lost"]
    assert all(isinstance(listener.confirmations[n][0], BrokerUnavailable) for n in range(5))
    (cause,) = listener.lost
    assert isinstance(cause, BrokerUnavailable)
    with pytest.raises(BrokerUnavailable):
        session.send(queue, b"late", {}, None)


def test_a_hung_node_is_found_by_the_idle_timeout(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    listener = ContractListener()
    # A one-second idle timeout: RabbitMQ sends an empty frame every half second while idle.
    session = _connect(broker, listener, heartbeat=(1000, 1000))
    try:
        broker.hang()
        try:
            assert listener.wait_for(lambda: bool(listener.lost), SAFETY)
        finally:
            broker.resume()
    finally:
        session.close()
    (cause,) = listener.lost
    assert isinstance(cause, BrokerUnavailable)
    assert "idle timeout" in str(cause)


def test_a_refused_subscription_leaves_the_session_working(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    queue = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    listener = ContractListener()
    session = _connect(broker, listener)
    try:
        session.subscribe(SubscriptionSpec("good", queue), listener.confirmation(0))
        missing = f"/amq/queue/missing-{uuid.uuid4().hex[:12]}"
        session.subscribe(SubscriptionSpec("bad", missing), listener.confirmation(1))
        assert listener.wait_for(lambda: {0, 1} <= set(listener.confirmations), SAFETY)
        session.send(queue, b"still here", {}, listener.confirmation(2))
        assert listener.wait_for(lambda: bool(listener.messages), SAFETY)
        assert listener.wait_for(lambda: 2 in listener.confirmations, SAFETY)
        assert session.is_open
    finally:
        session.close()
    assert listener.confirmations[0] == [None]
    (refusal,) = listener.confirmations[1]
    assert isinstance(refusal, SubscriptionRefused)
    assert refusal.subscription_id == "bad"
    assert listener.confirmations[2] == [None]
    assert [m.body for m in listener.messages] == [b"still here"]
    assert listener.messages[0].subscription_id == "good"
    assert listener.lost == []


def test_a_nacked_message_comes_again_marked_redelivered(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    queue = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    listener = ContractListener()
    session = _connect(broker, listener)
    try:
        session.subscribe(SubscriptionSpec("s", queue, ack="client"), listener.confirmation(0))
        session.send(queue, b"again", {"failover-message-id": "id-1"}, listener.confirmation(1))
        assert listener.wait_for(lambda: len(listener.messages) == 1, SAFETY)
        first = listener.messages[0]
        session.nack(first)
        assert listener.wait_for(lambda: len(listener.messages) == 2, SAFETY)
        second = listener.messages[1]
        session.ack(second)
    finally:
        session.close()
    assert (first.body, first.redelivered, first.headers["failover-message-id"]) == (
        b"again",
        False,
        "id-1",
    )
    assert (second.body, second.redelivered, second.message_id) == (b"again", True, "id-1")


def test_acks_given_just_before_close_reach_the_broker(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    queue = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    listener = ContractListener()
    session = _connect(broker, listener)
    try:
        spec = SubscriptionSpec("s", queue, ack="client-individual")
        session.subscribe(spec, listener.confirmation(0))
        for n in range(1, 6):
            session.send(queue, f"m-{n}".encode(), {}, listener.confirmation(n))
        assert listener.wait_for(lambda: len(listener.messages) == 5, SAFETY)
        for message in listener.messages:
            session.ack(message)
    finally:
        session.close()  # at once: the acks are still queued for the session's thread
    # Acknowledged, so gone: nothing waits on the queue to be delivered again.
    assert broker.drain(queue.replace("/amq/queue/", "/queue/"), protocol="amqp", idle=1.0) == []


def test_a_new_session_attaches_the_links_its_connector_sent_on(rabbitmq_cluster: Cluster) -> None:
    broker = rabbitmq_cluster[0]
    queue = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    login, passcode = broker.credentials or (None, None)
    connector = AmqpConnector(
        FailoverOptions(), login=login, passcode=passcode, heartbeat=(0, 0), close_timeout=0.5
    )
    listener = ContractListener()

    def connect() -> AmqpSession:
        return connector.connect(
            _address(broker), timeout=SAFETY, listener=listener, cancel=Cancel()
        )

    first = connect()
    try:
        first.send(queue, b"m-0", {}, listener.confirmation(0))
        assert listener.wait_for(lambda: 0 in listener.confirmations, SAFETY)
    finally:
        first.close()
    second = connect()
    try:
        outgoing = second._events.outgoing
        # Attached with the open, before any send.
        assert listener.wait_for(lambda: outgoing.attached() == [queue], SAFETY)
        second.send(queue, b"m-1", {}, listener.confirmation(1))
        assert listener.wait_for(lambda: 1 in listener.confirmations, SAFETY)
        assert outgoing.attached() == [queue]  # the send used the link attached ahead
    finally:
        second.close()
    assert listener.confirmations == {0: [None], 1: [None]}
    assert listener.lost == []
