"""A consumer that holds a whole ActiveMQ Classic backlog unacknowledged gets all of it.

ActiveMQ pages a queue's stored messages in 200 at a time and only when something wakes the
queue; dispatching a page wakes nothing. Without help such a consumer got 200-600 of 3,000
messages, then 250 more every 30 s (the expiry scan), raw stomp.py the same
(docs/receiving.md, "ActiveMQ Classic and consumers that hold their messages"). The STOMP
session wakes the queue itself (``failover_client.stomp._pagein``): these tests hold a backlog
far larger than a page without acknowledging anything, and check that the consumers that wake
the queue take nothing from it; that a wake-up skipped while another thread writes is not lost;
and that a pause in deliveries short of a step (a broker whose pages hold 30 messages, two
wake-ups bring 60) is woken by the session's timer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from failover_client import FailoverConnection, Message
from failover_client.testing.brokers import BrokerKind, Cluster
from integration.test_failover_common import SAFETY, durable_queue, failover_uri

pytestmark = pytest.mark.integration

MESSAGES = 3_000


@pytest.mark.parametrize("ack", ["client-individual", "client"])
def test_a_consumer_holding_every_message_gets_the_whole_backlog(
    activemq_cluster: Cluster, ack: str
) -> None:
    broker = activemq_cluster[0]
    queue = durable_queue(activemq_cluster)
    expected = [f"m-{n}" for n in range(MESSAGES)]
    broker.send(queue, expected)  # stored, confirmed and idle before anyone subscribes
    with FailoverConnection(failover_uri(activemq_cluster, order=[0])) as connection:
        subscription = connection.subscribe(queue, ack=ack, prefetch=MESSAGES)  # type: ignore[arg-type]
        connection.connect(timeout=SAFETY)
        # One deadline for the whole backlog: the 30 s expiry scan alone must not pass it.
        deadline = time.monotonic() + SAFETY
        taken = []
        while len(taken) < MESSAGES:
            message = subscription.receive(max(0.0, deadline - time.monotonic()))
            assert message is not None, f"{len(taken)} of {MESSAGES} came, none acknowledged"
            taken.append(message)
        # Nothing went to the consumers that woke the queue and back: no redelivery, no gap.
        assert sorted(m.body.decode() for m in taken) == sorted(expected)
        assert not any(m.redelivered for m in taken)
    # Nothing was acknowledged: closing the connection left the whole backlog on the queue.
    left = broker.drain(queue, timeout=SAFETY, idle=1.0, expect=MESSAGES)
    assert len(left) == MESSAGES


def test_a_batch_held_for_one_cumulative_ack_while_the_connection_sends_elsewhere(
    activemq_cluster: Cluster,
) -> None:
    """``client`` mode acknowledged once for the whole batch, as the Spark source does, while
    another thread of the same connection keeps writing SENDs to another queue: they contend
    for the write lock with the wake-ups (which are then skipped, and retried) and wake only
    their own queue."""
    broker = activemq_cluster[0]
    queue, elsewhere = durable_queue(activemq_cluster), durable_queue(activemq_cluster)
    expected = [f"m-{n}" for n in range(MESSAGES)]
    broker.send(queue, expected)
    stop = threading.Event()
    with FailoverConnection(failover_uri(activemq_cluster, order=[0])) as connection:
        subscription = connection.subscribe(queue, ack="client", prefetch=MESSAGES)
        connection.connect(timeout=SAFETY)

        def send_elsewhere() -> None:
            while not stop.is_set():
                connection.send(elsewhere, b"x", confirm=False)

        sender = threading.Thread(target=send_elsewhere, name="send-elsewhere", daemon=True)
        sender.start()
        try:
            taken = _receive(subscription.receive, MESSAGES, time.monotonic() + SAFETY)
        finally:
            stop.set()
            sender.join(SAFETY)
        assert sorted(m.body.decode() for m in taken) == sorted(expected)
        taken[-1].ack()  # client mode: acknowledges every message received before it
        assert connection.confirm_settled(taken[-1:], SAFETY).confirmed == 1
    assert broker.drain(queue, timeout=5.0, idle=1.0) == []


EXPIRY_SCAN = 30.0
"""ActiveMQ's expiry scan runs every 30 s from a queue's creation and pages messages in too."""

SMALL_PAGE = 30
"""A ``maxPageSize`` under half a step: a SUBSCRIBE/UNSUBSCRIBE pair brings 60 messages, so the
count never reaches :data:`PAGE_IN_STEP` and only a pause's pair wakes the queue again."""


def test_a_pause_short_of_a_step_is_woken(broker_cluster: Callable[..., Cluster]) -> None:
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 1, max_page_size=SMALL_PAGE)
    broker = cluster[0]
    queue = durable_queue(cluster)
    backlog = 20 * SMALL_PAGE
    expected = [f"m-{n}" for n in range(backlog)]
    created = time.monotonic()  # the first send creates the queue and starts its expiry timer
    broker.send(queue, expected)
    with FailoverConnection(failover_uri(cluster, order=[0])) as connection:
        subscription = connection.subscribe(queue, ack="client-individual", prefetch=MESSAGES)
        connection.connect(timeout=SAFETY)
        # Before the queue's first expiry scan only wake-ups from the client page messages in:
        # without the pauses' pairs, deliveries stopped at 30-60 here. 0.5 s pauses for 10
        # pairs leave the deadline generous.
        taken = _receive(subscription.receive, backlog, created + EXPIRY_SCAN - 5.0)
        assert sorted(m.body.decode() for m in taken) == sorted(expected)
        assert not any(m.redelivered for m in taken)
    left = broker.drain(queue, timeout=SAFETY, idle=1.0, expect=backlog)
    assert len(left) == backlog


def _receive(
    receive: Callable[[float], Message | None], count: int, deadline: float
) -> list[Message]:
    taken: list[Message] = []
    while len(taken) < count:
        message = receive(max(0.0, deadline - time.monotonic()))
        assert message is not None, f"{len(taken)} of {count} came, none acknowledged"
        taken.append(message)
    return taken
