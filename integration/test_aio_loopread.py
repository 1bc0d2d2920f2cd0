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


BIG = 8 << 20
"""Bytes of each body sent to the stopped broker: more than both socket buffers hold (our send
buffer grows to 4 MiB at most here; the broker's receive buffer stays as small as a connection
that carried only small frames leaves it)."""

AFTER_HANG = 4
"""Bodies sent, pipelined, while the broker is stopped."""


def test_writes_to_a_stopped_broker_never_block_the_event_loop(
    activemq_cluster: Cluster,
) -> None:
    """A pipelined producer of large bodies writes to a SIGSTOPped broker: the first, the only
    send awaiting its receipt, is written on the loop (which also reads the socket) and does
    not fit in the socket buffers; what did not fit is left to the writer thread instead of
    blocking the loop, so a ticker task in the same loop keeps running. After SIGCONT every
    send is confirmed and on a broker."""
    queue = queue_name(durable_queue(activemq_cluster))
    # No heart-beats: nothing but the loop's own writes decides whether the loop runs while
    # the broker is stopped (a blocked loop would stay blocked until the guard's SIGCONT).
    options = {**FAST, "heartbeat": "0,0", "maxCacheSize": 4 * AFTER_HANG * BIG}
    state: dict[str, int] = {"ticks": 0}
    guard_fired = threading.Event()
    sent: list[tuple[str, asyncio.Future[None]]] = []

    async def ticker() -> None:
        while True:  # ends: cancelled by the scenario
            await asyncio.sleep(0.005)
            state["ticks"] += 1

    async def scenario() -> tuple[int, list[str]]:
        conn = AsyncFailoverConnection(
            failover_uri(activemq_cluster, options, endpoint="stomp"),
            **credentials(activemq_cluster),
        )
        ticks = asyncio.create_task(ticker())
        try:
            await conn.connect(timeout=SAFETY)
            for number in range(5):
                await conn.send(f"/queue/{queue}", f"small-{number}")
            victim = broker_at(activemq_cluster, conn.broker)
            await asyncio.to_thread(victim.hang)

            def resume_by_guard() -> None:
                guard_fired.set()
                victim.resume()

            # Only when the loop is blocked (the failure this test is for) does the guard
            # fire: it resumes the broker so that the test ends and fails instead of hanging.
            guard = threading.Timer(SAFETY, resume_by_guard)
            guard.start()
            try:
                for number in range(AFTER_HANG):
                    body = f"big-{number}-" + "x" * BIG
                    sent.append((body, await conn.submit(f"/queue/{queue}", body)))
                mark = state["ticks"]
                while state["ticks"] < mark + 20:  # ends: the ticker runs (or the guard fires)
                    await asyncio.sleep(0.01)
                progress = state["ticks"] - mark
            finally:
                guard.cancel()
                if not guard_fired.is_set():
                    await asyncio.to_thread(victim.resume)
            confirmed = [f"small-{number}" for number in range(5)]
            async with asyncio.timeout(SAFETY):
                for body, future in sent:
                    await future  # the broker reads again: confirmed, here or after a failover
                    confirmed.append(body)
            return progress, confirmed
        finally:
            ticks.cancel()
            await conn.close()

    progress, confirmed = asyncio.run(scenario())
    assert not guard_fired.is_set(), "the event loop was blocked while the broker was stopped"
    assert progress >= 20  # the ticker ran with the broker still stopped
    messages = []
    for broker in activemq_cluster:
        messages.extend(broker.drain(f"/queue/{queue}", timeout=SAFETY, idle=1.0))
    check_delivery(messages, confirmed, {body for body, _ in sent})
