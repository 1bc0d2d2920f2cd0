"""How ``FailoverConnection`` notices a lost broker: SIGKILL by the socket, SIGSTOP by heart-beats.

A SIGKILLed broker's kernel resets the connection: with heart-beats switched off the only way
to notice is the socket, so a Disconnected event proves it. A SIGSTOPped broker keeps the
socket open and silent: only missed heart-beats (500 ms here) tell, and the connection must
move on and keep sending. Detection times are printed (``-s``), not asserted.
"""

from __future__ import annotations

import time

import pytest

from failover_client import BrokerUnavailable, Disconnected, FailedOver, FailoverConnection
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    Events,
    LeakCheck,
    broker_at,
    failover_uri,
)

pytestmark = pytest.mark.integration


def test_sigkill_is_noticed_by_the_socket(activemq_cluster: Cluster, unique_queue: str) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "heartbeat": "0,0"}), listeners=[events]
    )
    conn.connect()
    victim = broker_at(activemq_cluster, conn.broker)
    conn.send(unique_queue, "before")
    mark = events.mark()
    killed = time.monotonic()
    victim.kill()
    lost = events.wait_for(Disconnected, after=mark)
    moved = events.wait_for(FailedOver, after=mark)
    print(
        f"\nSIGKILL noticed after {1000 * (events.time_of(lost) - killed):.1f} ms,"
        f" traffic moved after {1000 * (events.time_of(moved) - killed):.1f} ms"
    )
    assert lost.broker == victim.uri()
    assert isinstance(lost.cause, BrokerUnavailable)
    assert moved.from_broker == victim.uri()
    assert moved.to_broker != victim.uri()
    conn.send(unique_queue, "after")
    conn.close()
    leaks.assert_clean()
    assert [
        m.text for m in broker_at(activemq_cluster, moved.to_broker).drain(unique_queue, expect=1)
    ] == ["after"]


def test_sigstop_is_noticed_by_heartbeats(activemq_cluster: Cluster, unique_queue: str) -> None:
    leaks = LeakCheck()
    events = Events()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "heartbeat": "500,500", "connectTimeout": 1000}),
        listeners=[events],
    )
    conn.connect()
    victim = broker_at(activemq_cluster, conn.broker)
    conn.send(unique_queue, "before")
    mark = events.mark()
    hung = time.monotonic()
    victim.hang()
    try:
        lost = events.wait_for(Disconnected, after=mark)
        moved = events.wait_for(FailedOver, after=mark)
        print(
            f"\nSIGSTOP noticed after {1000 * (events.time_of(lost) - hung):.0f} ms"
            f" (heart-beat 500 ms), moved after {1000 * (events.time_of(moved) - hung):.0f} ms;"
            f" cause: {lost.cause}"
        )
        assert lost.broker == victim.uri()
        assert isinstance(lost.cause, BrokerUnavailable)
        assert moved.to_broker != victim.uri()
        conn.send(unique_queue, "after")  # confirmed by the new broker while the old one hangs
        assert broker_at(activemq_cluster, conn.broker) is not victim
    finally:
        victim.resume()
    conn.close()
    leaks.assert_clean()
    # The hung broker got "before" only; "after" went to the new one.
    assert [m.text for m in victim.drain(unique_queue, expect=1)] == ["before"]
    new = broker_at(activemq_cluster, moved.to_broker)
    assert [m.text for m in new.drain(unique_queue, expect=1)] == ["after"]


def test_heartbeats_keep_an_idle_healthy_connection_up(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    """The control case for the test above: silence without a hang is no reason to move."""
    events = Events()
    # 1 s: the broker is asked for a beat every 0.5 s, ActiveMQ may stay silent for two of
    # those, and the watchdog allows 1.5 s. With 200 ms the same rules left 100 ms between
    # a healthy broker's longest silence and a loss: a loaded machine's scheduling broke that.
    with FailoverConnection(
        failover_uri(activemq_cluster, {**FAST, "heartbeat": "1000,1000"}), listeners=[events]
    ) as conn:
        first = conn.broker
        conn.send(unique_queue, "one")
        idle = events.mark()
        # Watch several of the broker's heart-beat periods on an idle connection: a watchdog
        # that counted them wrong (1.5 of the asked 0.5 s) would report a loss in this window.
        with events.cond:
            lost = events.cond.wait_for(lambda: bool(events.of(Disconnected, after=idle)), 4.0)
        assert not lost
        conn.send(unique_queue, "two")
        assert conn.broker == first
