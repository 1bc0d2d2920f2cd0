"""The state of one failover connection: which sessions it holds and what each one carries.

Application threads (send, subscribe, ack, close), adapter I/O threads (confirmations,
losses), handler workers (acks) and the reconnect loop all meet here, under one lock
(:class:`ClockCondition`, so waits run on the injected clock). The data is cut where it is owned,
and each owner offers operations, never its fields:

* :class:`ConnectionState`: the state machine, the current and standby :class:`Slot` s, the
  connection's counters and the end (give up, close). It answers the others' questions through
  :class:`~failover_client.engine._slot.Lifecycle` (a session to write to? over?).
* its :class:`~failover_client.engine._sender.Sender`: the outbox (window, replay list) and the
  send counters;
* its :class:`~failover_client.engine._restore.SubscriptionKeeper`: the subscriptions and what
  each session was asked for and answered.

One lock for the three, because their invariants span them: a send registers in the outbox only
while a session is current and connected, and an install moves the state to "connected" only
once the keeper has restored and the sender has replayed. Rules that keep it deadlock-free:

* Calls into a session happen outside the lock, under that session's ``io_lock``; a session may
  call back (confirm, lose) synchronously from inside such a call, and callbacks take only the
  lock. Lock order is therefore ``io_lock`` -> lock, never the reverse.
* Futures are resolved and events emitted after the lock is released (their callbacks are user
  code).

Sends register in the outbox only while a session is current and connected; the reconnect loop
:meth:`installs <ConnectionState.install>` a new session by restoring subscriptions and
re-sending every unconfirmed message *before* it lets new sends through, so replays keep their
original order ahead of anything new.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from failover_client._clock import Clock
from failover_client._errors import (
    AllBrokersFailed,
    ConnectionClosed,
    ConnectionFailure,
    NotConnected,
)
from failover_client._events import (
    Closed,
    Disconnected,
    Event,
    StandbyConnected,
    StandbyLost,
)
from failover_client._lazy import LazyEvent
from failover_client.adapter import Session
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._outbox import MessageIds
from failover_client.engine._parking import WakeEvent
from failover_client.engine._restore import SubscriptionKeeper
from failover_client.engine._sender import Sender
from failover_client.engine._slot import Slot
from failover_client.engine._subscriptions import Subscription
from failover_client.engine._sync import ClockCondition
from failover_client.uri import FailoverOptions

__all__ = ["ConnectionCounters", "ConnectionState", "State", "Stats"]

_log = logging.getLogger("failover_client")

State = Literal["new", "connecting", "connected", "reconnecting", "switching", "failed", "closed"]
_TERMINAL: tuple[State, ...] = ("failed", "closed")


@dataclass
class ConnectionCounters:
    """What the connection itself counts (the send path counts the rest: ``SendCounters``)."""

    failovers: int = 0
    acks_dropped: int = 0
    handler_errors: int = 0
    unroutable: int = 0


@dataclass
class Stats:
    """Counters shown by ``repr(connection)`` and ``stats()``: the send path's and the
    connection's together."""

    sent: int = 0
    confirmed: int = 0
    rejected: int = 0
    replayed: int = 0
    evicted: int = 0
    failovers: int = 0
    acks_dropped: int = 0
    handler_errors: int = 0
    unroutable: int = 0


