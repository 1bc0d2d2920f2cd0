"""Entries into a :class:`FailoverConnection` that never wait: for an event-loop driver.

The connection's public calls block their thread until something happens (a session, room in
the confirmation window, a confirmation, a delivery). A driver that runs on an event loop
(:mod:`failover_client.aio`) must not block, so it asks these instead: each one either does its
work at once or says it cannot yet, and then *arms* a :class:`Wakeup`. The connection sets a
``Wakeup`` as it sets its own waiters' events (every change of the connection's state under its
lock, every buffered delivery), and the wakeup calls its callback: the driver's thread-safe
hand-off to its loop. Checking and arming happen under the same lock as the change, so a wake-up
is never lost between the two.

A wakeup fires once per arming: a burst of changes (a thousand confirmations read from one
socket chunk) costs one callback, not one per change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING

from failover_client._errors import SendTimeout
from failover_client.engine._budget import PhasedBudget
from failover_client.engine._latch import Latch
from failover_client.engine._outbox import OutboundMessage
from failover_client.engine._parking import Schedule
from failover_client.engine._sender import UNSET, Unset
from failover_client.engine._startup import startup_error
from failover_client.engine._subscriptions import Message, Subscription

if TYPE_CHECKING:
    from failover_client.engine._connection import FailoverConnection

__all__ = ["Handoff", "NoWait", "Wakeup"]


class Wakeup(threading.Event):
    """An event whose ``set`` calls ``callback`` once per :meth:`arm` (any thread).

    It stands where the connection keeps its waiters' :class:`threading.Event` objects; the
    connection only ever calls ``set`` on them. ``callback`` must be quick and must not block:
    it runs with the connection's lock held.
    """

    def __init__(self, callback: Callable[[], None], *, stays_set: bool = False) -> None:
        super().__init__()
        self._callback = callback
        self._armed = False
        self._stays_set = stays_set
        """Whether ``is_set()`` turns true (a one-time outcome); the connection's waiter sets
        are set over and over, and nobody reads them."""

    def arm(self) -> None:
        """Call the callback on the next ``set`` (caller holds the lock ``set`` is called under)."""
        self._armed = True

    def set(self) -> None:
        if self._stays_set:
            super().set()
        if self._armed:
            self._armed = False
            self._callback()


class Handoff(Latch):
    """A confirmed send's outcome that nobody waits on: settling it calls ``settled(error)``
    (``None``: confirmed) on the settling thread.

    A :class:`concurrent.futures.Future` with a done-callback would do the same with a
    condition variable, a re-entrant lock, a deque and a list behind it: a dozen objects per
    message in flight for the garbage collector to walk, whose full passes stop every thread,
    the event loop's included. This is one object.
    """

    __slots__ = ("_settled",)

    def __init__(self, settled: Callable[[BaseException | None], None]) -> None:
        # Not Latch.__init__: nothing waits on a handoff, so it needs no lock nor event.
        self._error: BaseException | None = None
        self._set = False
        self._lock = None
        self._event = None
        self._settled = settled

    def _settle(self, error: BaseException | None) -> None:
        if self._set:
            raise RuntimeError("a send's outcome was set twice")
        self._error = error
        self._set = True
        self._settled(error)


class NoWait:
    """The non-waiting entries of one connection (see the module docstring).

    ``state_wakeup`` is registered with the connection's condition for the connection's
    lifetime: it is set on every change of state (a session up or lost, a confirmation, room in
    the window, close, give-up), and calls back only while armed.
    """

    def __init__(self, connection: FailoverConnection, state_wakeup: Wakeup) -> None:
        self._connection = connection
        self._state = connection._state
        self._sender = connection._sender
        self._cond = self._state.cond
        self._wakeup = state_wakeup
        with self._cond:
            # Read only by ClockCondition.notify_all, under the same lock.
            self._cond._waiters[state_wakeup] = None

    # --- start-up ----------------------------------------------------------------------------

    def start(
        self, seconds: float | None, first_outcome: Wakeup, park: Schedule | None = None
    ) -> bool:
        """What ``connect()`` does before it waits: start the loop and the sources.

        ``first_outcome`` replaces the loop's own event (set once the first session is up, or
        the loop gave up or was closed) so that its ``set`` reaches the caller. With ``park``
        (a shared timer), the reconnect loop runs without a thread of its own between passes
        (:mod:`._parking`; the real clock only). False (and nothing done) when it was started
        or closed before.
        """
        conn = self._connection
        conn._guard.check()
        with self._cond:
            starting = self._state.state == "new"
            if starting:
                self._state.state = "connecting"
        if not starting:
            return False
        first_outcome.arm()
        conn._loop.first_outcome = first_outcome
        if park is not None:
            conn._loop.park(park)
        if seconds is not None:
            conn._dialer.limit(seconds)
        conn._dispatcher.start()
        conn._loop.start()
        conn._topology.start()
        return True

    def started(self) -> bool:
        """Whether the first outcome of the start-up is known."""
        return self._connection._loop.first_outcome.is_set()

    def startup_error(self) -> BaseException | None:
        """Why the start-up failed (None: it succeeded); only once :meth:`started`."""
        return startup_error(self._state)

    def expired(self) -> BaseException:
        """The :class:`AllBrokersFailed` of a start-up past its deadline."""
        return self._connection._dialer.expired()

    # --- sends -------------------------------------------------------------------------------

    def ready_or_arm(self, size: int) -> bool:
        """Whether a confirmed send of ``size`` bytes can be written now; else arm the wakeup.

        Raises what a send raises when the connection is unusable (not started, closed, gave
        up).
        """
        outbox = self._sender._outbox
        with self._cond:
            self._state.raise_unusable()
            if self._state.connected_slot() is not None and outbox.has_room(size):
                return True
            self._wakeup.arm()
            return False

    def connected(self) -> bool:
        """Whether a session is up (a :class:`PhasedBudget`'s phase)."""
        with self._cond:
            return self._state.connected_slot() is not None

    def submit(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        message_id: str | None,
        settled: Callable[[BaseException | None], None],
    ) -> OutboundMessage | None:
        """Write a confirmed send now, or None when it would have to wait (nothing written).

        ``settled(error)`` is called once with its outcome (None: confirmed), on the thread
        that settles it. None also when no session is up (closed, not started): ask
        :meth:`ready_or_arm` then, which raises or arms. The send path's own steps, in its
        order: count, enter in the outbox, write under the session's I/O lock
        (``Sender.submit``), with a :class:`Handoff` for an outcome.
        """
        sender = self._sender
        if sender.observer is not None:
            return self._submit_observed(destination, body, headers, message_id, settled)
        chosen_id, merged, owned = sender.headers_for(headers, message_id)
        outbox = sender._outbox
        with self._cond:
            slot = self._state.connected_slot()
            if slot is None or not outbox.has_room(len(body)):
                return None
            sender._counters.sent += 1
            message = outbox.new(
                message_id=chosen_id,
                destination=destination,
                body=body,
                headers=merged,
                kind="confirmed",
                future=Handoff(settled),
                duplicate_id=owned,
            )
            outbox.add(message, slot)  # a confirmed send evicts nothing
        with slot.io_lock:
            sender._write_locked(slot, message)
        return message

    def _submit_observed(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        message_id: str | None,
        settled: Callable[[BaseException | None], None],
    ) -> OutboundMessage | None:
        # An observed send (OpenTelemetry) ends its observation through a Future's callback:
        # the send path's own submit, refusing to wait.
        with self._cond:
            # Not even tried when it would wait: a refused try would be an observed failure.
            if self._state.connected_slot() is None or not self._sender._outbox.has_room(len(body)):
                return None
        try:
            message = self._sender.submit(
                destination,
                body,
                headers,
                message_id=message_id,
                kind="confirmed",
                # Already passed: the send path checks once and refuses instead of waiting.
                deadline=self._connection._clock.monotonic(),
            )
        except SendTimeout:
            return None
        assert message is not None
        outcome = message.future
        assert isinstance(outcome, Future)  # confirmed, not blocking: a future
        outcome.add_done_callback(lambda done: settled(done.exception()))
        return message

    def settled_or_arm(self, message: OutboundMessage) -> bool:
        """Whether ``message`` has its outcome (or the connection is over); else arm."""
        with self._cond:
            if message.done or self._state.is_over():
                return True
            self._wakeup.arm()
            return False

    def abandon(self, message: OutboundMessage, error: SendTimeout) -> bool:
        """Stop tracking ``message`` (its caller's time ran out) and fail it with ``error``.

        False when it was settled meanwhile (its outcome stands).
        """
        with self._cond:
            abandoned = self._sender._outbox.settle(message)
            if abandoned:
                self._cond.notify_all()
        if abandoned and message.future is not None:
            message.future.set_exception(error)
        return abandoned

    def flushed_or_arm(self) -> bool:
        """Whether nothing awaits its confirmation; else arm. Raises once closed / gave up."""
        with self._cond:
            if len(self._sender._outbox) == 0 or self._state.is_over():
                self._state.raise_unusable()
                return True
            self._wakeup.arm()
            return False

    def in_flight(self) -> int:
        with self._cond:
            return self._sender.in_flight()

    def budget(self, timeout: float | Unset | None) -> PhasedBudget:
        """A send's bounds by phase (connected, failing over) for ``timeout``.

        UNSET: ``options.timeout`` while connected and ``options.failover_timeout`` (when set,
        else ``options.timeout``) while failing over, as the blocking send applies them. A
        number or None: that bound in both phases.
        """
        sender = self._sender
        if timeout is not UNSET:
            seconds = None if timeout is None else float(timeout)
            return PhasedBudget(seconds, seconds, "timeout", "timeout")
        connected, failing_over = sender._timeout, sender._failover_timeout
        spelled_connected, spelled_failing = sender._spellings
        if isinstance(failing_over, Unset):
            return PhasedBudget(connected, connected, spelled_connected, spelled_connected)
        return PhasedBudget(connected, failing_over, spelled_connected, spelled_failing)

    # --- deliveries --------------------------------------------------------------------------

    def receive(self, subscription: Subscription) -> Message | None:
        """The next buffered message of a pull subscription, or None (nothing buffered)."""
        return self._connection._consumers.receive(subscription, 0)

    @staticmethod
    def buffered_or_arm(subscription: Subscription, wakeup: Wakeup) -> bool:
        """Whether a message waits in ``subscription``'s buffer, or it stopped; else arm."""
        inbox = subscription.inbox
        with inbox._lock:
            if inbox._items or not inbox._taking:
                return True
            wakeup.arm()
            # Set (and forgotten) by the next put or stop: once per burst of deliveries.
            inbox._waiters.add(wakeup)
            return False

    @staticmethod
    def taking(subscription: Subscription) -> bool:
        return subscription.inbox.taking

    def unsubscribe(self, subscription: Subscription) -> None:
        """Unsubscribe without waiting: the message handed out last (``auto``) goes back first.

        The blocking ``unsubscribe`` waits up to a second for a running handler; a pull
        subscription's only "running" message is the one handed out last, which no handler
        thread will ever finish, so it is handed back here before.
        """
        consumers = self._connection._consumers
        consumers._done_with_outstanding(subscription, handled=False, reason="unsubscribe")
        consumers.unsubscribe(subscription)
