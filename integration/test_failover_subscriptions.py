"""Subscriptions outlive the broker they were made on: restored, same id, on the next broker.

Queue subscriptions (client and auto acknowledgement), topic subscriptions and an ActiveMQ
durable topic subscription are checked against killed and restarted brokers, and an ack for a
message of a dead session is dropped (``AckDropped``) instead of reaching the new broker,
which would know nothing of it. RabbitMQ is covered with pre-declared durable queues.
"""

from __future__ import annotations

import uuid

import pytest

from failover_client import AckDropped, Connected, Disconnected, FailedOver, FailoverConnection
from failover_client.adapter import AckMode
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    Events,
    Inbox,
    LeakCheck,
    broker_at,
    credentials,
    durable_queue,
    failover_uri,
    send_destination,
)

pytestmark = pytest.mark.integration


def _bodies(prefix: str, count: int = 5) -> list[str]:
    return [f"{prefix}-{n}" for n in range(count)]


@pytest.mark.parametrize("ack", ["client", "client-individual", "auto"])
def test_queue_subscription_is_restored_on_the_next_broker(
    activemq_cluster: Cluster, unique_queue: str, ack: AckMode
) -> None:
    _queue_subscription_survives_a_kill(activemq_cluster, unique_queue, unique_queue, ack)


def test_queue_subscription_is_restored_on_the_next_rabbitmq_node(
    rabbitmq_cluster: Cluster,
) -> None:
    queue = durable_queue(rabbitmq_cluster)
    subscribe_to = send_destination(rabbitmq_cluster[0], queue)
    _queue_subscription_survives_a_kill(rabbitmq_cluster, queue, subscribe_to, "client-individual")


def _queue_subscription_survives_a_kill(
    cluster: Cluster, queue: str, subscribe_to: str, ack: AckMode
) -> None:
    leaks = LeakCheck()
    events = Events()
    inbox = Inbox(ack=True)
    conn = FailoverConnection(
        failover_uri(cluster, FAST), listeners=[events], **credentials(cluster)
    )
    subscription = conn.subscribe(subscribe_to, inbox, ack=ack)
    conn.connect()
    first = broker_at(cluster, conn.broker)
    first.send(queue, _bodies("first"))
    inbox.wait_for_bodies(_bodies("first"))
    mark = events.mark()
    first.kill()
    moved = events.wait_for(FailedOver, after=mark)
    second = broker_at(cluster, moved.to_broker)
    assert second is not first
    second.send(queue, _bodies("second"))
    inbox.wait_for_bodies(_bodies("second"))
    conn.close()
    leaks.assert_clean()

    with inbox.cond:
        messages = list(inbox.messages)
    assert {m.subscription.id for m in messages} == {subscription.id}
    # The brokers saw the same subscription id on both sessions.
    assert {m.headers.get("subscription") for m in messages} == {subscription.id}
    # Every message of the new broker was acknowledged there: nothing is left behind.
    assert second.drain(queue) == []
    assert conn.stats()["acks_dropped"] == 0


def test_ack_for_a_message_of_a_dead_session_is_dropped(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    events = Events()
    held = Inbox(ack=False)
    conn = FailoverConnection(failover_uri(activemq_cluster, FAST), listeners=[events])
    conn.subscribe(unique_queue, held, ack="client-individual")
    conn.connect()
    first = broker_at(activemq_cluster, conn.broker)
    first.send(unique_queue, ["held"])
    held.wait_for_bodies(["held"])
    mark = events.mark()
    first.kill()
    moved = events.wait_for(FailedOver, after=mark)
    after_move = events.mark()

    held.messages[0].ack()  # received on the dead session: must not go to the new broker

    dropped = events.wait_for(AckDropped, after=after_move)
    assert dropped.broker == first.uri()
    assert dropped.message_id == held.messages[0].message_id
    assert not dropped.nack
    assert conn.stats()["acks_dropped"] == 1
    # The new session is unharmed (an ACK for an unknown id would make ActiveMQ close it):
    # it still receives and acknowledges.
    second = broker_at(activemq_cluster, moved.to_broker)
    second.send(unique_queue, ["fresh"])
    held.wait_for_bodies(["fresh"])
    held.messages[-1].ack()
    conn.close()
    assert events.of(Disconnected, after=after_move) == []
    assert second.drain(unique_queue) == []
    # The old broker never saw the ack: the message is still there after its restart.
    first.start()
    assert [m.text for m in first.drain(unique_queue, expect=1)] == ["held"]


def test_topic_subscription_is_restored(activemq_cluster: Cluster) -> None:
    topic = f"/topic/fc-{uuid.uuid4().hex[:12]}"
    events = Events()
    inbox = Inbox()
    with FailoverConnection(failover_uri(activemq_cluster, FAST), listeners=[events]) as conn:
        subscription = conn.subscribe(topic, inbox)
        # Published on the subscribing connection: the broker handles SUBSCRIBE first.
        conn.send(topic, "before")
        inbox.wait_for_bodies(["before"])
        first = broker_at(activemq_cluster, conn.broker)
        mark = events.mark()
        first.kill()
        events.wait_for(FailedOver, after=mark)
        conn.send(topic, "after")
        inbox.wait_for_bodies(["after"])
    assert inbox.bodies() == ["before", "after"]
    assert {m.headers.get("subscription") for m in inbox.messages} == {subscription.id}


def test_durable_topic_subscription_survives_a_broker_restart(activemq_cluster: Cluster) -> None:
    broker = activemq_cluster[0]
    topic = f"/topic/fc-{uuid.uuid4().hex[:12]}"
    uri = f"failover:({broker.uri()})?initialReconnectDelay=10&maxReconnectDelay=1000"
    events = Events()
    inbox = Inbox(ack=False)
    conn = FailoverConnection(
        uri, client_id=f"fc-durable-{uuid.uuid4().hex[:8]}", listeners=[events]
    )
    conn.subscribe(topic, inbox, ack="client-individual", durable_name="keeper")
    conn.connect()
    try:
        conn.send(topic, "kept")
        inbox.wait_for_bodies(["kept"])  # delivered, never acknowledged
        mark = events.mark()
        broker.kill()
        broker.start()
        back = events.wait_for(Connected, after=mark)
        assert back.broker == broker.uri()
        # Only the same durable subscription (client id + name) still holds "kept"; a new
        # subscription would never see a message published before it existed.
        with inbox.cond:
            inbox.cond.wait_for(lambda: inbox.bodies().count("kept") == 2, 30.0)
        assert inbox.bodies().count("kept") == 2
        conn.send(topic, "later")
        inbox.wait_for_bodies(["later"])
        for message in inbox.messages[1:]:
            message.ack()
    finally:
        conn.close()
    assert conn.stats()["acks_dropped"] == 0
