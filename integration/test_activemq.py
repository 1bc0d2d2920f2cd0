"""The harness's ActiveMQ cluster: each broker answers, a killed one refuses, data survives."""

from __future__ import annotations

import socket

import pytest

from failover_client.testing.brokers import Cluster, ClusterPool

pytestmark = pytest.mark.integration


def _refuses(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_each_broker_sends_and_receives_on_its_own(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    for i, broker in enumerate(activemq_cluster):
        assert broker.send(unique_queue, [f"from-{i}-a", f"from-{i}-b"]) == 2
    for i, broker in enumerate(activemq_cluster):
        # Independent brokers: each holds exactly what was sent to it.
        bodies = sorted(m.text for m in broker.drain(unique_queue, expect=2))
        assert bodies == [f"from-{i}-a", f"from-{i}-b"]


def test_killed_broker_refuses_while_others_answer_and_keeps_persistent_messages(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    victim, *others = activemq_cluster
    persistent = [f"p{i}" for i in range(50)]
    victim.send(unique_queue, persistent, persistent=True)
    victim.send(unique_queue, ["transient"], persistent=False)
    old_pid = victim.pid

    victim.kill()

    assert not victim.running()
    for endpoint in victim.endpoints.values():
        assert _refuses(endpoint.host, endpoint.port), endpoint
    for broker in others:
        assert broker.is_up()

    victim.start()

    assert victim.pid not in (None, old_pid)
    bodies = [m.text for m in victim.drain(unique_queue, expect=len(persistent))]
    # Every receipted persistent message is back, once; the non-persistent one died with it.
    assert sorted(bodies) == sorted(persistent)


def test_graceful_stop_and_start_keep_ports_and_messages(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    broker = activemq_cluster[2]
    uris = broker.uri("stomp"), broker.uri("tcp")
    broker.send(unique_queue, ["kept"])

    broker.stop()
    assert not broker.is_up()
    assert _refuses(broker.endpoint().host, broker.endpoint().port)
    broker.start()

    assert (broker.uri("stomp"), broker.uri("tcp")) == uris
    assert [m.text for m in broker.drain(unique_queue, expect=1)] == ["kept"]


def test_queue_depth_counts_waiting_messages(activemq_cluster: Cluster, unique_queue: str) -> None:
    broker = activemq_cluster[0]
    name = unique_queue.removeprefix("/queue/")
    broker.send(unique_queue, ["1", "2", "3"])
    assert broker.queue_depth(name) == 3
    assert len(broker.drain(unique_queue, expect=3)) == 3
    assert broker.queue_depth(name) == 0


def test_failover_uri_lists_members_in_order(activemq_cluster: Cluster) -> None:
    stomp = [f"stomp://127.0.0.1:{b.endpoint('stomp').port}" for b in activemq_cluster]
    assert activemq_cluster.members("stomp") == stomp
    assert activemq_cluster.failover_uri() == f"failover:({','.join(stomp)})"
    openwire = activemq_cluster.failover_uri("tcp", {"randomize": False, "maxReconnectAttempts": 3})
    assert openwire.startswith("failover:(tcp://127.0.0.1:")
    assert openwire.endswith(")?randomize=false&maxReconnectAttempts=3")
    ports = [ep.port for b in activemq_cluster for ep in b.endpoints.values()]
    assert len(ports) == len(set(ports))
    assert all(20000 <= p < 32768 for p in ports)  # below the ephemeral range


def test_heal_resumes_hung_and_restarts_dead_brokers(activemq_cluster: Cluster) -> None:
    dead, hung, fine = activemq_cluster
    dead.kill()
    hung.hang()
    assert not dead.is_up()
    assert not hung.is_up()

    healed = activemq_cluster.heal()

    assert sorted(healed) == sorted([dead.name, hung.name])
    assert all(b.is_up() for b in (dead, hung, fine))


def test_session_reuses_running_clusters(
    broker_pool: ClusterPool, activemq_cluster: Cluster
) -> None:
    # Same spec, same cluster object, same processes: no second start-up per test.
    again = broker_pool.get(activemq_cluster.spec)
    assert again is activemq_cluster
    assert [b.pid for b in again] == [b.pid for b in activemq_cluster]
