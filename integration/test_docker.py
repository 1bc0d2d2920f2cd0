"""The container backend: same interface; skipped (with the reason) where no engine answers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from failover_client.testing.brokers import BackendUnavailable, BrokerKind, Cluster, choose_backend
from failover_client.testing.brokers._docker import docker_missing

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_artemis_pair_answers_and_survives_kill(
    artemis_cluster: Cluster, unique_queue: str
) -> None:
    first, second = artemis_cluster
    assert first.send(unique_queue, ["a", "b"], protocol="amqp") == 2
    first.kill()
    assert not first.is_up()
    assert second.is_up()
    first.start()
    assert sorted(m.text for m in first.drain(unique_queue, expect=2, protocol="amqp")) == [
        "a",
        "b",
    ]


def test_artemis_hang_is_a_pause(artemis_cluster: Cluster) -> None:
    broker = artemis_cluster[0]
    broker.hang()
    assert broker.running()
    assert not broker.probe(timeout=1.0)
    broker.resume()
    assert broker.is_up()


def test_activemq_classic_container_kill_and_restart(
    broker_cluster: Callable[..., Cluster], unique_queue: str
) -> None:
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 1, backend="docker")
    broker = cluster[0]
    uri = broker.uri("stomp")
    broker.send(unique_queue, ["kept"], persistent=True)
    broker.kill()
    broker.start()
    assert broker.uri("stomp") == uri  # host ports are pinned across restarts
    assert [m.text for m in broker.drain(unique_queue, expect=1)] == ["kept"]


def test_backend_choice_explains_a_missing_engine() -> None:
    # Runs everywhere: with an engine Artemis goes to Docker; without one the error (which the
    # plugin turns into the skip reason of the tests above) says that no engine answered.
    if docker_missing(BrokerKind.ARTEMIS) is None:
        assert choose_backend("artemis") == "docker"
    else:
        with pytest.raises(BackendUnavailable, match=r"artemis.*no Docker engine answers"):
            choose_backend("artemis")
        with pytest.raises(BackendUnavailable, match="no Docker engine answers"):
            choose_backend("activemq", "docker")


def test_failover_connection_over_amqp_on_artemis_survives_a_kill(
    artemis_cluster: Cluster, unique_queue: str
) -> None:
    # Imported here: the other tests of this file run without the AMQP extra.
    import queue  # noqa: PLC0415

    from failover_client import FailoverConnection  # noqa: PLC0415

    login, passcode = artemis_cluster[0].credentials or (None, None)
    members = ",".join(broker.uri("amqp") for broker in artemis_cluster)
    uri = f"failover:({members})?randomize=false&initialReconnectDelay=0"
    inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    with FailoverConnection(uri, login=login, passcode=passcode) as conn:
        conn.connect()
        # Subscriber and sender on the same broker, whatever routing Artemis gives the address.
        conn.subscribe(unique_queue, lambda message: inbox.put(message.body)).wait_active(30)
        conn.send(unique_queue, b"before", timeout=30)
        assert inbox.get(timeout=30) == b"before"
        artemis_cluster.broker_at(conn.broker).kill()
        conn.send(unique_queue, b"after", timeout=30)  # replayed after the failover if in doubt
        assert inbox.get(timeout=30) == b"after"
