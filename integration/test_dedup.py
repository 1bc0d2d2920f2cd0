"""Replayed copies on real brokers: every copy carries the original's ``failover-message-id``.

A proxy in front of the first broker swallows what the broker sends back, so messages it
stores are never confirmed; the broker is then SIGKILLed and the connection replays them on
the second broker. Both brokers' copies are drained with the raw clients: each replayed
message is stored twice with the same ``failover-message-id``, and no copy carries
``_AMQ_DUPL_ID``: with ``dedup=auto`` it goes only to brokers that may drop copies by it, and
ActiveMQ Classic and RabbitMQ name themselves in their handshakes. The consumer-side
:class:`Deduplicator` then removes every duplicate. On Artemis (only where a Docker engine
answers) the header is there and the broker itself drops the replayed copy.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future

import pytest

from failover_client import Deduplicator, DuplicatesPossible, FailedOver, FailoverConnection
from failover_client.testing.brokers import (
    TO_CLIENT,
    Broker,
    Cluster,
    FaultProxy,
    ReceivedMessage,
    proxied_failover_uri,
)
from integration.test_failover_common import (
    SAFETY,
    Events,
    credentials,
    durable_queue,
    queue_name,
)

pytestmark = pytest.mark.integration

OPTIONS = {
    "randomize": False,
    "initialReconnectDelay": 10,
    "maxReconnectDelay": 200,
    "heartbeat": "2000,2000",
}
BEFORE, STRANDED, AFTER = 20, 20, 20


def _vhost(broker: Broker) -> str:
    return f"?vhost={broker.vhost}" if broker.vhost else ""


def _sends(
    conn: FailoverConnection,
    destination: str,
    prefix: str,
    n: int,
    headers: dict[str, str] | None = None,
) -> list[Future[None]]:
    return [conn.send_async(destination, f"{prefix}-{i}", headers) for i in range(n)]


def _replayed_copies(cluster: Cluster, endpoint: str) -> tuple[list[ReceivedMessage], Events]:
    """The kill run; returns every copy both brokers stored, and the connection's events."""
    first, second = cluster[0], cluster[1]
    destination = durable_queue(cluster)
    send_to = destination
    if first.vhost:  # RabbitMQ: the pre-declared durable queue
        send_to = f"/amq/queue/{queue_name(destination)}"
    events = Events()
    copies: list[ReceivedMessage] = []
    with FaultProxy(first.endpoint(endpoint)) as proxy:
        members = [proxy.uri() + _vhost(first), second.uri(endpoint) + _vhost(second)]
        uri = proxied_failover_uri(members, OPTIONS)
        with FailoverConnection(uri, listeners=[events], **credentials(cluster)) as conn:
            for future in _sends(conn, send_to, "before", BEFORE):
                future.result(SAFETY)
            proxy.one_way(TO_CLIENT)  # the broker stores what follows; its answers vanish
            stranded = _sends(conn, send_to, "stranded", STRANDED)
            # What the first broker stored: the confirmed ones and the stranded ones.
            copies += first.drain(
                destination, timeout=SAFETY, expect=BEFORE + STRANDED, protocol=_proto(endpoint)
            )
            mark = events.mark()
            first.kill()
            events.wait_for(FailedOver, after=mark)
            for future in stranded:
                future.result(SAFETY)  # confirmed by the second broker, after the replay
            for future in _sends(conn, send_to, "after", AFTER):
                future.result(SAFETY)
    first.start()
    copies += second.drain(destination, timeout=SAFETY, idle=1.0, protocol=_proto(endpoint))
    return copies, events


def _proto(endpoint: str) -> str:
    return "amqp" if endpoint == "amqp" else "stomp"


def _check(copies: list[ReceivedMessage]) -> None:
    by_id = Counter(m.headers["failover-message-id"] for m in copies)
    bodies = Counter(m.text for m in copies)
    # Every confirmed message is there; each stranded one twice (the original and its replay).
    assert set(bodies) == {
        *(f"before-{i}" for i in range(BEFORE)),
        *(f"stranded-{i}" for i in range(STRANDED)),
        *(f"after-{i}" for i in range(AFTER)),
    }
    assert {b for b, n in bodies.items() if n > 1} == {f"stranded-{i}" for i in range(STRANDED)}
    for message in copies:
        # Neither broker drops copies by it: the header would only cost them intake.
        assert "_AMQ_DUPL_ID" not in message.headers
    duplicate_ids = {i for i, n in by_id.items() if n > 1}
    assert len(duplicate_ids) == STRANDED
    for dup in duplicate_ids:
        # The replayed copy carries the original's id, with the original's body.
        stored = {m.text for m in copies if m.headers["failover-message-id"] == dup}
        assert len(stored) == 1
    dedup = Deduplicator(window=1000)
    kept = list(dedup.filter(copies))
    assert sorted(m.text for m in kept) == sorted(bodies)
    assert dedup.dropped == STRANDED


def test_activemq_stomp_copies_carry_the_originals_id_and_no_amq_dupl_id(
    activemq_cluster: Cluster,
) -> None:
    copies, events = _replayed_copies(activemq_cluster, "stomp")
    assert "ActiveMQ/5.17" in events.of(DuplicatesPossible)[0].reason
    _check(copies)


def test_rabbitmq_amqp_copies_carry_the_originals_id_and_no_amq_dupl_id(
    rabbitmq_cluster: Cluster,
) -> None:
    copies, events = _replayed_copies(rabbitmq_cluster, "amqp")
    assert "RabbitMQ" in events.of(DuplicatesPossible)[0].reason
    _check(copies)


@pytest.mark.docker
def test_artemis_keeps_one_copy_of_a_replayed_message(artemis_cluster: Cluster) -> None:
    """The connection to the broker that stored the originals is cut before it confirmed
    them; the client reconnects to it and replays, and Artemis drops every copy."""
    broker = artemis_cluster[0]
    destination = f"/queue/dedup-{queue_name(durable_queue(artemis_cluster))}"
    events = Events()
    with FaultProxy(broker.endpoint("stomp")) as proxy:
        uri = proxied_failover_uri([proxy], OPTIONS)
        with FailoverConnection(uri, listeners=[events], **credentials(artemis_cluster)) as conn:
            proxy.one_way(TO_CLIENT)  # the broker stores them; its receipts vanish
            # Artemis makes an address it auto-creates MULTICAST unless told otherwise.
            anycast = {"destination-type": "ANYCAST"}
            stranded = _sends(conn, destination, "stranded", STRANDED, anycast)
            mark = events.mark()
            proxy.heal()
            proxy.reset()  # cut the connection: it comes back to the same broker and replays
            events.wait_for(FailedOver, after=mark)
            for future in stranded:
                future.result(SAFETY)
            assert conn.stats()["replayed"] >= STRANDED
    assert events.of(DuplicatesPossible) == []
    copies = broker.drain(destination, timeout=SAFETY, idle=1.0)
    assert Counter(m.text for m in copies) == Counter(f"stranded-{i}" for i in range(STRANDED))
