"""A FailoverConnection over amqp:// members: confirmed sends across a SIGKILL lose nothing.

Two RabbitMQ nodes; the producer sends confirmed messages while the node in use is killed.
Afterwards both nodes are drained with the raw proton client (not with the library under test)
and compared with what ``send`` confirmed: every confirmed body is there, a body may be there
twice only if it was not yet confirmed when the node died, and every copy carries the id it
was first sent with.
"""

from __future__ import annotations

import pytest

from failover_client import FailedOver, FailoverConnection
from failover_client.testing.brokers import Cluster, ReceivedMessage
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    Inbox,
    LeakCheck,
    Producer,
    broker_at,
    check_delivery,
    credentials,
    durable_queue,
    failover_uri,
    queue_name,
)

pytestmark = pytest.mark.integration


def _drain_all(cluster: Cluster, queue: str) -> list[ReceivedMessage]:
    found: list[ReceivedMessage] = []
    for broker in cluster:
        found.extend(broker.drain(f"/queue/{queue}", timeout=SAFETY, idle=1.0, protocol="amqp"))
    return found


def test_confirmed_sends_across_a_sigkill_lose_nothing(rabbitmq_cluster: Cluster) -> None:
    queue = queue_name(durable_queue(rabbitmq_cluster))
    events = Events()
    leaks = LeakCheck()
    conn = FailoverConnection(
        failover_uri(rabbitmq_cluster, FAST, endpoint="amqp"),
        listeners=[events],
        **credentials(rabbitmq_cluster),
    )
    conn.connect()
    producer = Producer(conn, f"/amq/queue/{queue}")
    producer.start()
    producer.wait_confirmed(50)
    with producer.cond:
        before = set(producer.confirmed)
    victim = broker_at(rabbitmq_cluster, conn.broker)
    mark = events.mark()
    victim.kill()
    moved = events.wait_for(FailedOver, after=mark)
    producer.wait_confirmed(50)
    confirmed = producer.finish()
    conn.close()
    leaks.assert_clean()
    assert moved.from_broker.startswith(victim.uri("amqp"))
    victim.start()
    check_delivery(_drain_all(rabbitmq_cluster, queue), confirmed, set(confirmed) - before)


def test_a_subscription_is_restored_on_the_other_node(rabbitmq_cluster: Cluster) -> None:
    queue = queue_name(durable_queue(rabbitmq_cluster))
    events = Events()
    inbox = Inbox()
    conn = FailoverConnection(
        failover_uri(rabbitmq_cluster, FAST, endpoint="amqp"),
        listeners=[events],
        **credentials(rabbitmq_cluster),
    )
    conn.connect()
    try:
        conn.subscribe(f"/amq/queue/{queue}", inbox)
        conn.send(f"/amq/queue/{queue}", "before")
        inbox.wait_for_bodies(["before"])
        victim = broker_at(rabbitmq_cluster, conn.broker)
        mark = events.mark()
        victim.kill()
        events.wait_for(FailedOver, after=mark)
        conn.send(f"/amq/queue/{queue}", "after")
        inbox.wait_for_bodies(["after"])
    finally:
        conn.close()
