"""Group commit of confirmed sends (``confirmMode``) against real brokers.

On ActiveMQ Classic the default (``auto``) wraps the sends written together in one STOMP
transaction and confirms them with its COMMIT's receipt. These tests check what that must never
change: every confirmed message is stored exactly once when nothing fails, a send the broker
refuses inside a transaction fails alone (the others of its transaction are sent again one by
one and confirmed), and RabbitMQ, whose COMMIT receipt does not mean "stored", keeps one receipt
per send.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future

import pytest

from failover_client import FailoverConnection, SendRejected
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    SAFETY,
    check_delivery,
    credentials,
    drain_all,
    failover_uri,
    send_destination,
)

pytestmark = pytest.mark.integration

# ActiveMQ refuses a send to a temporary queue that does not exist inside the broker (not in
# its STOMP layer), so inside a transaction it marks the transaction rollback-only and then
# refuses the COMMIT: the path a refused send in a batch takes.
MISSING_TEMP_QUEUE = "/remote-temp-queue/ID:nohost-1-1-1:1:1"


def _batching(conn: FailoverConnection) -> bool:
    """Whether the session in use group-commits (read from the adapter's session)."""
    slot = conn._state.current  # the adapter's mode is not public API
    assert slot is not None
    assert slot.session is not None
    return bool(slot.session.batching)  # type: ignore[attr-defined]


def test_activemq_batches_and_stores_every_confirmed_message_once(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    total = 3000
    with FailoverConnection(
        failover_uri(activemq_cluster, FAST, order=[0]), **credentials(activemq_cluster)
    ) as conn:
        assert _batching(conn)
        futures = [conn.send_async(unique_queue, f"g-{n}") for n in range(total)]
        conn.flush(timeout=SAFETY)
        assert all(f.exception() is None for f in futures)
    delivery = check_delivery(
        drain_all(activemq_cluster, unique_queue), [f"g-{n}" for n in range(total)]
    )
    assert sum(delivery.copies.values()) == total  # nothing failed, so nothing is duplicated


def test_receipt_mode_turns_batching_off(activemq_cluster: Cluster) -> None:
    with FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "confirmMode": "receipt"}, order=[0]),
        **credentials(activemq_cluster),
    ) as conn:
        assert not _batching(conn)


def test_a_send_refused_inside_a_transaction_fails_alone(
    activemq_cluster: Cluster, unique_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A burst with one bad send in the middle. Whether the bad one shares a transaction with
    # others depends on how the writer happened to group the burst, so a few rounds are run
    # until one shows the refused COMMIT; every round must have the same outcome regardless.
    caplog.set_level(logging.INFO, logger="failover_client.stomp")
    good: list[str] = []
    refused_commit = False
    with FailoverConnection(
        failover_uri(activemq_cluster, FAST, order=[0]), **credentials(activemq_cluster)
    ) as conn:
        for round_ in range(5):
            futures: list[tuple[str, Future[None]]] = []
            for n in range(200):
                body = f"r{round_}-{n}"
                target = MISSING_TEMP_QUEUE if n == 100 else unique_queue
                futures.append((body, conn.send_async(target, body)))
            conn.flush(timeout=SAFETY)
            for body, future in futures:
                error = future.exception(timeout=SAFETY)
                if body.endswith("-100"):
                    assert isinstance(error, SendRejected), f"{body}: {error!r}"
                    assert "does not exist" in str(error)
                else:
                    assert error is None, f"{body}: {error!r}"
                    good.append(body)
            refused_commit = any("COMMIT of" in r.getMessage() for r in caplog.records)
            if refused_commit:
                break
        assert conn.state == "connected"  # the refusal did not cost the connection
    assert refused_commit, "no round put the refused send inside a transaction"
    # A refused COMMIT stored nothing, so its sends written again alone are not duplicates.
    # The broker's ERROR about the bad send may come after that COMMIT's answer and then puts
    # the next transaction in doubt: sends after the bad one may arrive twice, with their id.
    after_bad = [body for body in good if int(body.rsplit("-", 1)[1]) > 100]
    check_delivery(drain_all(activemq_cluster, unique_queue), good, may_duplicate=after_bad)


def test_rabbitmq_keeps_one_receipt_per_send(rabbitmq_cluster: Cluster, unique_queue: str) -> None:
    broker = rabbitmq_cluster[0]
    name = unique_queue.rsplit("/", 1)[-1]
    broker.declare_queue(name)  # type: ignore[attr-defined]
    with FailoverConnection(
        failover_uri(rabbitmq_cluster, FAST, order=[0]), **credentials(rabbitmq_cluster)
    ) as conn:
        assert not _batching(conn)
        destination = send_destination(broker, unique_queue)
        for n in range(50):
            conn.send_async(destination, f"rb-{n}")
        conn.flush(timeout=SAFETY)
    messages = broker.drain(unique_queue, timeout=SAFETY, idle=1.0)
    check_delivery(messages, [f"rb-{n}" for n in range(50)])
