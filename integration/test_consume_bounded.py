"""Bounded consumption on real brokers: a slow handler leaves the backlog on the broker.

A queue holds 500 messages; a subscription with ``prefetch=10`` and a handler taking 5 ms per
message consumes it over STOMP (ActiveMQ Classic, RabbitMQ). While it runs, a sampler reads
``subscription.in_flight`` (buffered + being handled + unsettled): it never passes 10, so the
rest is still on the broker. Half-way, ``close(drain=...)`` stops it; a second consumer then
counts what the queue holds: every message was either handled or is still there (0 lost), and
none was acknowledged without being handled.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from failover_client import FailoverConnection, Message, MessagesReleased
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    credentials,
    durable_queue,
    failover_uri,
    send_destination,
)

pytestmark = pytest.mark.integration

TOTAL = 500
PREFETCH = 10
HANDLER_SECONDS = 0.005


class SlowHandler:
    """Takes ``HANDLER_SECONDS`` per message and records what it handled, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handled: list[str] = []
        self.most_in_flight = 0

    def __call__(self, message: Message) -> None:
        time.sleep(HANDLER_SECONDS)  # the slow part of a real handler (real brokers, real time)
        with self.lock:
            self.most_in_flight = max(self.most_in_flight, message.subscription.in_flight)
            self.handled.append(message.body.decode())

    def count(self) -> int:
        with self.lock:
            return len(self.handled)


def _consume_half_then_drain(cluster: Cluster, queue: str, subscribe_to: str) -> None:
    broker = cluster[0]
    bodies = [f"m-{n}-{uuid.uuid4().hex[:6]}" for n in range(TOTAL)]
    broker.send(queue, bodies)
    handler = SlowHandler()
    events = Events()
    conn = FailoverConnection(
        failover_uri(cluster, FAST, order=[0]), listeners=[events], **credentials(cluster)
    )
    subscription = conn.subscribe(subscribe_to, handler, prefetch=PREFETCH)
    samples: list[int] = []
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.wait(0.002):  # ends: set below, once the drain is done
            samples.append(subscription.in_flight)

    sampler = threading.Thread(target=sample, name="in-flight-sampler", daemon=True)
    conn.connect()
    sampler.start()
    deadline = time.monotonic() + SAFETY
    while handler.count() < TOTAL // 2:
        assert time.monotonic() < deadline, f"only {handler.count()} handled"
        time.sleep(0.01)  # real brokers: real time
    depth = broker.queue_depth(queue.rsplit("/", 1)[-1])
    handled_then = handler.count()
    closing = time.monotonic()
    conn.close(drain=0.5)
    closed_in = time.monotonic() - closing
    stop_sampling.set()
    sampler.join(5)
    handled = list(handler.handled)
    released = sum(e.count for e in events.of(MessagesReleased))
    left = broker.drain(queue, timeout=SAFETY, idle=1.0)
    remaining = [m.text for m in left]
    print(
        f"\n{broker.kind.name}: most in flight {max(samples)} (sampled {len(samples)}x), "
        f"in the handler {handler.most_in_flight}; handled {len(handled)}, released "
        f"{released}, left on the broker {len(remaining)}; queue depth when {handled_then} "
        f"were handled: {depth}; close(drain=0.5) took {closed_in:.2f} s"
    )
    assert max(samples) <= PREFETCH, "the client held more than prefetch"
    assert handler.most_in_flight <= PREFETCH
    assert handled == bodies[: len(handled)]  # in order
    # 0 lost: every message handled or still on the broker.
    assert set(handled) | set(remaining) == set(bodies)
    # Nothing acknowledged unhandled: what was not handled is still there.
    assert set(bodies) - set(handled) <= set(remaining)
    if depth is not None:  # the backlog stayed on the broker (it counts unacked ones too)
        assert depth >= TOTAL - handled_then - PREFETCH


def test_activemq_slow_handler_is_bounded_and_close_drain_loses_nothing(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    _consume_half_then_drain(activemq_cluster, unique_queue, unique_queue)


def test_rabbitmq_slow_handler_is_bounded_and_close_drain_loses_nothing(
    rabbitmq_cluster: Cluster,
) -> None:
    queue = durable_queue(rabbitmq_cluster)
    _consume_half_then_drain(rabbitmq_cluster, queue, send_destination(rabbitmq_cluster[0], queue))
