"""``AsyncFailoverConnection``: the failover connection for asyncio, never blocking the loop.

It drives a :class:`~failover_client.FailoverConnection` (the same engine: URIs, options,
decisions, events, replay, priority backup, topology, rebalancing) through the engine's
non-waiting entries (:mod:`failover_client.engine._nowait`): a call does its work at once or
arms a wake-up and awaits it. The engine's threads (the adapter's I/O, dispatch while events
are pending, the reconnect loop while a pass runs) hand confirmations, deliveries, state
changes and events to the loop through one :class:`~failover_client.aio._bridge.LoopBridge`
per connection: one ``call_soon_threadsafe`` per burst, not per message. On the real clock the
reconnect loop parks on the process's shared timer between its passes
(:mod:`failover_client.engine._parking`), so an idle connection keeps one thread: its
adapter's reader. The asyncio layer adds no thread of its own; only :meth:`close` borrows a
worker of the loop's default executor while the engine joins its threads.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType

import failover_client
from failover_client._clock import Clock
from failover_client._errors import SendTimeout
from failover_client._events import Event
from failover_client._timers import timers_for
from failover_client.adapter import AckMode, Connector
from failover_client.aio._bridge import Fairness, LoopBridge
from failover_client.aio._consume import AsyncHandler, AsyncSubscription
from failover_client.aio._events import AsyncListener, EventHub, EventStream
from failover_client.engine._arguments import (
    FailoverTarget,
    check_callable,
    check_send,
    check_timeout,
    refuse_zero_timeout_for_confirmed_send,
)
from failover_client.engine._budget import PhasedBudget
from failover_client.engine._dial import ScheduleLike
from failover_client.engine._health import Health
from failover_client.engine._nowait import NoWait, Wakeup
from failover_client.engine._outbox import OutboundMessage
from failover_client.engine._placement import PlanPolicy
from failover_client.engine._pool import AddressMap, PoolView
from failover_client.engine._sender import UNSET, Unset
from failover_client.engine._startup import bounded
from failover_client.engine._topology import TopologySource, UriSourceFactory
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["AsyncFailoverConnection"]


class _Changes:
    """Loop futures waiting for the connection's state to change (the state wake-up's side)."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def fire(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, loop: asyncio.AbstractEventLoop, at: float | None) -> None:
        """Return on the next change (armed by the caller) or at loop time ``at``."""
        waiter = loop.create_future()
        self._waiters.add(waiter)
        handle = None if at is None else loop.call_at(at, _resolve, waiter)
        try:
            await waiter  # ends: the next change (the caller armed the wake-up), or `at`
        finally:
            self._waiters.discard(waiter)
            if handle is not None:
                handle.cancel()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _hand_over(
    bridge: LoopBridge, target: asyncio.Future[None], error: BaseException | None
) -> None:
    """On the settling thread: pass a send's outcome to the loop. A confirmation read on the
    loop itself resolves at once (LoopBridge.post_now); a failure always goes the queued way,
    so that ``send`` may still cancel the future of a message it abandons first."""
    job = functools.partial(_settle, target, error)
    if error is None:
        bridge.post_now(job)
    else:
        bridge.post(job)


def _settle(target: asyncio.Future[None], error: BaseException | None) -> None:
    """On the loop: a send's outcome (a cancelled awaiter no longer wants it)."""
    if target.done():
        return
    if error is None:
        target.set_result(None)
    else:
        target.set_exception(error)


