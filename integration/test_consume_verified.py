"""Verified consumption on real brokers: a deaf session is found by its canary, a deleted queue
by the broker's notice; either way the connection moves and no message is lost.

Deaf: a FaultProxy in front of broker 0 drops every delivery to the client
(``drop_deliveries()``) while heart-beats, receipts and the rest pass, so only the canary
(``consumer.canaryInterval``) can tell. A producer writes straight to broker 0 before, during
and after; the consumer acknowledges each message (``client-individual``), so what the proxy
dropped is still the broker's, redelivered once the deaf session is closed. Once the consumer
has moved, the proxy heals and the second broker is cut off, so the consumer returns to broker 0
and reads what waited there: every id produced must arrive.

Deleted queue (RabbitMQ): over STOMP the broker says so (an ERROR that cancels the
subscription); over AMQP 1.0 RabbitMQ 3.10 sends no detach and the connection simply stops
delivering, which the canary finds. Either way the connection reports it, fails over and
re-subscribes, and later messages arrive.

Detection times are printed (``-s``), never asserted.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from failover_client import (
    Disconnected,
    FailedOver,
    FailoverConnection,
    SessionDeaf,
)
from failover_client.testing.brokers import Cluster, FaultProxy, proxied_failover_uri
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    Inbox,
    broker_at,
    credentials,
    durable_queue,
    failover_uri,
)

pytestmark = pytest.mark.integration

CANARY_MS = 1000
HEARTBEAT = {"stomp": "500,500", "amqp": "10000,10000"}
"""RabbitMQ counts AMQP heart-beats in whole seconds (under one it sends none), and its AMQP
heart-beats flow only while nothing else does: a broker busy sending deliveries the proxy drops
sends no empty frame, so a short idle timeout would notice the fault before the canary does."""


def options(protocol: str) -> dict[str, str | int | float | bool]:
    return {
        **FAST,
        "heartbeat": HEARTBEAT[protocol],
        "connectTimeout": 1000,
        "consumer.canaryInterval": CANARY_MS,
    }


RATE = 100.0
"""Messages a second the producer writes to broker 0."""


class PacedProducer(threading.Thread):
    """Sends ``<prefix>-<n>`` to ``destination`` at :data:`RATE` until stopped; keeps what was
    confirmed."""

    def __init__(self, connection: FailoverConnection, destination: str, prefix: str) -> None:
        super().__init__(name=f"test-producer-{prefix}", daemon=True)
        self.connection = connection
        self.destination = destination
        self.prefix = prefix
        self.confirmed: list[str] = []
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_requested.wait(1 / RATE):  # ends when finish() asks
            body = f"{self.prefix}-{n}"
            try:
                self.connection.send(self.destination, body, timeout=SAFETY)
            except Exception as exc:
                self.error = exc
                return
            self.confirmed.append(body)
            n += 1

    def finish(self) -> list[str]:
        self._stop_requested.set()
        self.join(SAFETY)
        assert not self.is_alive(), "producer did not stop"
        assert self.error is None, f"producer failed: {self.error!r}"
        return list(self.confirmed)


def _member(proxy: FaultProxy, cluster: Cluster) -> str:
    vhost = cluster[0].vhost
    return proxy.uri() + (f"?vhost={vhost}" if vhost else "")


def _deaf_session_moves_and_loses_nothing(
    cluster: Cluster, protocol: str, consume_at: str, send_to: str, label: str
) -> None:
    proxies = [FaultProxy(b.endpoint(protocol), rng=random.Random(5)) for b in cluster.brokers[:2]]
    events = Events()
    consumer = FailoverConnection(
        proxied_failover_uri([_member(p, cluster) for p in proxies], options(protocol)),
        listeners=[events],
        **credentials(cluster),
    )
    producer_conn = FailoverConnection(
        failover_uri(cluster, FAST, order=[0], endpoint=protocol), **credentials(cluster)
    )
    inbox = Inbox(ack=True)
    producer: PacedProducer | None = None
    try:
        consumer.connect()
        assert (consumer.broker or "").startswith(proxies[0].uri())
        subscription = consumer.subscribe(consume_at, inbox, ack="client-individual")
        subscription.wait_active(SAFETY)
        producer_conn.connect()
        producer = PacedProducer(producer_conn, send_to, label)
        producer.start()
        inbox.wait_for_bodies([f"{label}-{n}" for n in range(50)])
        health = consumer.health()
        print(f"\n{label}: before: {health}")
        assert health.ready
        assert health.canary_round_trip is not None

        mark = events.mark()
        started = time.monotonic()
        proxies[0].drop_deliveries()
        deaf = events.wait_for(SessionDeaf, after=mark)
        moved = events.wait_for(FailedOver, after=mark)
        detected = events.time_of(deaf) - started
        print(
            f"{label}: deaf after {1000 * detected:.0f} ms (canary {CANARY_MS} ms x 2, silent"
            f" for {1000 * deaf.silent_for:.0f} ms), moved after"
            f" {1000 * (events.time_of(moved) - started):.0f} ms to {moved.to_broker};"
            f" {proxies[0].deliveries_dropped} delivery frames dropped"
        )
        assert deaf.broker.startswith(proxies[0].uri())
        assert moved.to_broker.startswith(proxies[1].uri())
        subscription.wait_active(SAFETY)
        assert consumer.health().ready
        time.sleep(2.0)  # the producer goes on writing to broker 0 meanwhile ("after")
        confirmed = producer.finish()

        # Back to broker 0, which holds what was dropped and what came after.
        mark = events.mark()
        proxies[0].heal()
        proxies[1].partition()
        back = events.wait_for(
            FailedOver, lambda e: e.to_broker.startswith(proxies[0].uri()), after=mark
        )
        print(f"{label}: back on {back.to_broker}; {len(confirmed)} produced")
        inbox.wait_for_bodies(confirmed)
        received = set(inbox.bodies())
        lost = sorted(set(confirmed) - received)
        print(
            f"{label}: {len(received & set(confirmed))} of {len(confirmed)} ids received,"
            f" {len(lost)} lost, {len(inbox.bodies()) - len(received)} duplicates"
        )
        assert lost == []
    finally:
        if producer is not None and producer.is_alive():
            producer.finish()
        consumer.close()
        producer_conn.close()
        for proxy in proxies:
            proxy.close()


def test_a_deaf_stomp_session_on_activemq_is_found_by_its_canary(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    _deaf_session_moves_and_loses_nothing(
        activemq_cluster, "stomp", unique_queue, unique_queue, "activemq-stomp-deaf"
    )


def test_a_deaf_amqp_session_on_rabbitmq_is_found_by_its_canary(rabbitmq_cluster: Cluster) -> None:
    queue = durable_queue(rabbitmq_cluster).removeprefix("/queue/")
    address = f"/amq/queue/{queue}"
    _deaf_session_moves_and_loses_nothing(
        rabbitmq_cluster, "amqp", address, address, "rabbitmq-amqp-deaf"
    )


def _deleted_queue_is_reported_and_resubscribed(cluster: Cluster, protocol: str) -> None:
    name = f"fc-deleted-{uuid.uuid4().hex[:12]}"
    for broker in cluster:
        broker.declare_queue(name)  # type: ignore[attr-defined]
    address = f"/amq/queue/{name}"
    events = Events()
    conn = FailoverConnection(
        failover_uri(cluster, options(protocol), endpoint=protocol),
        listeners=[events],
        **credentials(cluster),
    )
    inbox = Inbox(ack=True)
    label = f"rabbitmq-{protocol}-queue-deleted"
    try:
        conn.connect()
        subscription = conn.subscribe(address, inbox, ack="client-individual")
        subscription.wait_active(SAFETY)
        conn.send(address, f"{label}-first")
        inbox.wait_for_bodies([f"{label}-first"])
        victim = broker_at(cluster, conn.broker)
        mark = events.mark()
        started = time.monotonic()
        victim.delete_queue(name)  # type: ignore[attr-defined]
        deleted = time.monotonic()  # rabbitmqctl starts a VM: the queue went in between
        lost = events.wait_for(Disconnected, after=mark)
        moved = events.wait_for(FailedOver, after=mark)
        print(
            f"\n{label}: rabbitmqctl took {1000 * (deleted - started):.0f} ms; noticed"
            f" {1000 * (events.time_of(lost) - deleted):.0f} ms after it returned, moved after"
            f" {1000 * (events.time_of(moved) - deleted):.0f} ms to {moved.to_broker};"
            f" cause: {lost.cause}"
        )
        assert lost.broker == moved.from_broker
        subscription.wait_active(SAFETY)  # re-subscribed where the queue still exists
        later = [f"{label}-later-{n}" for n in range(10)]
        for body in later:
            conn.send(address, body)
        inbox.wait_for_bodies(later)
        deaf = events.of(SessionDeaf, after=mark)
        print(
            f"{label}: {len(later)} of {len(later)} later messages arrived; noticed by"
            f" {'the canary' if deaf else 'the broker'}"
        )
        if protocol == "stomp":
            assert not deaf  # RabbitMQ's STOMP says so with an ERROR: no canary needed
        # RabbitMQ 3.10's AMQP 1.0 plugin sends no detach: its connection stops delivering
        # (every link of it, the canary's too) and only the canary can tell.
    finally:
        conn.close()


def test_a_queue_deleted_under_a_rabbitmq_stomp_subscription(rabbitmq_cluster: Cluster) -> None:
    _deleted_queue_is_reported_and_resubscribed(rabbitmq_cluster, "stomp")


def test_a_queue_deleted_under_a_rabbitmq_amqp_subscription(rabbitmq_cluster: Cluster) -> None:
    _deleted_queue_is_reported_and_resubscribed(rabbitmq_cluster, "amqp")
