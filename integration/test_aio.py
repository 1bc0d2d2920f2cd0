"""AsyncFailoverConnection against real brokers: kill, hang, priority return, rebalancing move,
cancellation, close with drain, over STOMP and AMQP 1.0 (ActiveMQ Classic and RabbitMQ).

An asyncio producer sends confirmed messages (``await conn.send``) and an asyncio consumer
iterates a subscription while the broker in use is SIGKILLed or SIGSTOPped. Afterwards what the
brokers hold (drained with the raw clients) and what the consumer received are compared with
what ``send`` confirmed: nothing confirmed is lost, and a message seen twice carries its id
both times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from failover_client.policies import weighted_rendezvous_score
from failover_client.uri import broker_key

from failover_client import FailedOver, PriorityRestored, Rebalanced, SendTimeout
from failover_client._events import Event
from failover_client.aio import AsyncFailoverConnection, AsyncMessage
from failover_client.testing.brokers import Cluster, ReceivedMessage
from integration.test_failover_common import (
    FAST,
    SAFETY,
    broker_at,
    check_delivery,
    credentials,
    durable_queue,
    failover_uri,
    queue_name,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")

# The harness runs ActiveMQ Classic with STOMP (and OpenWire) only; AMQP 1.0 is RabbitMQ's.
TARGETS = ["activemq-stomp", "rabbitmq-stomp", "rabbitmq-amqp"]


def _cluster(request: pytest.FixtureRequest, target: str) -> Cluster:
    kind = target.split("-", maxsplit=1)[0]
    cluster: Cluster = request.getfixturevalue(f"{kind}_cluster")
    return cluster


_opened: list[AsyncFailoverConnection] = []


def _connection(
    cluster: Cluster,
    endpoint: str,
    options: dict[str, Any],
    events: list[Event],
    client_id: str | None = None,
) -> AsyncFailoverConnection:
    conn = AsyncFailoverConnection(
        failover_uri(cluster, options, endpoint=endpoint),
        listeners=[events.append],
        client_id=client_id,
        **credentials(cluster),
    )
    _opened.append(conn)
    return conn


def _run(scenario: Coroutine[Any, Any, T]) -> T:
    """Run a scenario; whatever it raised, close every connection it opened (a close is a
    no-op on a closed one), so a failed test leaves no thread behind to fail the next ones."""

    async def guarded() -> T:
        try:
            return await scenario
        finally:
            while _opened:
                await _opened.pop().close()

    return asyncio.run(guarded())


def _addresses(cluster: Cluster, queue: str) -> tuple[str, str]:
    """Where to send and where to subscribe (RabbitMQ wants its pre-declared queue)."""
    if cluster[0].kind.name == "RABBITMQ":
        return f"/amq/queue/{queue}", f"/amq/queue/{queue}"
    return f"/queue/{queue}", f"/queue/{queue}"


def _drain(cluster: Cluster, queue: str, endpoint: str) -> list[ReceivedMessage]:
    found: list[ReceivedMessage] = []
    for broker in cluster:
        found.extend(broker.drain(f"/queue/{queue}", timeout=SAFETY, idle=1.0, protocol=endpoint))
    return found


async def _wait_for(events: list[Event], kind: type[Any], after: int) -> Any:
    async with asyncio.timeout(SAFETY):
        while True:
            for event in events[after:]:
                if isinstance(event, kind):
                    return event
            await asyncio.sleep(0.01)


class _Producer:
    """Awaited confirmed sends, one after another, until stopped."""

    def __init__(self, conn: AsyncFailoverConnection, destination: str) -> None:
        self.conn = conn
        self.destination = destination
        self.confirmed: list[str] = []
        self.stop = False

    async def run(self) -> None:
        number = 0
        while not self.stop:
            number += 1
            body = f"m-{number}"
            await self.conn.send(self.destination, body, message_id=f"id-{number}")
            self.confirmed.append(body)
            await asyncio.sleep(0.002)

    async def until(self, count: int) -> None:
        goal = len(self.confirmed) + count
        async with asyncio.timeout(SAFETY * 3):
            while len(self.confirmed) < goal:
                await asyncio.sleep(0.01)


@pytest.mark.parametrize("target", TARGETS)
def test_a_sigkill_under_an_asyncio_producer_and_consumer_loses_nothing(
    request: pytest.FixtureRequest, target: str
) -> None:
    cluster = _cluster(request, target)
    endpoint = target.split("-")[1]
    queue = queue_name(durable_queue(cluster))
    out, _ = _addresses(cluster, queue)
    consumed_queue = queue_name(durable_queue(cluster))
    c_out, c_into = _addresses(cluster, consumed_queue)
    events: list[Event] = []
    received: list[tuple[str, str | None]] = []

    async def consume(conn: AsyncFailoverConnection) -> None:
        sub = await conn.subscribe(c_into, ack="client-individual", prefetch=20)
        async for message in sub:
            received.append((message.body.decode(), message.message_id))
            await message.ack()

    async def scenario() -> tuple[list[str], list[str], set[str], set[str]]:
        conn = _connection(cluster, endpoint, FAST, events)
        await conn.connect(timeout=SAFETY)
        consumer = asyncio.create_task(consume(conn))
        producer = _Producer(conn, out)
        to_consumer = _Producer(conn, c_out)
        tasks = [asyncio.create_task(producer.run()), asyncio.create_task(to_consumer.run())]
        await producer.until(30)
        before = set(producer.confirmed)
        before_c = set(to_consumer.confirmed)
        victim = broker_at(cluster, conn.broker)
        mark = len(events)
        victim.kill()
        moved = await _wait_for(events, FailedOver, mark)
        assert moved.from_broker.startswith(victim.uri(endpoint))
        await producer.until(30)
        await to_consumer.until(30)
        producer.stop = to_consumer.stop = True
        await asyncio.gather(*tasks)
        # Until everything is in, or nothing more comes for 1 s: a message the killed broker
        # confirmed but had not delivered stays on it (independent ActiveMQ brokers) until it
        # is back, and is counted below from what it holds then.
        async with asyncio.timeout(SAFETY * 3):
            seen, quiet_since = -1, asyncio.get_running_loop().time()
            while not set(to_consumer.confirmed) <= {body for body, _ in received}:
                now = asyncio.get_running_loop().time()
                if len(received) != seen:
                    seen, quiet_since = len(received), now
                elif now - quiet_since > 1.0:
                    break
                await asyncio.sleep(0.05)
        consumer.cancel()
        await conn.close()
        victim.start()
        return producer.confirmed, to_consumer.confirmed, before, before_c

    confirmed, to_consumer, before, before_c = _run(scenario())
    check_delivery(_drain(cluster, queue, endpoint), confirmed, set(confirmed) - before)
    # Every message confirmed to the consumer's queue was received or is still on a broker;
    # a body seen twice came with the same id.
    ids: dict[str, set[str | None]] = {}
    for body, message_id in received:
        ids.setdefault(body, set()).add(message_id)
    assert all(len(seen) == 1 and None not in seen for seen in ids.values()), ids
    left = {m.text for m in _drain(cluster, consumed_queue, endpoint)}
    assert set(to_consumer) <= set(ids) | left, sorted(set(to_consumer) - set(ids) - left)
    assert before_c <= set(ids) | left


def test_a_hung_broker_is_left_by_an_asyncio_producer(activemq_cluster: Cluster) -> None:
    queue = queue_name(durable_queue(activemq_cluster))
    events: list[Event] = []
    options = {**FAST, "heartbeat": "500,500", "connectTimeout": 1000}

    async def scenario() -> tuple[list[str], set[str]]:
        conn = _connection(activemq_cluster, "stomp", options, events)
        await conn.connect(timeout=SAFETY)
        producer = _Producer(conn, f"/queue/{queue}")
        task = asyncio.create_task(producer.run())
        await producer.until(20)
        before = set(producer.confirmed)
        victim = broker_at(activemq_cluster, conn.broker)
        mark = len(events)
        victim.hang()
        try:
            await _wait_for(events, FailedOver, mark)
            await producer.until(20)
        finally:
            victim.resume()
        producer.stop = True
        await task
        await conn.close()
        return producer.confirmed, before

    confirmed, before = _run(scenario())
    messages = _drain(activemq_cluster, queue, "stomp")
    check_delivery(messages, confirmed, set(confirmed) - before)


def test_the_priority_broker_is_regained_under_an_asyncio_producer(
    activemq_cluster: Cluster,
) -> None:
    preferred = activemq_cluster[0]
    queue = queue_name(durable_queue(activemq_cluster))
    events: list[Event] = []
    options = {**FAST, "priorityBackup": True}

    async def scenario() -> tuple[list[str], set[str], PriorityRestored]:
        conn = _connection(activemq_cluster, "stomp", options, events)
        await conn.connect(timeout=SAFETY)
        assert broker_at(activemq_cluster, conn.broker) is preferred
        producer = _Producer(conn, f"/queue/{queue}")
        task = asyncio.create_task(producer.run())
        await producer.until(20)
        before = set(producer.confirmed)
        mark = len(events)
        preferred.kill()
        await _wait_for(events, FailedOver, mark)
        await producer.until(20)
        await asyncio.to_thread(preferred.start)
        restored = await _wait_for(events, PriorityRestored, mark)
        await producer.until(20)
        assert broker_at(activemq_cluster, conn.broker) is preferred
        producer.stop = True
        await task
        await conn.close()
        return producer.confirmed, before, restored

    confirmed, before, restored = _run(scenario())
    assert restored.to_broker == preferred.uri()
    check_delivery(_drain(activemq_cluster, queue, "stomp"), confirmed, set(confirmed) - before)


def _moved_by_a_join(cluster: Cluster) -> str:
    """A client id whose rendezvous ranking is b2 first and b1 second: on b1 while b2 is down,
    moved to b2 when it joins (chosen, not left to the hash, so the join moves this client)."""
    keys = [broker_key(u.hostname or "", u.port or 0) for u in (urlsplit(b.uri()) for b in cluster)]
    for n in range(10_000):  # ends: about one id in six ranks b2, b1 first
        name = f"aio-mover-{n}"
        ranked = sorted(keys, key=lambda k: weighted_rendezvous_score(name, k, 1.0), reverse=True)
        if ranked[:2] == [keys[2], keys[1]]:
            return name
    raise AssertionError(f"no client id ranks {keys[2]} then {keys[1]} first")


def test_a_join_moves_an_asyncio_producer_and_consumer_and_strands_nothing(
    activemq_network: Cluster,
) -> None:
    """``rebalance=true`` on a network of brokers: b2 joins, the connection (a producer and a
    consumer of one queue) moves from b1 to b2, draining b1 on the way out. Every confirmed
    message is received, a message received twice carries its id both times, and b1 is left
    holding nothing."""
    b0, b1, b2 = activemq_network[0], activemq_network[1], activemq_network[2]
    queue = queue_name(durable_queue(activemq_network))
    destination = f"/queue/{queue}"
    events: list[Event] = []
    received: list[tuple[str, str | None]] = []
    options = {
        **FAST,
        "rebalance": True,
        "rebalanceDrainWindow": 200,
        "consumer.drainOnMove": True,
    }

    async def consume(conn: AsyncFailoverConnection) -> None:
        sub = await conn.subscribe(destination, ack="client-individual", prefetch=20)
        async for message in sub:
            received.append((message.body.decode(), message.message_id))
            await message.ack()

    async def scenario() -> tuple[list[str], set[str], Rebalanced]:
        conn = _connection(
            activemq_network, "stomp", options, events, client_id=_moved_by_a_join(activemq_network)
        )
        await conn.connect(timeout=SAFETY)
        assert broker_at(activemq_network, conn.broker) is b1  # its home b2 is down
        consumer = asyncio.create_task(consume(conn))
        producer = _Producer(conn, destination)
        task = asyncio.create_task(producer.run())
        try:
            await producer.until(50)
            before = set(producer.confirmed)
            mark = len(events)
            await asyncio.to_thread(b2.start)
            moved: Rebalanced = await _wait_for(events, Rebalanced, mark)
            await producer.until(50)
            assert broker_at(activemq_network, conn.broker) is b2
            producer.stop = True
            await task
            # Every confirmed message arrives (what b1 held comes by its drain, or the
            # network's bridge to the consumer on b2); a loss fails here on the deadline.
            async with asyncio.timeout(SAFETY * 3):
                while not set(producer.confirmed) <= {body for body, _ in received}:
                    await asyncio.sleep(0.05)
        finally:
            producer.stop = True
            consumer.cancel()
            task.cancel()
        await conn.close(drain=SAFETY)
        return producer.confirmed, before, moved

    b2.stop()  # the broker that joins
    try:
        confirmed, before, moved = _run(scenario())
    finally:
        if not b2.running():
            b2.start()
    assert broker_at(activemq_network, moved.from_broker) is b1
    assert broker_at(activemq_network, moved.to_broker) is b2
    assert before  # sends on both sides of the move
    assert set(confirmed) - before
    assert not [e for e in events if isinstance(e, FailedOver)]  # a planned move, no failure
    ids: dict[str, set[str | None]] = {}
    for body, message_id in received:
        ids.setdefault(body, set()).add(message_id)
    # A body seen twice came with the same id, and that id is the one it was sent with.
    wrong = {b: i for b, i in ids.items() if i != {"id-" + b.removeprefix("m-")}}
    assert not wrong, wrong
    assert set(confirmed) <= set(ids)
    left = {
        name: broker.drain(destination, timeout=SAFETY, idle=1.0)
        for name, broker in (("b0", b0), ("b1", b1), ("b2", b2))
    }
    duplicates = len(received) - len(ids)
    print(
        f"\njoin under asyncio: confirmed={len(confirmed)} received={len(ids)} "
        f"duplicates={duplicates} left="
        + " ".join(f"{name}={len(messages)}" for name, messages in left.items())
    )
    assert left["b1"] == [], f"{len(left['b1'])} message(s) stranded on the broker it left"
    # Anything still elsewhere was received already (a copy, never a loss).
    assert {m.text for messages in left.values() for m in messages} <= set(ids)


@pytest.mark.parametrize("target", ["activemq-stomp", "rabbitmq-amqp"])
def test_cancelled_sends_mid_flight_are_written_once_or_not_at_all(
    request: pytest.FixtureRequest, target: str
) -> None:
    cluster = _cluster(request, target)
    endpoint = target.split("-")[1]
    queue = queue_name(durable_queue(cluster))
    out, _ = _addresses(cluster, queue)
    events: list[Event] = []

    async def scenario() -> tuple[list[str], list[str]]:
        conn = _connection(cluster, endpoint, FAST, events)
        await conn.connect(timeout=SAFETY)
        confirmed: list[str] = []
        cancelled: list[str] = []
        for number in range(200):
            body = f"c-{number}"
            send = asyncio.create_task(conn.send(out, body, message_id=f"cid-{number}"))
            if number % 2:
                await asyncio.sleep(0)  # cancelled before or after its write
                send.cancel()
            try:
                await send
                confirmed.append(body)
            except asyncio.CancelledError:
                cancelled.append(body)
        await conn.flush(timeout=SAFETY)  # the cancelled ones in doubt get their answer too
        assert conn.stats()["in_flight"] == 0
        await conn.close()
        return confirmed, cancelled

    confirmed, cancelled = _run(scenario())
    assert cancelled
    messages = _drain(cluster, queue, endpoint)
    delivery = check_delivery(messages, confirmed)
    # A cancelled send arrived once (it was written) or not at all; never twice.
    assert set(delivery.copies) <= set(confirmed) | set(cancelled)


@pytest.mark.parametrize("target", ["activemq-stomp", "rabbitmq-amqp"])
def test_close_with_drain_finishes_handlers_and_confirmations(
    request: pytest.FixtureRequest, target: str
) -> None:
    cluster = _cluster(request, target)
    endpoint = target.split("-")[1]
    queue = queue_name(durable_queue(cluster))
    out, into = _addresses(cluster, queue)
    events: list[Event] = []
    handled: list[str] = []

    async def handler(message: AsyncMessage) -> None:
        await asyncio.sleep(0.01)
        handled.append(message.body.decode())

    async def scenario() -> list[asyncio.Future[None]]:
        conn = _connection(cluster, endpoint, FAST, events)
        await conn.connect(timeout=SAFETY)
        await conn.subscribe(into, handler, prefetch=10)
        pending = [await conn.submit(out, f"d-{n}") for n in range(30)]
        async with asyncio.timeout(SAFETY):
            while len(handled) < 5:
                await asyncio.sleep(0.01)
        await conn.close(drain=SAFETY)
        return pending

    pending = _run(scenario())
    assert all(future.result() is None for future in pending)
    left = {m.text for m in _drain(cluster, queue, endpoint)}
    # Everything sent was either handled (and acknowledged) or is still on the broker.
    assert {f"d-{n}" for n in range(30)} <= set(handled) | left
    assert not set(handled) & left, "a handled message was not acknowledged"


def test_a_send_timeout_while_every_broker_is_down(activemq_cluster: Cluster) -> None:
    events: list[Event] = []
    options = {**FAST, "timeout": 5000}

    async def scenario() -> None:
        conn = _connection(activemq_cluster, "stomp", options, events)
        await conn.connect(timeout=SAFETY)
        for broker in activemq_cluster:
            await asyncio.to_thread(broker.kill)
        send = asyncio.create_task(conn.send("/queue/none", "x"))
        await asyncio.sleep(0.05)
        assert not send.done()  # it waits for a broker, and this coroutine ran meanwhile
        with pytest.raises(SendTimeout, match="not connected"):
            await send
        await conn.close()
        for broker in activemq_cluster:
            await asyncio.to_thread(broker.start)

    _run(scenario())
