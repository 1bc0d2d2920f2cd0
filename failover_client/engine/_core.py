"""The shared state of one failover connection and every operation on it.

Application threads (send, subscribe, ack, close), adapter I/O threads (confirmations, messages,
losses), the dispatch thread (handlers) and the reconnect loop all meet here, under one lock
(:class:`ClockCondition`, so waits run on the injected clock). Rules that keep it deadlock-free:

* Calls into a session happen outside the lock, under that session's ``io_lock``; a session may
  call back (confirm, lose) synchronously from inside such a call, and callbacks take only the
  lock. Lock order is therefore ``io_lock`` -> lock, never the reverse.
* Futures are resolved and events emitted after the lock is released (their callbacks are user
  code).

Sends register in the :class:`Outbox` only while a session is current and connected; the
reconnect loop :meth:`installs <Core.install>` a new session by restoring subscriptions and
re-sending every unconfirmed message *before* it lets new sends through, so replays keep their
original order ahead of anything new.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Literal

from failover_client._clock import Clock
from failover_client._errors import ConnectionClosed, ConnectionFailure, SendTimeout
from failover_client._events import (
    AckDropped,
    Closed,
    Disconnected,
    Event,
    HandlerError,
    StandbyConnected,
    StandbyLost,
)
from failover_client.adapter import AckMode, Received, Session, SubscriptionSpec
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._outbox import MESSAGE_ID_HEADER, MessageIds, OutboundMessage, Outbox
from failover_client.engine._slot import Slot
from failover_client.engine._subscriptions import (
    Handler,
    Message,
    Subscription,
    SubscriptionRegistry,
)
from failover_client.engine._sync import ClockCondition
from failover_client.uri import FailoverOptions

__all__ = ["UNSET", "Core", "State", "Stats", "Unset"]

_log = logging.getLogger("failover_client")

State = Literal["new", "connecting", "connected", "reconnecting", "switching", "failed", "closed"]
_TERMINAL = ("failed", "closed")
_LIVE = ("connected", "reconnecting", "switching")


class Unset(enum.Enum):
    """Marker for "argument not given" where None already means "forever"."""

    TOKEN = enum.auto()


UNSET = Unset.TOKEN


@dataclass
class Stats:
    """Counters shown by ``repr(connection)``."""

    sent: int = 0
    confirmed: int = 0
    rejected: int = 0
    replayed: int = 0
    evicted: int = 0
    failovers: int = 0
    acks_dropped: int = 0
    handler_errors: int = 0
    unroutable: int = 0


class Core:
    """State and operations shared by the public API, the adapters and the reconnect loop."""

    def __init__(
        self,
        *,
        options: FailoverOptions,
        clock: Clock,
        emit: Callable[[Event], None],
        dispatcher: Dispatcher,
        message_ids: MessageIds,
    ) -> None:
        self.options = options
        self.clock = clock
        self.emit = emit
        self.dispatcher = dispatcher
        self.message_ids = message_ids
        self.cond = ClockCondition(clock)
        self.state: State = "new"
        self.current: Slot | None = None
        self.standbys: list[Slot] = []
        self.outbox = Outbox(window=options.confirm_window, max_bytes=options.max_cache_size)
        self.subscriptions = SubscriptionRegistry()
        self.stats = Stats()
        self.error: BaseException | None = None
        """Why the connection gave up (state ``failed``)."""
        self.stop = threading.Event()
        """Set by close(): interrupts every wait of the reconnect loop."""
        self.wake = threading.Event()
        """Wakes the reconnect loop when something it watches changed."""

    # --- helpers ---------------------------------------------------------------------------

    def deadline(self, timeout: float | Unset | None) -> float | None:
        """Absolute clock deadline for a per-call ``timeout`` (UNSET: the options' timeout)."""
        seconds = self.options.timeout if isinstance(timeout, Unset) else timeout
        return None if seconds is None else self.clock.monotonic() + seconds

    def _check_usable(self) -> None:
        """Raise unless sends are possible at some point (lock held)."""
        if self.state == "closed":
            raise ConnectionClosed("the connection is closed")
        if self.state == "failed":
            raise ConnectionClosed(f"the connection gave up: {self.error}") from self.error
        if self.state == "new":
            raise ConnectionClosed("the connection is not started; call connect() first")

    # --- sends -----------------------------------------------------------------------------

    def headers_for(
        self, headers: Mapping[str, str] | None, message_id: str | None
    ) -> tuple[str, dict[str, str]]:
        """The message id (given, from the headers, or new) and the headers carrying it."""
        merged = dict(headers or {})
        chosen = message_id or merged.get(MESSAGE_ID_HEADER) or self.message_ids.next()
        merged[MESSAGE_ID_HEADER] = chosen
        return chosen, merged

    def submit(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        *,
        message_id: str | None,
        kind: Literal["confirmed", "tracked", "untracked"],
        deadline: float | None,
    ) -> OutboundMessage | None:
        """Wait until connected (and, for confirmed sends, until the window has room); write.

        Returns the outbox entry (None for untracked sends). Raises SendTimeout when
        ``deadline`` passes first, ConnectionClosed when the connection closes or gave up.
        """
        if kind == "untracked" and message_id is None:
            # Never re-sent, so never duplicated by us: no id is needed to recognise a replay,
            # and ActiveMQ turns every extra STOMP header into a message property, which more
            # than halved its intake of small fire-and-forget messages.
            chosen_id: str | None = None
            merged = dict(headers or {})
        else:
            chosen_id, merged = self.headers_for(headers, message_id)
        size = len(body)
        with self.cond:
            self._check_usable()

            def ready() -> bool:
                if self.state in _TERMINAL:
                    return True
                if self.state != "connected":
                    return False
                return kind != "confirmed" or self.outbox.has_room(size)

            # The common case (connected, room in the window) skips the wait machinery.
            if not ready() and not self.cond.wait_until(ready, deadline):
                reason = (
                    "confirmation window full"
                    if self.state == "connected"
                    else f"not connected ({self.state})"
                )
                raise SendTimeout(
                    f"send to {destination} timed out: {reason}", message_id=chosen_id
                )
            self._check_usable()
            slot = self.current
            assert slot is not None  # state "connected" implies a current slot
            self.stats.sent += 1
            if kind == "untracked":
                message = None
            else:
                future: Future[None] | None = None
                if kind == "confirmed":
                    future = Future()
                    # A running future cannot be cancelled: its outcome belongs to the broker.
                    future.set_running_or_notify_cancel()
                assert chosen_id is not None  # only untracked sends go without an id
                message = self.outbox.new(
                    message_id=chosen_id,
                    destination=destination,
                    body=body,
                    headers=merged,
                    kind=kind,
                    future=future,
                )
                evicted = self.outbox.add(message, slot)
                self.stats.evicted += len(evicted)
        if message is None:
            self._write_untracked(slot, destination, body, merged)
        else:
            with slot.io_lock:
                self._write_locked(slot, message)
        return message

    def _write_untracked(
        self, slot: Slot, destination: str, body: bytes, headers: Mapping[str, str]
    ) -> None:
        with slot.io_lock:
            session = slot.session
            assert session is not None
            try:
                session.send(destination, body, headers, None)
            except ConnectionFailure as exc:
                # Fire-and-forget without tracking: this message is lost with the session.
                self.slot_lost(slot, exc)

    def _write_locked(self, slot: Slot, message: OutboundMessage) -> None:
        """Write ``message`` to ``slot`` (caller holds ``slot.io_lock``)."""
        session = slot.session
        assert session is not None
        if not slot.alive or message.session is not slot:
            return  # stays in (or already moved with) the outbox to the next session
        try:
            session.send(
                message.destination,
                message.body,
                message.headers,
                partial(self._confirmed, message, slot),
            )
        except ConnectionFailure as exc:
            # Still in the outbox: it is replayed on the next session.
            self.slot_lost(slot, exc)
        except Exception as exc:  # noqa: BLE001 - the adapter refused this one message
            self._finish(message, exc)

    def _confirmed(self, message: OutboundMessage, slot: Slot, error: BaseException | None) -> None:
        """A session's on_confirm callback (adapter thread)."""
        if error is not None and isinstance(error, ConnectionFailure):
            return  # the session died before confirming: the message will be replayed
        if error is not None and message.session is not slot:
            return  # a verdict from a session the message already left; the replay decides
        self._finish(message, error)

    def _finish(self, message: OutboundMessage, error: BaseException | None) -> None:
        with self.cond:
            if not self.outbox.settle(message):
                return
            if error is None:
                self.stats.confirmed += 1
            else:
                self.stats.rejected += 1
            self.cond.notify_all()
        if message.future is not None:
            if error is None:
                message.future.set_result(None)
            else:
                message.future.set_exception(error)

    def wait_confirmed(self, message: OutboundMessage, deadline: float | None) -> None:
        """Block until ``message`` is confirmed; SendTimeout (and forget it) after ``deadline``."""
        future = message.future
        assert future is not None
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        remaining = None if deadline is None else max(0.0, deadline - self.clock.monotonic())
        if not self.clock.wait(done, remaining):
            with self.cond:
                abandoned = self.outbox.settle(message)
                if abandoned:
                    self.cond.notify_all()
            if abandoned:
                # The caller gets the error, so the message is no longer replayed; it may
                # still reach the broker (a retry by the caller can duplicate it).
                error = SendTimeout(
                    f"send to {message.destination} not confirmed in time",
                    message_id=message.message_id,
                )
                future.set_exception(error)
                raise error
        future.result()

    def flush(self, deadline: float | None) -> None:
        """Wait until every outstanding confirmation arrived."""
        with self.cond:
            done = self.cond.wait_until(
                lambda: len(self.outbox) == 0 or self.state in _TERMINAL, deadline
            )
            if self.state in _TERMINAL:
                self._check_usable()
            if not done:
                raise SendTimeout(f"{len(self.outbox)} confirmation(s) still outstanding")

    # --- subscriptions -----------------------------------------------------------------------

    def subscribe(
        self,
        destination: str,
        handler: Handler,
        *,
        ack: AckMode,
        subscription_id: str | None,
        durable_name: str | None,
        headers: Mapping[str, str] | None,
    ) -> Subscription:
        spec = SubscriptionSpec(
            id=subscription_id or self.subscriptions.new_id(),
            destination=destination,
            ack=ack,
            durable_name=durable_name,
            headers=tuple((headers or {}).items()),
        )
        subscription = Subscription(spec, handler, self)
        with self.cond:
            if self.state in _TERMINAL:
                self._check_usable()
            self.subscriptions.add(subscription)
            slot = self.current if self.state == "connected" else None
            if slot is not None:
                slot.subscribed.add(spec.id)
        if slot is not None:
            self._call(slot, lambda session: session.subscribe(spec))
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self.cond:
            self.subscriptions.remove(subscription.id)
            slot = self.current
            active = slot is not None and subscription.id in slot.subscribed
            if slot is not None:
                slot.subscribed.discard(subscription.id)
        if active and slot is not None:
            self._call(slot, lambda session: session.unsubscribe(subscription.id))

    def _call(self, slot: Slot, action: Callable[[Session], object]) -> bool:
        """Run ``action(session)`` under the slot's io_lock; a dead session counts as lost."""
        with slot.io_lock:
            if not slot.alive or slot.session is None:
                return False
            try:
                action(slot.session)
            except ConnectionFailure as exc:
                self.slot_lost(slot, exc)
                return False
            return True

    def deliver(self, slot: Slot, received: Received) -> None:
        """Run the handler for ``received`` (dispatch thread)."""
        subscription = self.subscriptions.get(received.subscription_id)
        if subscription is None:
            with self.cond:
                self.stats.unroutable += 1
            return
        message = Message(received, subscription, slot, self)
        subscription.delivered += 1
        try:
            subscription.handler(message)
        except Exception as exc:  # noqa: BLE001 - a handler must not kill the dispatch thread
            with self.cond:
                self.stats.handler_errors += 1
            self.emit(HandlerError(subscription.id, message.message_id, exc))

    def settle_message(self, message: Message, *, nack: bool) -> None:
        """Ack/nack on the session that delivered ``message``, or drop it if that one is dead."""
        slot = message.session
        assert isinstance(slot, Slot)
        received = message.received

        def send_it(session: Session) -> None:
            if nack:
                session.nack(received)
            else:
                session.ack(received)

        if not self._call(slot, send_it):
            with self.cond:
                self.stats.acks_dropped += 1
            self.emit(AckDropped(message.subscription.id, message.message_id, slot.broker, nack))

    # --- sessions coming and going -----------------------------------------------------------

    def install(self, slot: Slot) -> bool:
        """Make ``slot`` current: restore subscriptions, replay, then let new sends through.

        Returns False when the slot died (or the connection closed) on the way.
        """
        with self.cond:
            if self.state in _TERMINAL:
                slot.alive = False
                closing = True
            else:
                closing = False
                slot.role = "current"
                self.current = slot
        if closing:
            self._close_session(slot)
            return False
        while True:
            with self.cond:
                if not slot.alive or self.state in _TERMINAL:
                    if self.state not in _TERMINAL:
                        self.state = "reconnecting"
                    return False
                specs = [s for s in self.subscriptions.specs() if s.id not in slot.subscribed]
                slot.subscribed.update(s.id for s in specs)
                replay = self.outbox.take_for(slot)
                self.stats.replayed += len(replay)
                if not specs and not replay:
                    self.state = "connected"
                    self.cond.notify_all()
                    return True
            with slot.io_lock:
                self._restore_locked(slot, specs)
                for message in replay:
                    self._write_locked(slot, message)

    def _restore_locked(self, slot: Slot, specs: list[SubscriptionSpec]) -> None:
        """Subscribe ``specs`` on ``slot`` (caller holds ``slot.io_lock``)."""
        session = slot.session
        assert session is not None
        for spec in specs:
            with self.cond:
                # Unsubscribed meanwhile: unsubscribe() waits for io_lock, but may have run
                # before this loop took it.
                wanted = self.subscriptions.get(spec.id) is not None
            if not wanted:
                continue
            try:
                session.subscribe(spec)
            except ConnectionFailure as exc:
                self.slot_lost(slot, exc)
                return

    def slot_lost(self, slot: Slot, cause: BaseException) -> None:
        """A session died (adapter thread, or a failed write)."""
        events: list[Event] = []
        with self.cond:
            if not slot.alive:
                return
            slot.alive = False
            slot.cause = cause
            current = slot.role == "current" and self.state not in _TERMINAL
            if current:
                self.state = "reconnecting"
                events.append(Disconnected(slot.broker, cause))
                self.cond.notify_all()
            elif slot.role == "standby":
                if slot in self.standbys:
                    self.standbys.remove(slot)
                events.append(StandbyLost(slot.broker, cause))
        # The reconnect loop first: a log handler (a file, a socket, a lock held by another
        # thread) must neither hold the lock nor delay the fail-over.
        self.wake.set()
        if current:
            _log.warning("lost %s: %s", slot.broker, cause)
        for event in events:
            self.emit(event)

    def begin_switch(self) -> None:
        """Priority backup found a better broker: hold new sends while traffic moves."""
        with self.cond:
            if self.state == "connected":
                self.state = "switching"
                self.cond.notify_all()

    def drain(self, slot: Slot, deadline: float | None) -> bool:
        """Wait until nothing is awaiting confirmation from ``slot`` (or it died)."""
        with self.cond:
            return self.cond.wait_until(
                lambda: (
                    self.outbox.written_to(slot) == 0 or not slot.alive or self.state in _TERMINAL
                ),
                deadline,
            )

    def retire(self, slot: Slot) -> None:
        """Stop using ``slot`` (after a switch): acks for its messages are dropped from now."""
        with self.cond:
            slot.alive = False
            slot.role = "retired"
        self._close_session(slot)

    def add_standby(self, slot: Slot) -> bool:
        with self.cond:
            usable = self.state not in _TERMINAL and slot.alive
            if usable:
                slot.role = "standby"
                self.standbys.append(slot)
            else:
                slot.alive = False
        if not usable:
            self._close_session(slot)
            return False
        self.emit(StandbyConnected(slot.broker))
        return True

    def take_standby(self) -> Slot | None:
        """The first live standby, removed from the standby list (for a fail-over)."""
        with self.cond:
            while self.standbys:
                slot = self.standbys.pop(0)
                if slot.alive:
                    slot.role = "dialing"
                    return slot
        return None

    def standby_count(self) -> int:
        with self.cond:
            return sum(s.alive for s in self.standbys)

    def standby_keys(self) -> set[str]:
        with self.cond:
            return {s.address.key for s in self.standbys if s.alive}

    def drop_standbys(self) -> None:
        with self.cond:
            slots, self.standbys = self.standbys, []
            for slot in slots:
                slot.alive = False
        for slot in slots:
            self._close_session(slot)

    @staticmethod
    def _close_session(slot: Slot) -> None:
        if slot.session is not None:
            slot.session.close()

    # --- the end -----------------------------------------------------------------------------

    def give_up(self, error: BaseException) -> None:
        """The reconnect loop stopped for good: fail everything that waits."""
        with self.cond:
            if self.state in _TERMINAL:
                return
            _log.error("giving up: %s", error)
            self.state = "failed"
            self.error = error
            pending = self.outbox.clear()
            self.cond.notify_all()
        for message in pending:
            if message.future is not None:
                message.future.set_exception(error)

    def close(self) -> bool:
        """Close everything; returns False if it was already closed."""
        with self.cond:
            if self.state == "closed":
                return False
            self.state = "closed"
            pending = self.outbox.clear()
            slots = [s for s in (self.current, *self.standbys) if s is not None]
            for slot in slots:
                slot.alive = False
            self.cond.notify_all()
        self.stop.set()
        self.wake.set()
        for message in pending:
            if message.future is not None:
                message.future.set_exception(
                    ConnectionClosed(f"connection closed before {message.message_id} was confirmed")
                )
        for slot in slots:
            self._close_session(slot)
        self.emit(Closed())
        return True

    def snapshot(self) -> tuple[State, Slot | None, Stats, int, int, int]:
        """(state, current, stats copy, in flight, standbys, subscriptions) for repr."""
        with self.cond:
            stats = Stats(**vars(self.stats))
            return (
                self.state,
                self.current,
                stats,
                len(self.outbox),
                sum(s.alive for s in self.standbys),
                len(self.subscriptions),
            )
