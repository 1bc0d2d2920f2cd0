"""The source's driver against real brokers, without Spark: what its cumulative ACKs settle.

The driver (``failover_client.spark._driver``) is called in Spark's order (plan batch N+1,
which takes batch N as committed; the last batch committed by ``commit``), over a real broker's
STOMP port. A cumulative ``client`` ACK settles every earlier delivery of its session, so these
tests check on the broker itself that the committed batches are gone and nothing else is: an
uncommitted batch left by a stopped driver is delivered again to the next one, which drops it
by id and still spools every message exactly once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from failover_client import FailoverConnection
from failover_client.spark import source_options
from failover_client.spark._driver import SourceDriver
from failover_client.spark._source import _open_driver
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import SAFETY, durable_queue, failover_uri

pytestmark = pytest.mark.integration

MESSAGES = 3_000
BATCH = 500


@pytest.fixture(params=["activemq", "rabbitmq"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    found: Cluster = request.getfixturevalue(f"{request.param}_cluster")
    return found


def open_driver(cluster: Cluster, queue: str, checkpoint: Path) -> SourceDriver:
    options = source_options(
        {
            "uri": failover_uri(cluster, order=[0]),
            "destination": queue,
            "checkpointLocation": str(checkpoint),
            "maxMessagesPerBatch": str(BATCH),
        }
    )
    return _open_driver(options)


def run_batches(driver: SourceDriver, start: int, until: int) -> tuple[int, list[str]]:
    """Plan batches as Spark does until the spool reaches ``until``: the last end, and the
    message ids of the batches planned.

    The last batch is planned, not committed (the driver is stopped before Spark commits it).
    """
    deadline = time.monotonic() + SAFETY
    end, ids = start, []
    while end < until:
        assert time.monotonic() < deadline, f"the spool stopped at {end} of {until}"
        new = driver.latest(end, BATCH)
        if new > end:
            for batch in driver.planned(end, new):
                ids += [i for i in driver.spool.ids(batch) if i is not None]
        end = new
    return end, ids


def held_by_broker(cluster: Cluster, queue: str) -> int:
    """How many messages ``queue`` still holds: received and not acknowledged, so the broker
    keeps them (closing the connection hands them back)."""
    with FailoverConnection(failover_uri(cluster, order=[0])) as peek:
        subscription = peek.subscribe(queue, ack="client-individual", prefetch=MESSAGES)
        peek.connect(timeout=SAFETY)
        count = 0
        while subscription.receive(3.0) is not None:  # 3 s without one: that was all
            count += 1
    return count


def test_committed_batches_leave_the_broker_and_an_uncommitted_one_comes_back_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    broker = cluster[0]
    queue = durable_queue(cluster)
    # Sent through the library: each message carries the id a redelivered copy is known by
    # (RabbitMQ's own STOMP message-id differs for every delivery).
    with FailoverConnection(failover_uri(cluster, order=[0])) as producer:
        for n in range(MESSAGES):
            producer.send_async(queue, f"m-{n}".encode(), {"persistent": "true"})
        producer.flush(timeout=SAFETY)
    checkpoint = tmp_path / "checkpoint"

    first = open_driver(cluster, queue, checkpoint)
    try:
        # Every batch but the last is committed by the plan after it; the last one is not.
        stopped_at, first_ids = run_batches(first, 0, 2 * BATCH)
        committed = first.ledger.committed
        assert 0 < committed < stopped_at
    finally:
        first.close()  # confirms the ACKs written; the uncommitted batch stays unacknowledged
    # The ACKs covered exactly the committed batches: not the batch still running, nor what
    # was delivered and not yet taken.
    assert held_by_broker(cluster, queue) == MESSAGES - committed

    second = open_driver(cluster, queue, checkpoint)
    try:
        assert second.position == stopped_at  # the uncommitted batch is still in the spool
        # The broker delivers the uncommitted batch again: dropped by id, not spooled twice.
        end, second_ids = run_batches(second, stopped_at, MESSAGES)
        assert end == MESSAGES
        second.commit(end)
    finally:
        second.close()

    ids = first_ids + second_ids
    assert len(ids) == MESSAGES
    assert len(set(ids)) == MESSAGES
    # Every batch was committed, so acknowledged: nothing is left for another consumer, and
    # nothing was acknowledged before its batch's commit (the redelivered batch came back).
    left = broker.drain(queue, timeout=5.0, idle=1.0)
    assert left == []