class ConnectionState:
    """The state machine and sessions shared by the public API, the adapters and the loop."""

    __slots__ = (
        "_causes",
        "_process_check",
        "clock",
        "cond",
        "current",
        "dispatcher",
        "emit",
        "error",
        "keeper",
        "options",
        "sender",
        "standbys",
        "state",
        "stats",
        "stop",
        "wake",
    )

    TERMINAL: ClassVar[tuple[State, ...]] = _TERMINAL
    USABLE: ClassVar[frozenset[State]] = frozenset(
        ("connecting", "connected", "reconnecting", "switching")
    )
    """States in which a call may wait for a session; the others raise (:meth:`raise_unusable`)."""

    def __init__(
        self,
        *,
        options: FailoverOptions,
        clock: Clock,
        emit: Callable[[Event], None],
        dispatcher: Dispatcher,
        message_ids: MessageIds,
        process_check: Callable[[], None] = lambda: None,
    ) -> None:
        self.options = options
        # Raises in a child forked after the connection was made: a Subscription or a Message
        # kept across fork() must not write on the parent's session either.
        self._process_check = process_check
        self.clock = clock
        self.emit = emit
        self.dispatcher = dispatcher
        self.cond = ClockCondition(clock)
        self.state: State = "new"
        self.current: Slot | None = None
        self.standbys: list[Slot] = []
        self.stats = ConnectionCounters()
        """Changed and read under ``cond`` (the reconnect loop counts fail-overs here)."""
        self.error: BaseException | None = None
        """Why the reconnect loop gave up (state ``failed``); what ``connect()`` raises."""
        self._causes: dict[str, BaseException] = {}
        """Every broker's last error when the loop gave up."""
        self.stop = LazyEvent()
        """Set by close(): interrupts every wait of the reconnect loop."""
        self.wake = WakeEvent()
        """Wakes the reconnect loop when something it watches changed."""
        self.sender = Sender(
            options=options, clock=clock, cond=self.cond, lifecycle=self, message_ids=message_ids
        )
        self.keeper = SubscriptionKeeper(clock=clock, cond=self.cond, lifecycle=self, emit=emit)

    # --- what the sender and the keeper ask (Lifecycle; lock held) ---------------------------

    def connected_slot(self) -> Slot | None:
        return self.current if self.state == "connected" else None

    def is_over(self) -> bool:
        return self.state in _TERMINAL

    def phase(self) -> str:
        return self.state

    # --- refusing work -----------------------------------------------------------------------

    def raise_unusable(self) -> None:
        """Raise the error of a state outside :attr:`USABLE` (lock held)."""
        if self.state == "closed":
            raise ConnectionClosed("the connection is closed")
        if self.state == "failed":
            raise self.gave_up_error()
        if self.state == "new":
            raise NotConnected("the connection is not started; call connect() first")

    def gave_up_error(self) -> AllBrokersFailed:
        """A fresh :class:`AllBrokersFailed` for a call after the reconnect loop gave up.

        Fresh, because one instance raised over and over (a producer loop that keeps trying)
        would grow its traceback with every raise. It carries the same causes, and its
        ``__cause__`` is the error the loop gave up with (the ``GaveUp`` event's).
        """
        error = self.error
        if isinstance(error, AllBrokersFailed):
            fresh = AllBrokersFailed(error.reason, error.causes)
        else:
            # Stopped by a refused credential / certificate (the causes name it), or by a bug
            # in the loop itself (no causes: the message must).
            kind = type(error).__name__
            reason = f"the reconnect loop gave up on {kind}"
            if not self._causes:
                reason = f"{reason}: {error}"
            fresh = AllBrokersFailed(reason, self._causes)
        fresh.__cause__ = error
        return fresh

    # --- subscriptions -----------------------------------------------------------------------

    def subscribe(self, subscription: Subscription) -> None:
        """Keep ``subscription`` and write it on the current session, if connected."""
        keeper = self.keeper
        spec = subscription.spec
        with self.cond:
            if self.state in _TERMINAL:
                self.raise_unusable()
            keeper.add(subscription)
            slot = self.connected_slot()
            if slot is not None:
                keeper.claim(slot, spec.id)
        if slot is not None:
            with slot.io_lock:
                keeper.write(slot, spec)

    def wait_active(self, subscription: Subscription, timeout: float | None) -> None:
        self._process_check()
        self.keeper.wait_active(subscription, timeout)

    def is_active(self, subscription: Subscription) -> bool:
        """Whether the broker in use confirmed ``subscription`` (and it is still wanted)."""
        with self.cond:
            return self.is_active_locked(subscription)

    def is_active_locked(self, subscription: Subscription) -> bool:
        """:meth:`is_active` with the lock held (``health()`` reads every one at one moment)."""
        slot = self.connected_slot()
        return (
            slot is not None
            and self.keeper.get(subscription.id) is subscription
            and subscription.id in slot.subscribed
            and subscription.id not in slot.pending_subs
        )

    def forget(self, subscription: Subscription) -> Slot | None:
        """Stop restoring ``subscription``; the session it must be unsubscribed from, if any."""
        self._process_check()
        with self.cond:
            slot = self.current
            active = self.keeper.release(subscription.id, slot)
        return slot if active else None

    def unsubscribe(self, subscription: Subscription) -> None:
        """Forget ``subscription`` and UNSUBSCRIBE it on the session that has it."""
        slot = self.forget(subscription)
        if slot is not None:
            self.call(slot, lambda session: session.unsubscribe(subscription.id))

    def call(self, slot: Slot, action: Callable[[Session], object]) -> bool:
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

    def count(self, counter: str) -> None:
        """Add one to a :class:`ConnectionCounters` field (the consumers' counters)."""
        with self.cond:
            setattr(self.stats, counter, getattr(self.stats, counter) + 1)

    def check_process(self) -> None:
        """Raise in a child forked after the connection was made."""
        self._process_check()

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
                specs = self.keeper.claim_missing(slot)
            if specs:
                self.keeper.restore(slot, specs)
            with self.cond:
                suspects = self.sender.suspects_waiting(slot)
            if suspects:
                # A loss counts against everything unconfirmed on the slot: a suspect is
                # alone on the wire only once every SUBSCRIBE has its answer.
                self.keeper.settle(slot)
                self.sender.probe(slot)
            with self.cond:
                if not slot.alive or self.state in _TERMINAL:
                    continue  # the check above ends the install
                replay = self.sender.take_replay(slot)
                if not specs and not replay:
                    self.state = "connected"
                    self.cond.notify_all()
                    return True
            # New sends wait for "connected", so nothing overtakes the replay; another round
            # catches up with subscriptions added while this one ran.
            if replay:
                with slot.io_lock:
                    self.sender.replay_locked(slot, replay)

    def is_live(self, slot: Slot) -> bool:
        """Whether ``slot`` still speaks for the connection (not retired, dead or closed)."""
        with self.cond:
            return slot.alive and self.state not in _TERMINAL

    def slot_lost(self, slot: Slot, cause: BaseException) -> None:
        """A session died (adapter thread, or a failed write)."""
        events: list[Event] = []
        with self.cond:
            if not slot.alive:
                return
            slot.alive = False
            slot.cause = cause
            poison = refused = None
            if not slot.redirected:  # a broker that sends us elsewhere refused no frame
                unconfirmed = self.sender.unconfirmed_on(slot)
                alone = len(unconfirmed) + self.keeper.unanswered(slot) == 1
                poison = self.sender.blame_loss(unconfirmed, cause, alone=alone)
                refused = self.keeper.blame_loss(slot, cause, alone=alone)
            if poison is not None or refused is not None:
                # The frames suspected with the poison one go again at once: brokers read
                # in order, so what followed it was never read, and what preceded it was
                # accepted (its confirmation lost with the connection, replayed at no risk).
                self.sender.exonerate()
                self.keeper.exonerate()
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
        if poison is not None:
            events.append(self.sender.quarantine(poison, slot.broker, cause))
            _log.error("quarantined send %s as poison: %s", poison.message_id, cause)
        if refused is not None:  # after Disconnected: listeners hear the loss, then its verdict
            events.append(refused)
            _log.error("quarantined subscription %s as poison: %s", refused.subscription_id, cause)
        for event in events:
            self.emit(event)

    def begin_switch(self) -> None:
        """Priority backup found a better broker: hold new sends while traffic moves."""
        with self.cond:
            if self.state == "connected":
                self.state = "switching"
                self.cond.notify_all()

    def hand_over(self, slot: Slot) -> None:
        """``slot`` is being left (a make-before-break move) or only drained: it keeps its
        subscriptions, but its loss is no fail-over (see ``engine._leaving``)."""
        with self.cond:
            if slot.role in ("current", "dialing"):
                slot.role = "leaving"

    def reinstate(self, slot: Slot) -> bool:
        """A move's new session failed: ``slot`` is current again (False: it died too)."""
        with self.cond:
            if not slot.alive or self.state in _TERMINAL:
                return False
            slot.role = "current"
            self.current = slot
            self.state = "connected"
            self.cond.notify_all()
            return True

    def drain(self, slot: Slot, deadline: float | None) -> bool:
        """Wait until nothing is awaiting confirmation from ``slot`` (or it died)."""
        sender = self.sender
        with self.cond:
            return self.cond.wait_until(
                lambda: sender.drained(slot) or not slot.alive or self.state in _TERMINAL,
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

    def give_up(self, error: BaseException, causes: Mapping[str, BaseException]) -> None:
        """The reconnect loop stopped for good: fail everything that waits.

        ``error`` is what the loop stopped with (``connect()`` raises it); ``causes`` is every
        broker's last error, which later calls carry in their :class:`AllBrokersFailed`.
        """
        with self.cond:
            if self.state in _TERMINAL:
                return
            _log.error("giving up: %s", error)
            self.state = "failed"
            self.error = error
            self._causes = dict(causes)
            pending = self.sender.abandon()
            failure = self.gave_up_error()
            self.cond.notify_all()
        self.sender.fail(pending, failure)

    def close(self) -> bool:
        """Close everything; returns False if it was already closed."""
        with self.cond:
            if self.state == "closed":
                return False
            self.state = "closed"
            pending = self.sender.abandon()
            slots = [s for s in (self.current, *self.standbys) if s is not None]
            for slot in slots:
                slot.alive = False
            self.cond.notify_all()
        self.stop.set()
        self.wake.set()
        for message in pending:
            self.sender.fail(
                [message],
                ConnectionClosed(f"connection closed before {message.message_id} was confirmed"),
            )
        for slot in slots:
            self._close_session(slot)
        self.emit(Closed())
        return True

    def snapshot(self) -> tuple[State, Slot | None, Stats, int, int, int]:
        """(state, current, stats copy, in flight, standbys, subscriptions) for repr."""
        with self.cond:
            stats = Stats(**vars(self.sender.counters()), **vars(self.stats))
            return (
                self.state,
                self.current,
                stats,
                self.sender.in_flight(),
                sum(s.alive for s in self.standbys),
                len(self.keeper),
            )
