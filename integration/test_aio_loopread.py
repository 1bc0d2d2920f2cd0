"""A STOMP session of an AsyncFailoverConnection is read on its event loop: no reader thread.

The asyncio connection has its plain TCP STOMP sessions read by the loop itself
(``failover_client.stomp._loopread``). Against real ActiveMQ Classic brokers: while connected
there is no ``stomp-io`` thread in the process, a SIGKILL of the broker in use still fails the
connection over (the end of the stream is read on the loop), the new session is read on the
loop too, and nothing the producer had confirmed is lost.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from failover_client import FailedOver
from failover_client._events import Event
from failover_client.aio import AsyncFailoverConnection
from failover_client.testing.brokers import Cluster
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


def _reader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("stomp-io")]


def test_an_asyncio_stomp_session_has_no_reader_thread_and_still_fails_over(
    activemq_cluster: Cluster,
) -> None:
    queue = queue_name(durable_queue(activemq_cluster))
    events: list[Event] = []
    confirmed: list[str] = []
    before: set[str] = set()
    seen: dict[str, list[str]] = {}

    async def scenario() -> None:
        conn = AsyncFailoverConnection(
            failover_uri(activemq_cluster, {**FAST, "heartbeat": "500,500"}, endpoint="stomp"),
            listeners=[events.append],
            **credentials(activemq_cluster),
        )
        try:
            await conn.connect(timeout=SAFETY)
            seen["connected"] = _reader_threads()
            for number in range(50):
                await conn.send(f"/queue/{queue}", f"m-{number}")
                confirmed.append(f"m-{number}")
            before.update(confirmed)
            mark = len(events)
            victim = broker_at(activemq_cluster, conn.broker)
            await asyncio.to_thread(victim.kill)
            number = 50
            async with asyncio.timeout(SAFETY):
                while not any(isinstance(e, FailedOver) for e in events[mark:]):
                    await conn.send(f"/queue/{queue}", f"m-{number}")
                    confirmed.append(f"m-{number}")
                    number += 1
            for later in range(number, number + 50):
                await conn.send(f"/queue/{queue}", f"m-{later}")
                confirmed.append(f"m-{later}")
            seen["failed over"] = _reader_threads()
        finally:
            await conn.close()

    assert _reader_threads() == []  # none left by an earlier test
    asyncio.run(scenario())
    assert seen == {"connected": [], "failed over": []}
    assert _reader_threads() == []
    messages = []
    for broker in activemq_cluster:
        if not broker.running():
            broker.start()  # it holds what it confirmed before the kill
        messages.extend(broker.drain(f"/queue/{queue}", timeout=SAFETY, idle=1.0))
    # A send in flight at the kill may be replayed: duplicates only after it, with their ids.
    check_delivery(messages, confirmed, set(confirmed) - before)
