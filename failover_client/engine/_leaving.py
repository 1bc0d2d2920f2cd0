"""Moves that strand nothing: the sessions a connection leaves, kept until their broker is quiet.

A planned move (a priority return, a rebalance) is make-before-break: the new session gets every
subscription and its confirmations (:meth:`Departures.prepare`) before sends move to it, and the
old session becomes *leaving*: still alive, still delivering into the same subscriptions'
handlers, its messages acknowledged on it, no new send written to it, its loss no fail-over.

Why keep it: on a network of brokers a queue message forwarded to the broker a consumer sat on
never crosses back (``networkTTL`` 1), so what that broker holds for the consumer when it leaves
waits there until some consumer comes. The leaving session therefore keeps consuming its queue
subscriptions (``drain_on_move``) until it delivered nothing for ``drain_quiet`` seconds, or until
``drain_timeout`` (``DrainStarted`` / ``DrainFinished``, ``complete=False`` at the deadline). Its
other subscriptions (topics, durable subscriptions) stop at once: a topic is delivered on every
broker, so keeping it would deliver each message twice, and a durable subscription keeps collecting
on its broker whatever we do (only the application can end it). A session that is not drained
(the option off, or no queue subscription) stops at once: what it delivered and no handler took is
released (``Session.release``) before it closes.

A drain that delivered anything, or was cut short, is followed by another of the same broker
later (the recovery below), until one finds it empty: while a producer runs, a peer may go on
forwarding to the broker for a moment after our consumer there left.

A broker left by a failure cannot be drained on the way out. While the connection has queue
subscriptions and moves by itself (``priority_backup`` or ``rebalance``), such a broker is
remembered; once it answers again (tried on the priority probe's back-off) and it is not the
broker in use, a drain session is opened there with the queue subscriptions only
(``DrainStarted`` reason ``recovered``) and ends like a move's. Its subscriptions carry a low
ActiveMQ consumer priority (:data:`DRAIN_PRIORITY`): ActiveMQ copies a remote consumer's priority
into the network bridge's demand subscription, so the broker in use keeps preferring our main
consumer and the drain is not fed what it forwards.

A connection that starts cannot know what an earlier consumer of the same application left on
the other members (a process killed while a drain ran, or before a drain of a recovered broker
came round, left its deliveries and whatever the network forwarded to it there). With
``drain_on_start`` (for a Spark source on a network of brokers, whose recovery is a restarted
driver), every member but
the one the connection starts on is remembered at start as if a failure had left it, and
drained once it answers: a restarted consumer finds what the one before it stranded. A broker
that holds nothing costs one quiet drain (``drain_quiet``); one that a network of brokers feeds
with live traffic is drained until it is quiet or ``drain_timeout``, which is why it is not
the default.

Every timer is :func:`._decide.decide`'s: :meth:`Departures.view` copies each leaving session's
quiet-until and deadline into the view; the loop performs ``EndDrain`` / ``CloseLeaving`` /
``Recover``. A session's end waits for the messages it already delivered to be handled: the
consumers tell it once none of them waits in a subscription's buffer or runs in a handler, which
marks it flushed and wakes the loop, which then closes it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from failover_client._clock import Clock
from failover_client._errors import ConnectionFailure
from failover_client._events import DrainFinished, DrainStarted, Event, MessagesReleased
from failover_client.adapter import SubscriptionSpec
from failover_client.engine._decide import Leaving
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["DRAIN_PRIORITY", "Departures", "drains"]

_log = logging.getLogger("failover_client")

DRAIN_PRIORITY = "-10"
"""ActiveMQ consumer priority (``activemq.priority``) of a recovered broker's drain subscription:
below the default 0 of the consumers that do the work, and below the network consumers'
priority when ``decreaseNetworkConsumerPriority`` is on (-5 less one per hop)."""

_QUEUE_PREFIXES = ("/queue/", "/amq/queue/", "queue://", "queue:")
_OTHER_PREFIXES = ("/temp-queue/", "/reply-queue/", "temp-queue://")


def drains(spec: SubscriptionSpec) -> bool:
    """Whether a broker left behind may hold messages only ``spec`` would read: a queue.

    ``/queue/x`` (STOMP), ``/amq/queue/x`` (RabbitMQ), ``queue://x`` (ActiveMQ AMQP) and a plain
    name (ActiveMQ over AMQP and Artemis anycast read it as a queue) are; topics and exchanges
    are not (every broker delivers them), nor temporary queues (they die with the session), nor
    durable subscriptions (they keep collecting on their broker whatever a drain does).
    """
    if spec.durable_name:
        return False
    destination = spec.destination
    if destination.startswith(_QUEUE_PREFIXES):
        return True
    if destination.startswith(_OTHER_PREFIXES):
        return False
    return not destination.startswith("/") and ":" not in destination


@dataclass
class _Departure:
    """One leaving session and its drain."""

    slot: Slot
    reason: str
    drained: tuple[str, ...]
    """Subscription ids kept consuming (empty: not drained, stopped at once)."""
    started: float
    deliveries: int
    """The session's delivery count when it began leaving."""
    ending: bool = False
    complete: bool = True
    flushed: bool = False


