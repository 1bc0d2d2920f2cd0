"""A consumer that holds a whole ActiveMQ Classic backlog unacknowledged gets all of it.

ActiveMQ pages a queue's stored messages in 200 at a time and only when something wakes the
queue; dispatching a page wakes nothing. Without help such a consumer got 200-600 of 3,000
messages, then 250 more every 30 s (the expiry scan), raw stomp.py the same
(docs/receiving.md, "ActiveMQ Classic and consumers that hold their messages"). The STOMP
session wakes the queue itself (``failover_client.stomp._pagein``): these tests hold a backlog
far larger than a page without acknowledging anything, and check that the consumers that wake
the queue take nothing from it.
"""

from __future__ import annotations

import time

import pytest

from failover_client import FailoverConnection
from failover_client.testing.brokers import Cluster
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
