"""Poison frames on real brokers: a frame the broker answers with ERROR and a closed socket.

ActiveMQ refuses a SEND whose header exceeds its frame limit ("maximum command length
exceeded"); RabbitMQ refuses a SEND, or a SUBSCRIBE, to an exchange that does not exist. Both
then close the connection without naming the frame, which the client sees as a refusal. The
poison frame must fail (SendRejected / SubscriptionRefused) after at most two fail-overs while
the ordinary confirmed sends around it all complete. ActiveMQ names a SUBSCRIBE with a bad
selector in its ERROR: that one is refused at once, with no fail-over.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

import pytest

from failover_client import (
    Disconnected,
    FailoverConnection,
    PoisonQuarantined,
    SendRejected,
    SubscriptionFailed,
    SubscriptionRefused,
)
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

ORDINARY = 50
MAX_FAILOVERS = 2


def _send_around_poison(
    cluster: Cluster,
    destination: str,
    poison_destination: str,
    poison_headers: dict[str, str],
    label: str,
) -> None:
    events = Events()
    started = time.monotonic()
    with FailoverConnection(
        failover_uri(cluster, FAST), listeners=[events], **credentials(cluster)
    ) as conn:
        conn.connect()
        before: list[Future[None]] = [
            conn.send_async(destination, f"before-{n}", timeout=SAFETY)
            for n in range(ORDINARY // 2)
        ]
        poison = conn.send_async(
            poison_destination, "poison", headers=poison_headers, timeout=SAFETY
        )
        after = [
            conn.send_async(destination, f"after-{n}", timeout=SAFETY)
            for n in range(ORDINARY - len(before))
        ]
        with pytest.raises(SendRejected, match="quarantined as poison"):
            poison.result(SAFETY)
        for future in before + after:
            future.result(SAFETY)
        events.wait_for(PoisonQuarantined)
        failovers = len(events.of(Disconnected))
        print(
            f"{label}: poison rejected after {failovers} failover(s); "
            f"{ORDINARY} ordinary sends confirmed in {time.monotonic() - started:.1f}s"
        )
        assert failovers <= MAX_FAILOVERS


def test_activemq_oversized_header_is_quarantined(activemq_cluster, unique_queue):
    _send_around_poison(
        activemq_cluster,
        unique_queue,
        unique_queue,
        {"x-big": "x" * 65536},
        "activemq 64 KB header",
    )


def test_rabbitmq_unknown_exchange_is_quarantined(rabbitmq_cluster):
    destination = send_destination(rabbitmq_cluster[0], durable_queue(rabbitmq_cluster))
    _send_around_poison(
        rabbitmq_cluster,
        destination,
        "/exchange/no-such-exchange/rk",
        {},
        "rabbitmq unknown exchange",
    )


def _subscribe_around_poison(
    cluster: Cluster,
    destination: str,
    poison_destination: str,
    poison_headers: dict[str, str],
    label: str,
) -> int:
    """Subscribe a good and a refused subscription; sends go on; returns the fail-overs."""
    events = Events()
    with FailoverConnection(
        failover_uri(cluster, FAST), listeners=[events], **credentials(cluster)
    ) as conn:
        conn.connect()
        good = conn.subscribe(destination, lambda message: None)
        good.wait_active(SAFETY)
        bad = conn.subscribe(poison_destination, lambda message: None, headers=poison_headers)
        sends = [conn.send_async(destination, f"m-{n}", timeout=SAFETY) for n in range(ORDINARY)]
        with pytest.raises(SubscriptionRefused) as refused:
            bad.wait_active(SAFETY)
        for future in sends:
            future.result(SAFETY)
        failed = events.wait_for(SubscriptionFailed)
        assert failed.subscription_id == bad.id
        good.wait_active(SAFETY)
        conn.send(destination, "after", timeout=SAFETY)
        failovers = len(events.of(Disconnected))
        print(f"{label}: refused after {failovers} failover(s): {refused.value}")
        assert failovers <= MAX_FAILOVERS
        return failovers


def test_activemq_bad_selector_is_refused_by_name_without_a_failover(
    activemq_cluster, unique_queue
):
    failovers = _subscribe_around_poison(
        activemq_cluster,
        unique_queue,
        unique_queue,
        {"selector": "this is not valid((("},
        "activemq bad selector",
    )
    assert failovers == 0  # ActiveMQ names the SUBSCRIBE in its ERROR and keeps the connection


def test_rabbitmq_subscription_to_unknown_exchange_is_quarantined(rabbitmq_cluster):
    destination = send_destination(rabbitmq_cluster[0], durable_queue(rabbitmq_cluster))
    _subscribe_around_poison(
        rabbitmq_cluster,
        destination,
        "/exchange/no-such-exchange/rk",
        {},
        "rabbitmq unknown exchange subscription",
    )
