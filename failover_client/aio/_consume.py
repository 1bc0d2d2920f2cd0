"""Subscriptions on the event loop: async iteration, ``await receive()``, coroutine handlers.

Every subscription of an :class:`~failover_client.aio.AsyncFailoverConnection` is a pull
subscription of the underlying connection, with its bounded buffer (at most ``prefetch``
messages delivered and not settled; the rest waits on the broker). Taking a message never
waits: when the buffer is empty the subscription arms a wake-up that the next delivery sets
(once per burst of deliveries, whatever its size) and awaits it.

A coroutine handler is awaited by one task per subscription, one message at a time, in order.
``ack="auto"``: acknowledged once the handler returned; rejected (``nack``) when it raised,
reported as a ``HandlerError`` event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from failover_client._events import HandlerError
from failover_client.adapter import AckMode
from failover_client.aio._bridge import Fairness
from failover_client.engine._nowait import NoWait, Wakeup
from failover_client.engine._subscriptions import Message, Subscription

if TYPE_CHECKING:
    from failover_client.aio._bridge import LoopBridge
    from failover_client.aio._events import EventHub

__all__ = ["AsyncHandler", "AsyncMessage", "AsyncSubscription"]

_log = logging.getLogger("failover_client.aio")


class AsyncMessage:
    """A delivered message; :meth:`ack` / :meth:`nack` go to the session that delivered it.

    ``redelivered``: the broker's flag (after a fail-over, what the old broker had delivered
    unacknowledged comes again with it). ``message_id``: the ``failover-message-id`` a failover
    sender put on it, else the broker's id: duplicates after a fail-over carry the same one.
    """

    __slots__ = ("_message",)

    def __init__(self, message: Message) -> None:
        self._message = message

    @property
    def body(self) -> bytes:
        return self._message.body

    @property
    def headers(self) -> Mapping[str, str]:
        return self._message.headers

    @property
    def destination(self) -> str:
        return self._message.destination

    @property
    def message_id(self) -> str | None:
        return self._message.message_id

    @property
    def redelivered(self) -> bool:
        return self._message.redelivered

    @property
    def settled(self) -> bool:
        """Whether it was acknowledged, rejected or handed back (or its ack dropped)."""
        return self._message.settled

    @property
    def message(self) -> Message:
        """The underlying :class:`~failover_client.Message`."""
        return self._message

    async def ack(self) -> None:
        """Acknowledge it (once; later calls do nothing). The write is queued, not awaited:
        an ack for a session that died meanwhile is dropped (``AckDropped``), and the broker
        redelivers the message."""
        self._message.ack()

    async def nack(self) -> None:
        """Reject it: the broker redelivers or dead-letters it by its own rules (once)."""
        self._message.nack()

    def __repr__(self) -> str:
        return f"<Async{self._message!r}"[:-1] + ">"


AsyncHandler = Callable[[AsyncMessage], Awaitable[None]]
"""A coroutine function handling one message of a subscription."""


class AsyncSubscription:
    """One subscription, restored with the same id after every fail-over.

    Without a handler: ``async for message in subscription`` (ends once unsubscribed, drained
    or closed) or ``await subscription.receive(timeout)``. With ``ack="auto"`` a message counts
    as handled (is acknowledged) when the next one is asked for, or when ``ack()`` is awaited;
    ``client`` modes: await ``message.ack()``.
    """

    def __init__(
        self,
        subscription: Subscription,
        nowait: NoWait,
        bridge: LoopBridge,
        hub: EventHub,
        handler: AsyncHandler | None,
    ) -> None:
        self._subscription = subscription
        self._nowait = nowait
        self._hub = hub
        self._waiter: asyncio.Future[None] | None = None
        self._wakeup = Wakeup(lambda: bridge.post(self._woken))
        self._fairness = Fairness()
        self._handler = handler
        self.task: asyncio.Task[None] | None = None
        """The task awaiting the coroutine handler (None without a handler)."""
        self._closing = False

    @property
    def subscription(self) -> Subscription:
        """The underlying :class:`~failover_client.Subscription` (counters, ``active``)."""
        return self._subscription

    @property
    def id(self) -> str:
        return self._subscription.id

    @property
    def destination(self) -> str:
        return self._subscription.destination

    @property
    def ack(self) -> AckMode:
        return self._subscription.ack

    @property
    def in_flight(self) -> int:
        """Messages delivered and not settled (at most ``prefetch`` per session)."""
        return self._subscription.in_flight

    @property
    def active(self) -> bool:
        """Whether the broker in use confirmed this subscription."""
        return self._subscription.active

    def _woken(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self, timeout: float | None = None) -> AsyncMessage | None:
        """The next message, waiting up to ``timeout`` seconds (None: until one comes or the
        subscription ends); None on timeout and once unsubscribed, drained or closed."""
        loop = asyncio.get_running_loop()
        at = None if timeout is None else loop.time() + timeout
        while True:
            message = self._nowait.receive(self._subscription)
            if message is not None:
                await self._fairness.pause()
                return AsyncMessage(message)
            if self._closing:
                return None  # the handler is being stopped and nothing more is buffered
            if self._nowait.buffered_or_arm(self._subscription, self._wakeup):
                if not self._nowait.taking(self._subscription):
                    return None
                continue
            if at is not None and loop.time() >= at:
                return None
            self._waiter = loop.create_future()
            handle = None if at is None else loop.call_at(at, self._woken)
            try:
                await self._waiter  # ends: a delivery, the end of the subscription, or `at`
                self._fairness.suspended()
            finally:
                if handle is not None:
                    handle.cancel()

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> AsyncMessage:
        message = await self.receive()
        if message is None:
            raise StopAsyncIteration
        return message

    async def unsubscribe(self) -> None:
        """Stop it on the broker and stop restoring it; what is buffered goes back to the
        broker (``MessagesReleased``). A handler task is cancelled first."""
        await self._stop_handler(None)
        self._nowait.unsubscribe(self._subscription)

    # --- the coroutine handler --------------------------------------------------------------

    def start_handler(self) -> None:
        if self._handler is not None:
            self.task = asyncio.get_running_loop().create_task(
                self._run_handler(), name=f"failover-client-handler-{self.id}"
            )

    async def _run_handler(self) -> None:
        handler = self._handler
        assert handler is not None
        while True:
            message = await (self._take_buffered() if self._closing else self.receive())
            if message is None:
                return
            try:
                await handler(message)
            except Exception as exc:  # noqa: BLE001 - reported (HandlerError), then nacked
                _log.exception("handler of subscription %s failed on %r", self.id, message)
                self._hub.deliver(HandlerError(self.id, message.message_id, exc))
                if self.ack != "client":  # a client-mode nack would settle earlier ones too
                    await message.nack()
                continue
            if self.ack == "auto":
                await message.ack()

    async def _take_buffered(self) -> AsyncMessage | None:
        message = self._nowait.receive(self._subscription)
        return None if message is None else AsyncMessage(message)

    async def _stop_handler(self, drain_until: float | None) -> None:
        """Let the handler finish what is buffered until ``drain_until`` (loop time; None:
        stop now), then cancel it."""
        task = self.task
        if task is None or task.done():
            return
        self._closing = True
        self._woken()  # a handler waiting for a delivery ends instead
        if drain_until is not None:
            loop = asyncio.get_running_loop()
            remaining = drain_until - loop.time()
            if remaining > 0:
                await asyncio.wait({task}, timeout=remaining)
        if not task.done():
            task.cancel()
            await asyncio.wait({task})  # ends: cancelled at its next await
