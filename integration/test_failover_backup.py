"""``backup=true``: a pre-connected standby takes over when the broker in use dies.

The standby is announced (``StandbyConnected``) before the kill; the fail-over must go to
exactly that broker, and a new standby is then connected to a broker that is neither the dead
one nor the new current one.
"""

from __future__ import annotations

import pytest

from failover_client import FailedOver, FailoverConnection, StandbyConnected, StandbyLost
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    Events,
    LeakCheck,
    broker_at,
    failover_uri,
)

pytestmark = pytest.mark.integration

OPTIONS: dict[str, str | int | float | bool] = {
    "backup": True,
    "initialReconnectDelay": 10,
    "maxReconnectDelay": 1000,
}


def test_killing_the_active_broker_promotes_the_standby(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(failover_uri(activemq_cluster, OPTIONS), listeners=[events])
    conn.connect()
    standby = events.wait_for(StandbyConnected)
    active = broker_at(activemq_cluster, conn.broker)
    assert standby.broker != active.uri()
    assert conn.stats()["standbys"] == 1
    conn.send(unique_queue, "on the first")
    mark = events.mark()
    active.kill()
    moved = events.wait_for(FailedOver, after=mark)
    print(f"\nstandby promoted: {moved}")
    assert moved.from_broker == active.uri()
    assert moved.to_broker == standby.broker
    # A fresh standby, on the one broker that is neither dead nor current.
    refill = events.wait_for(StandbyConnected, after=mark)
    assert refill.broker not in (active.uri(), standby.broker)
    conn.send(unique_queue, "on the standby")
    conn.close()
    leaks.assert_clean()
    new = broker_at(activemq_cluster, standby.broker)
    assert [m.text for m in new.drain(unique_queue, expect=1)] == ["on the standby"]


def test_a_dead_standby_is_reported_and_replaced(activemq_cluster: Cluster) -> None:
    events = Events()
    with FailoverConnection(failover_uri(activemq_cluster, OPTIONS), listeners=[events]) as conn:
        standby = events.wait_for(StandbyConnected)
        active = conn.broker
        mark = events.mark()
        broker_at(activemq_cluster, standby.broker).kill()
        lost = events.wait_for(StandbyLost, after=mark)
        replaced = events.wait_for(StandbyConnected, after=mark)
        assert lost.broker == standby.broker
        assert replaced.broker not in (standby.broker, active)
        assert conn.broker == active  # losing a standby does not move traffic
        assert events.of(FailedOver) == []