class AsyncFailoverConnection:
    """One connection to a group of brokers that fails over, for asyncio applications.

    Takes the arguments of :class:`~failover_client.FailoverConnection` (a failover URI, its
    options, connector, clock, policy, topology sources ...); ``listeners`` may be plain or
    coroutine functions, both run on the event loop. Use ``async with`` (connect, then close)
    or :meth:`connect` and :meth:`close`. It belongs to the event loop it is first used in.

    Nothing here blocks the loop: a call that must wait (for a session, room in the
    confirmation window, a confirmation, a delivery) awaits. ``asyncio.timeout()`` works
    around any call.

    Cancellation: a :meth:`send` cancelled before its message was written wrote nothing; one
    cancelled after (while awaiting the confirmation) leaves the message *in doubt*: it stays
    tracked, is confirmed or re-sent with the same ``failover-message-id`` after a fail-over
    (pass ``message_id=`` to know it), and :meth:`flush` waits for it. Cancelling never loses
    a confirmed message and never corrupts the connection.
    """

    def __init__(
        self,
        target: str | FailoverTarget | Sequence[BrokerAddress],
        /,
        *,
        options: FailoverOptions | None = None,
        connector: Connector | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        client_id: str | None = None,
        login: str | None = None,
        passcode: str | None = None,
        heartbeat: tuple[int, int] | None = None,
        listeners: Iterable[AsyncListener] = (),
        policy: PlanPolicy | None = None,
        schedule: ScheduleLike | None = None,
        tiers: Mapping[str, int] | None = None,
        address_map: AddressMap | None = None,
        topology: Iterable[TopologySource] = (),
        topology_factory: UriSourceFactory | None = None,
    ) -> None:
        own = list(listeners)
        for listener in own:
            check_callable("listener", listener)
        self._bridge = bridge = LoopBridge()
        self._hub = hub = EventHub(own)

        def on_event(event: Event) -> None:  # the dispatch thread; holds no reference to self
            bridge.post(functools.partial(hub.deliver, event))

        self._sync = failover_client.FailoverConnection(
            target,
            options=options,
            connector=connector,
            clock=clock,
            rng=rng,
            client_id=client_id,
            login=login,
            passcode=passcode,
            heartbeat=heartbeat,
            listeners=[on_event],
            policy=policy,
            schedule=schedule,
            tiers=tiers,
            address_map=address_map,
            topology=topology,
            topology_factory=topology_factory,
        )
        if connector is None:
            # The connector built here reads plain TCP STOMP sessions on this connection's
            # loop (failover_client.stomp._loopread): no reader thread, no hand-off.
            read_on_loop = getattr(self._sync._connector, "read_on_loop", None)
            if read_on_loop is not None:
                read_on_loop(bridge.reading_loop)
        self._changes = changes = _Changes()
        self._nowait = NoWait(self._sync, Wakeup(lambda: bridge.post(changes.fire)))
        self._started: asyncio.Future[None] | None = None
        self._subscriptions: list[AsyncSubscription] = []
        self._fairness = Fairness()
        self._closed = False
        default = self._nowait.budget(UNSET)
        self._unbounded: PhasedBudget | None = (
            default if default.connected is None and default.failing_over is None else None
        )
        """The default budget when it bounds nothing: shared by every call (a budget without
        bounds never changes what it answers), not made anew per send."""

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._bridge.running_here()
        if loop is None:
            loop = asyncio.get_running_loop()
            self._bridge.bind(loop)
        return loop

    # --- lifecycle -------------------------------------------------------------------------

    async def connect(self, timeout: float | None = None) -> None:
        """Start the reconnect loop and return once the first broker handshook.

        ``timeout`` bounds the start-up as in :meth:`FailoverConnection.connect
        <failover_client.FailoverConnection.connect>` (past it the connection is closed and
        :class:`~failover_client.AllBrokersFailed` names every broker's last cause); the same
        errors. Returns at once when connected already.
        """
        seconds = check_timeout(timeout)
        loop = self._loop()
        if self._started is None:
            started = self._started = loop.create_future()
            first = Wakeup(
                lambda: self._bridge.post(functools.partial(_resolve, started)), stays_set=True
            )
            # The reconnect loop parks on the process's shared timer between its passes: no
            # thread of its own while it waits (see failover_client.engine._parking).
            timers = timers_for(self._sync._clock)
            if not self._nowait.start(seconds, first, park=timers.schedule):
                started.set_result(None)  # closed before: startup_error() says so
        wait = bounded(seconds)
        try:
            # Shielded: a cancelled connect() leaves the start-up to the other awaiters.
            await asyncio.wait_for(asyncio.shield(self._started), wait)
        except TimeoutError:
            await self._close_engine(0.0)  # the loop missed its own deadline
            raise self._nowait.expired() from None
        error = self._nowait.startup_error()
        if error is not None:
            if seconds is not None:
                await self._close_engine(0.0)  # a bounded start leaves nothing running
            raise error

    async def close(self, drain: float = 0.0) -> None:
        """Close: let the work in progress finish for up to ``drain`` seconds, then stop.

        Within ``drain``: coroutine handlers handle what their subscriptions buffered, and
        sends awaiting their confirmation get it. Then as :meth:`FailoverConnection.close
        <failover_client.FailoverConnection.close>`: acknowledgements written, what was never
        handled handed back to its broker, sends still waiting failed with ConnectionClosed
        (they may still have reached the broker), sessions closed. Idempotent.
        """
        seconds = check_timeout(drain, name="drain")
        if self._closed:
            return
        self._closed = True
        loop = self._loop()
        until = None if seconds is None else loop.time() + seconds
        if seconds != 0:
            await asyncio.gather(*(s._stop_handler(until) for s in self._subscriptions))
            if self._started is not None:
                await self._until(self._nowait.flushed_or_arm, PhasedBudget(seconds, seconds))
        await asyncio.gather(*(s._stop_handler(None) for s in self._subscriptions))
        await self._close_engine(0.0)
        await self._hub.finish()

    async def _close_engine(self, drain: float) -> None:
        # The engine joins its threads (and gives topology sources 2 s): not on the loop.
        await asyncio.to_thread(self._sync.close, drain)
        self._closed = True

    async def __aenter__(self) -> AsyncFailoverConnection:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- sends -----------------------------------------------------------------------------

    async def send(
        self,
        destination: str,
        body: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float | Unset | None = UNSET,
        message_id: str | None = None,
    ) -> None:
        """Send one message; return once the broker confirmed it.

        ``timeout`` bounds the whole call as the blocking ``send``'s does (default
        ``options.timeout``, with ``options.failover_timeout`` bounding the waits while failing
        over). Raises :class:`~failover_client.SendTimeout` (the message is no longer tracked;
        it may still arrive), :class:`~failover_client.SendRejected`,
        :class:`~failover_client.NotConnected`, :class:`~failover_client.AllBrokersFailed` or
        :class:`~failover_client.ConnectionClosed`. See the class docstring on cancellation.
        """
        budget = self._budget(timeout, confirmed=True)
        message, confirmed = await self._write(destination, body, headers, message_id, budget)
        if budget.connected is None and budget.failing_over is None:
            await confirmed
            self._fairness.suspended()
            return
        if not await self._until(functools.partial(self._nowait.settled_or_arm, message), budget):
            bound = budget.exceeded() if budget.connected != budget.failing_over else "timeout"
            error = SendTimeout(
                f"send to {destination} not confirmed in time ({bound}; it was written, so the "
                "broker may still store it)",
                message_id=message.message_id,
            )
            if self._nowait.abandon(message, error):
                confirmed.cancel()  # its outcome is this error, raised here
                raise error
        await confirmed

    async def submit(
        self,
        destination: str,
        body: bytes | str,
        headers: Mapping[str, str] | None = None,
        *,
        timeout: float | Unset | None = UNSET,
        message_id: str | None = None,
    ) -> asyncio.Future[None]:
        """Write one message (pipelined); the returned future completes on its confirmation.

        Awaits (backpressure) while no broker is connected or ``confirm_window`` messages /
        ``max_cache_size`` bytes await confirmation, up to ``timeout`` (SendTimeout, nothing
        written). The future fails as :meth:`send` does. Cancelling the future stops nobody:
        the message stays tracked (see the class docstring).
        """
        budget = self._budget(timeout, confirmed=False)
        _, confirmed = await self._write(destination, body, headers, message_id, budget)
        return confirmed

    def _budget(self, timeout: float | Unset | None, *, confirmed: bool) -> PhasedBudget:
        if not isinstance(timeout, Unset):
            seconds = check_timeout(timeout)
            if seconds == 0 and confirmed:
                raise refuse_zero_timeout_for_confirmed_send()
            return self._nowait.budget(seconds)
        return self._unbounded or self._nowait.budget(UNSET)

    async def _write(
        self,
        destination: str,
        body: bytes | str,
        headers: Mapping[str, str] | None,
        message_id: str | None,
        budget: PhasedBudget,
    ) -> tuple[OutboundMessage, asyncio.Future[None]]:
        data = check_send(destination, body, headers, message_id)
        loop = self._loop()
        nowait = self._nowait
        size = len(data)
        confirmed: asyncio.Future[None] = loop.create_future()
        # Called on the settling thread; a partial is fewer objects than a closure.
        settled = functools.partial(_hand_over, self._bridge, confirmed)

        while True:
            # Written at once when a session is up and the window has room (the usual case:
            # one pass under the lock); else the check that arms the wake-up, or raises.
            message = nowait.submit(destination, data, headers, message_id, settled)
            if message is not None:
                break
            if nowait.ready_or_arm(size):
                continue  # the state changed since the attempt: try again
            at = budget.deadline(nowait.connected(), loop.time())
            if at is not None and loop.time() >= at:
                reason = f"not connected ({self.state})" if not nowait.connected() else "no room"
                raise SendTimeout(
                    f"send to {destination} timed out: {reason}; {budget.exceeded()}",
                    message_id=message_id,
                )
            await self._changes.wait(loop, at)
            self._fairness.suspended()
        if self._fairness.due():
            await self._fairness.pause()
        return message, confirmed

    async def _until(self, ready_or_arm: Callable[[], bool], budget: PhasedBudget) -> bool:
        """Await ``ready_or_arm()`` (which arms the state wake-up when false) under
        ``budget``; False once the current phase's bound ran out."""
        loop = self._loop()
        while not ready_or_arm():
            at = budget.deadline(self._nowait.connected(), loop.time())
            if at is not None and loop.time() >= at:
                return False
            await self._changes.wait(loop, at)
        return True

    async def flush(self, timeout: float | Unset | None = UNSET) -> None:
        """Await every outstanding confirmation (SendTimeout after ``timeout``; default
        ``options.timeout``)."""
        budget = self._budget(timeout, confirmed=False)
        if not await self._until(self._nowait.flushed_or_arm, budget):
            raise SendTimeout(f"{self._nowait.in_flight()} confirmation(s) still outstanding")

    # --- subscriptions ---------------------------------------------------------------------

    async def subscribe(
        self,
        destination: str,
        handler: AsyncHandler | None = None,
        *,
        ack: AckMode = "auto",
        id: str | None = None,
        durable_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefetch: int | None = None,
        prefetch_bytes: int | None = None,
    ) -> AsyncSubscription:
        """Subscribe to ``destination``; restored with the same id after every fail-over.

        Without ``handler``: iterate the subscription (``async for message in sub``) or await
        ``sub.receive()``. With a coroutine function ``handler``: it is awaited for each
        message by a task of this subscription, one at a time, in order. ``ack``,
        ``prefetch`` and ``prefetch_bytes`` as :meth:`FailoverConnection.subscribe
        <failover_client.FailoverConnection.subscribe>`. Allowed before :meth:`connect`.
        """
        if handler is not None:
            check_callable("handler", handler)
        self._loop()
        subscription = self._sync.subscribe(
            destination,
            None,
            ack=ack,
            id=id,
            durable_name=durable_name,
            headers=headers,
            prefetch=prefetch,
            prefetch_bytes=prefetch_bytes,
        )
        wrapped = AsyncSubscription(subscription, self._nowait, self._bridge, self._hub, handler)
        self._subscriptions.append(wrapped)
        if handler is not None:
            wrapped.start_handler()
        return wrapped

    # --- events ----------------------------------------------------------------------------

    def events(self) -> EventStream:
        """The connection's events from now on, as an async iterator (see
        :class:`~failover_client.aio.EventStream`)."""
        self._loop()
        return self._hub.stream()

    def add_listener(self, listener: AsyncListener) -> None:
        """Call ``listener`` (plain or coroutine function) on the loop for every event."""
        check_callable("listener", listener)
        self._hub.add(listener)

    def remove_listener(self, listener: AsyncListener) -> None:
        self._hub.remove(listener)

    # --- topology and state ----------------------------------------------------------------

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        """Merge a broker list (see :meth:`FailoverConnection.update_brokers
        <failover_client.FailoverConnection.update_brokers>`); never waits."""
        self._sync.update_brokers(update, source=source, tiers=tiers, weights=weights)

    def request_rebalance(self, *, source: str) -> None:
        """A broker asked its clients to rebalance; never waits."""
        self._sync.request_rebalance(source=source)

    @property
    def state(self) -> str:
        """new, connecting, connected, reconnecting, switching, failed or closed."""
        return self._sync.state

    @property
    def broker(self) -> str | None:
        """The redacted address of the current broker (None before the first connection)."""
        return self._sync.broker

    @property
    def client_id(self) -> str:
        return self._sync.client_id

    @property
    def options(self) -> FailoverOptions:
        return self._sync.options

    @property
    def pool(self) -> PoolView:
        return self._sync.pool

    @property
    def handoffs(self) -> int:
        """How many times the connection's threads woke the event loop (one per burst)."""
        return self._bridge.handoffs

    def health(self) -> Health:
        """Readiness at one moment (see :class:`~failover_client.Health`)."""
        return self._sync.health()

    def stats(self) -> dict[str, int]:
        """The counters of :meth:`FailoverConnection.stats
        <failover_client.FailoverConnection.stats>`; ``listener_errors`` counts the loop's."""
        counters = self._sync.stats()
        counters["listener_errors"] += self._hub.failures
        return counters

    def __repr__(self) -> str:
        return "<Async" + repr(self._sync)[1:]