class Departures:
    """The leaving sessions of one connection and the brokers a failure left holding messages.

        The reconnect loop calls everything but :meth:`_flushed` (told by the consumers, on the
    thread that finished the session's last message).
    """

    __slots__ = (
        "_ack_handled",
        "_clock",
        "_departures",
        "_emit",
        "_left",
        "_lock",
        "_open",
        "_options",
        "_state",
        "_when_flushed",
    )

    def __init__(
        self,
        *,
        state: ConnectionState,
        open_session: Callable[[BrokerAddress], Slot],
        clock: Clock,
        options: FailoverOptions,
        emit: Callable[[Event], None],
        when_flushed: Callable[[Slot, Callable[[], None]], None],
        ack_handled: Callable[[Slot, list[str]], None] = lambda slot, ids: None,
    ) -> None:
        self._state = state
        self._when_flushed = when_flushed
        self._ack_handled = ack_handled
        """Writes the acknowledgements the consumers hold back for a batch (``_autoack``)."""
        self._open = open_session
        self._clock = clock
        self._options = options
        self._emit = emit
        self._lock = threading.Lock()
        self._departures: dict[int, _Departure] = {}
        self._left: dict[str, BrokerAddress] = {}
        """Brokers left by a failure, by key, to drain once they answer."""

    # --- a move ------------------------------------------------------------------------------

    def prepare(self, slot: Slot) -> bool:
        """Subscribe everything on ``slot`` and wait for the answers (bounded: PROBE_TIMEOUT).

        False when ``slot`` died meanwhile. The install that follows finds nothing missing.
        """
        keeper = self._state.keeper
        with self._state.cond:
            specs = keeper.claim_missing(slot)
        if specs:
            keeper.restore(slot, specs)
        return keeper.settle(slot)

    def leave(self, slot: Slot, reason: str) -> None:
        """``slot`` is no longer current: drain its queue subscriptions or stop it at once."""
        state = self._state
        keeper = state.keeper
        with state.cond:
            specs = [s.spec for i in sorted(slot.subscribed) if (s := keeper.get(i)) is not None]
        kept = [s.id for s in specs if drains(s)] if self._options.drain_on_move else []
        stop = [s.id for s in specs if s.id not in kept]
        if stop and slot.alive:
            # Released before the UNSUBSCRIBE: a message of theirs still waiting for its
            # handler is not acknowledged on a subscription the broker already ended.
            slot.stopped.update(dict.fromkeys(stop))
            self._ack_handled(slot, stop)  # a broker may refuse an ack after the UNSUBSCRIBE
            self._unsubscribe(slot, stop)
        departure = _Departure(
            slot=slot,
            reason=reason,
            drained=tuple(kept),
            started=self._clock.monotonic(),
            deliveries=slot.deliveries,
        )
        with self._lock:
            self._departures[slot.number] = departure
        if kept:
            self._emit(DrainStarted(slot.broker, departure.drained, reason))
            _log.info("draining %s for %s (%s)", slot.broker, ", ".join(kept), reason)
        else:
            self.end(slot.number, complete=True)

    def _unsubscribe(self, slot: Slot, ids: list[str]) -> None:
        with self._state.cond:
            for subscription_id in ids:
                slot.subscribed.pop(subscription_id, None)
        with slot.io_lock:
            session = slot.session
            if session is None or not slot.alive:
                return
            try:
                for subscription_id in ids:
                    session.unsubscribe(subscription_id)
            except ConnectionFailure as exc:
                self._state.slot_lost(slot, exc)

    # --- a failure ---------------------------------------------------------------------------

    def _drains_left(self) -> bool:
        """Whether brokers left behind are drained: the connection moves by itself."""
        options = self._options
        return options.drain_on_move and (options.priority_backup or options.rebalance)

    def lost(self, slot: Slot) -> None:
        """The current session ``slot`` died: remember its broker if it may hold our messages."""
        if not self._drains_left():
            return
        if not any(drains(s) for s in self._state.keeper.specs()):
            return
        self._left[slot.address.key] = slot.address

    def started(self, slot: Slot, members: Iterable[BrokerAddress]) -> None:
        """The connection's first session is ``slot``: remember every other member, which an
        earlier process of the application may have left holding messages (module docstring).

        Only under ``drain_on_start``. Kept even before any subscription exists (one made
        after ``connect()`` counts); they are tried only while a queue is subscribed
        (:meth:`recover_targets`).
        """
        if not self._options.drain_on_start:
            return
        for address in members:
            if address.key != slot.address.key:
                self._left.setdefault(address.key, address)

    def recover_targets(
        self, current: Slot, skip: tuple[BrokerAddress, ...]
    ) -> tuple[BrokerAddress, ...]:
        """Brokers left by a failure to try now: not the one in use (its consumer reads what it
        holds), not one being drained, not one in ``skip`` (a priority return goes there)."""
        self._left.pop(current.address.key, None)
        if not self._left or not any(drains(s) for s in self._state.keeper.specs()):
            return ()  # nothing of ours can be waiting there
        with self._lock:
            busy = {d.slot.address.key for d in self._departures.values()}
        skipped = {a.key for a in skip}
        return tuple(a for k, a in self._left.items() if k not in busy and k not in skipped)

    def recover(self, address: BrokerAddress) -> bool:
        """Open a drain session on ``address`` (raises ConnectionFailure when it does not
        answer); False when there is nothing to drain any more."""
        specs = [s for s in self._state.keeper.specs() if drains(s)]
        if not specs:
            self._left.pop(address.key, None)
            return False
        slot = self._open(address)
        self._left.pop(address.key, None)
        state = self._state
        keeper = state.keeper
        state.hand_over(slot)
        with state.cond:
            for spec in specs:
                keeper.claim(slot, spec.id)
        with slot.io_lock:
            for spec in specs:
                if not keeper.write(slot, _low_priority(spec)):
                    break
        keeper.settle(slot)
        self.leave(slot, "recovered")
        return True

    # --- the timers (decide()'s) -------------------------------------------------------------

    def view(self, now: float) -> tuple[Leaving, ...]:
        """Each leaving session's timers; a session that died ends its drain here."""
        with self._lock:
            departures = list(self._departures.values())
        out: list[Leaving] = []
        quiet = self._options.drain_quiet
        for d in departures:
            slot = d.slot
            if not slot.alive and not d.flushed:
                self._finish(d, complete=False)
                continue
            last = slot.last_delivery_at
            if d.drained:
                quiet_until = max(d.started, last if last is not None else d.started) + quiet
            else:
                quiet_until = d.started
            deadline = d.started + self._options.drain_timeout
            out.append(Leaving(slot.number, quiet_until, deadline, d.ending, d.flushed))
        return tuple(out)

    def end(self, number: int, *, complete: bool) -> None:
        """Stop the drain of session ``number``: handle (or, cut short, release) what it
        delivered, then let the consumers mark it flushed."""
        with self._lock:
            departure = self._departures.get(number)
            if departure is None or departure.ending:
                return
            departure.ending = True
            departure.complete = complete
        if not complete or not departure.drained:
            departure.slot.release_unhandled = True
        # Once no message the session delivered waits in a buffer or runs in a handler.
        self._when_flushed(departure.slot, functools.partial(self._flushed, number))

    def _flushed(self, number: int) -> None:
        with self._lock:
            departure = self._departures.get(number)
        if departure is not None:
            # Handled messages whose acknowledgement waits for more (``_autoack``): none comes.
            self._ack_handled(departure.slot, list(departure.drained))
            with self._lock:
                departure.flushed = True
        self._state.wake.set()

    def close(self, number: int) -> None:
        """Close the flushed session ``number`` and report its drain."""
        with self._lock:
            departure = self._departures.get(number)
        if departure is not None:
            self._finish(departure, complete=departure.complete)

    def _finish(self, departure: _Departure, *, complete: bool) -> None:
        slot = departure.slot
        with self._lock:
            if self._departures.pop(slot.number, None) is None:
                return
        # A message that arrives from here on is handed back, not acknowledged on a closed
        # session (the broker returns it when the session ends).
        slot.release_unhandled = True
        self._state.retire(slot)
        with self._state.cond:
            released = dict(slot.released)
        for subscription_id, count in released.items():
            self._emit(MessagesReleased(subscription_id, slot.broker, count, "move"))
        if departure.drained:
            elapsed = self._clock.monotonic() - departure.started
            delivered = slot.deliveries - departure.deliveries
            if delivered or not complete:
                # Once more later, until a drain finds the broker empty: while a producer runs,
                # a peer may forward more to it after the quiet period (its demand from our
                # consumer there outlives the consumer by a moment), and a drain cut short or
                # by a loss left messages there.
                self._left[slot.address.key] = slot.address
            self._emit(DrainFinished(slot.broker, delivered, elapsed, complete))
            log = _log.info if complete else _log.warning
            log(
                "drained %s: %d messages in %.1f s%s",
                slot.broker,
                delivered,
                elapsed,
                "" if complete else " (cut short by drainTimeout)",
            )

    def close_all(self) -> None:
        """The connection ends: close every leaving session (no events: it is closing)."""
        with self._lock:
            departures, self._departures = list(self._departures.values()), {}
        for departure in departures:
            departure.slot.release_unhandled = True
            self._state.retire(departure.slot)


def _low_priority(spec: SubscriptionSpec) -> SubscriptionSpec:
    """``spec`` with :data:`DRAIN_PRIORITY` unless the application set a priority itself."""
    if any(k == "activemq.priority" for k, _ in spec.headers):
        return spec
    return dataclasses.replace(spec, headers=(*spec.headers, ("activemq.priority", DRAIN_PRIORITY)))
