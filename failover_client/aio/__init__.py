"""asyncio: the failover connection for asyncio applications, never blocking the event loop.

:class:`AsyncFailoverConnection` offers what :class:`~failover_client.FailoverConnection`
does (the same URIs, options, engine decisions, events, zero-loss replay, priority backup,
topology and rebalancing, over STOMP and AMQP 1.0) with coroutines: ``await conn.send(...)``
(confirmed), ``await conn.submit(...)`` (pipelined; returns a future), ``await conn.flush()``,
subscriptions as async iterators or with coroutine handlers, events as an async iterator or
listeners, ``await conn.close(drain=...)``. See docs/asyncio.md.
"""

from __future__ import annotations

from failover_client.aio._connection import AsyncFailoverConnection
from failover_client.aio._consume import AsyncHandler, AsyncMessage, AsyncSubscription
from failover_client.aio._events import AsyncListener, EventStream

__all__ = [
    "AsyncFailoverConnection",
    "AsyncHandler",
    "AsyncListener",
    "AsyncMessage",
    "AsyncSubscription",
    "EventStream",
]
