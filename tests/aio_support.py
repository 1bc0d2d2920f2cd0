"""Builders for the asyncio connection's tests (no tests of its own)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client.aio import AsyncFailoverConnection
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)

T = TypeVar("T")

SAFETY = 10.0  # a hung test fails instead of hanging; not a measurement


@dataclass
class AioRig:
    conn: AsyncFailoverConnection
    clock: FakeClock
    connector: FakeConnector
    events: EventRecorder


def make(
    members: tuple[BrokerAddress, ...] = (A, B), *, auto_confirm: bool = True, **options: Any
) -> AioRig:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock, auto_confirm=auto_confirm)
    events = EventRecorder()
    opts = FailoverOptions(**{"randomize": False, "reconnect_jitter": 0.0, **options})
    conn = AsyncFailoverConnection(
        members, options=opts, connector=connector, clock=clock, client_id="c", listeners=[events]
    )
    return AioRig(conn, clock, connector, events)


def run(test: Callable[[], Awaitable[T]]) -> T:
    """Run one test coroutine on a fresh loop, with a safety bound."""

    async def bounded() -> T:
        async with asyncio.timeout(SAFETY):
            return await test()

    return asyncio.run(bounded())


async def eventually(predicate: Callable[[], bool]) -> None:
    """Yield to the loop (and the connection's threads) until ``predicate()`` holds."""
    while not predicate():
        await asyncio.sleep(0.001)


async def in_thread(call: Callable[[], T]) -> T:
    """Run a blocking helper of the fake connector (its waits) off the loop."""
    return await asyncio.to_thread(call)


def our_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("failover-client")}
