"""Events on the event loop: listeners (plain or coroutine) and async iterators of events.

The connection's dispatch thread hands every event to :class:`EventHub` through the loop
bridge; the hub runs on the loop only. Plain listeners are called there at once; coroutine
listeners are awaited one after another by one task, in the order of the events, so a slow one
delays the listeners behind it but never the connection (its events queue up meanwhile).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType

from failover_client._events import Closed, Event

__all__ = ["AsyncListener", "EventHub", "EventStream"]

_log = logging.getLogger("failover_client.aio")

AsyncListener = Callable[[Event], Awaitable[None] | None]
"""A listener of :class:`~failover_client.aio.AsyncFailoverConnection`: a plain function or a
coroutine function taking one event; both run on the event loop."""


class EventStream(AsyncIterator[Event]):
    """The connection's events from now on, as an async iterator (``async for event in ...``).

    It ends after the connection's ``Closed`` event, or when :meth:`aclose` is called (or its
    ``async with`` block ends). Events wait in it, unbounded, until read: read it, or close it.
    """

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        self._items: collections.deque[Event] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False

    def push(self, event: Event) -> None:
        self._items.append(event)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        while not self._items:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter  # ends: the next event, the Closed event, or aclose()
        return self._items.popleft()

    async def aclose(self) -> None:
        """Stop receiving events; what was not read is dropped."""
        self._hub.forget(self)
        self._items.clear()
        self.end()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventHub:
    """Fans the connection's events out on the loop (see the module docstring)."""

    def __init__(self, listeners: list[AsyncListener]) -> None:
        self._listeners = listeners
        self._streams: set[EventStream] = set()
        self._queue: collections.deque[Event] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._finished = False
        self.failures = 0

    def stream(self) -> EventStream:
        stream = EventStream(self)
        if self._closed:
            stream.end()
        else:
            self._streams.add(stream)
        return stream

    def forget(self, stream: EventStream) -> None:
        self._streams.discard(stream)

    def add(self, listener: AsyncListener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: AsyncListener) -> None:
        self._listeners.remove(listener)

    def deliver(self, event: Event) -> None:
        """On the loop: one event to every listener and stream."""
        for stream in list(self._streams):
            stream.push(event)
        if isinstance(event, Closed):
            self._closed = True
            for stream in self._streams:
                stream.end()
            self._streams.clear()
        if not self._listeners:
            return
        if self._finished:
            # close() has returned and awaited the listeners: a straggler from a thread that
            # was still winding down would start a task nobody awaits, which the loop may
            # never run (asyncio.run closing) and Python then reports as never awaited.
            _log.debug("event after close not passed to listeners: %r", event)
            return
        self._queue.append(event)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._queue:
            event = self._queue.popleft()
            for listener in list(self._listeners):
                try:
                    outcome = listener(event)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception:  # noqa: BLE001 - one listener's bug must not stop the rest
                    self.failures += 1
                    _log.exception("event listener %r failed on %r", listener, event)

    async def finish(self) -> None:
        """Await the listeners still running on queued events (at close); an event after
        that is logged, not passed to listeners."""
        task = self._task
        if task is not None and not task.done():
            await task
        self._finished = True
