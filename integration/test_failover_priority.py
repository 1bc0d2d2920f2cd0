"""Priority backup: leave the preferred broker when it dies, come back when it returns.

With ``priorityBackup=true`` the first member is preferred. A producer sends confirmed
messages the whole time; the preferred broker is killed (traffic moves on) and restarted
(traffic moves back, ``PriorityRestored``), and no confirmed message is lost across both moves.
Priority tiers (``tiers=``) make the connection climb back one tier at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from failover_client import FailedOver, FailoverConnection, PriorityRestored
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    Events,
    LeakCheck,
    Producer,
    broker_at,
    check_delivery,
    failover_uri,
)

pytestmark = pytest.mark.integration

OPTIONS: dict[str, str | int | float | bool] = {
    "randomize": False,
    "priorityBackup": True,
    "initialReconnectDelay": 10,
    "maxReconnectDelay": 1000,
}


def test_priority_broker_is_left_and_regained_without_loss(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    preferred, fallback = activemq_cluster[0], activemq_cluster[1]
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(failover_uri(activemq_cluster, OPTIONS), listeners=[events])
    conn.connect()
    assert broker_at(activemq_cluster, conn.broker) is preferred
    producer = Producer(conn, unique_queue)
    producer.start()
    producer.wait_confirmed(30)
    with producer.cond:
        before_kill = set(producer.confirmed)
    mark = events.mark()
    preferred.kill()
    moved = events.wait_for(FailedOver, after=mark)
    assert moved.to_broker == fallback.uri()
    producer.wait_confirmed(30)
    with producer.cond:
        before_restore = set(producer.confirmed)
    preferred.start()
    restored = events.wait_for(PriorityRestored, after=mark)
    producer.wait_confirmed(30)
    confirmed = producer.finish()
    conn.close()
    leaks.assert_clean()
    print(f"\n{moved}\n{restored}")

    assert restored.from_broker == fallback.uri()
    assert restored.to_broker == preferred.uri()
    assert broker_at(activemq_cluster, conn.broker) is preferred
    assert len(events.of(PriorityRestored)) == 1
    held = {broker.name: broker.drain(unique_queue) for broker in activemq_cluster}
    # Only what was unconfirmed at the kill may arrive twice (the switch back drains the
    # confirmations before it moves, so it replays nothing).
    delivery = check_delivery(
        [m for messages in held.values() for m in messages], confirmed, set(confirmed) - before_kill
    )
    print(f"duplicates: {sorted(delivery.duplicates)}")
    texts = {name: {m.text for m in messages} for name, messages in held.items()}
    # Traffic really went preferred -> fallback -> preferred.
    assert before_kill <= texts[preferred.name]
    assert texts[fallback.name] & (before_restore - before_kill)
    assert texts[preferred.name] & (set(confirmed) - before_restore)


def test_priority_tiers_are_climbed_back_one_at_a_time(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    top, middle, bottom = activemq_cluster
    tiers = {top.uri().removeprefix("stomp://"): 0, middle.uri().removeprefix("stomp://"): 1}
    tiers[bottom.uri().removeprefix("stomp://")] = 2
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, OPTIONS, order=[2, 1, 0]),  # list order is not tier order
        tiers=tiers,
        listeners=[events],
    )
    conn.connect()
    try:
        assert broker_at(activemq_cluster, conn.broker) is top
        mark = events.mark()
        top.kill()
        assert events.wait_for(FailedOver, after=mark).to_broker == middle.uri()
        middle.kill()
        events.wait_for(FailedOver, _to(bottom.uri()), after=mark)
        middle.start()
        back = events.wait_for(PriorityRestored, after=mark)
        assert (back.from_broker, back.to_broker) == (bottom.uri(), middle.uri())
        top.start()
        back = events.wait_for(PriorityRestored, _to(top.uri()), after=mark)
        assert back.from_broker == middle.uri()
        conn.send(unique_queue, "at the top again")
    finally:
        conn.close()
    assert [m.text for m in top.drain(unique_queue, expect=1)] == ["at the top again"]


def _to(broker: str) -> Callable[[FailedOver | PriorityRestored], bool]:
    return lambda event: event.to_broker == broker
