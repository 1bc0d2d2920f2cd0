"""Consumption: deliveries into bounded buffers, handlers on workers, acks, pull, drain and close.

A message goes from a session's I/O thread into its subscription's
:class:`~failover_client.engine._inbox.Inbox` and is handled from there, by the subscription's
handler on a worker thread, or by the application through ``receive()`` / iteration. A worker
takes what is buffered in batches of up to :data:`TAKE_MAX` (one lock, not two per message) and
handles them one at a time, in order; what a stop finds not started goes back to the buffer. The
engine settles what it owns: a user's ``auto`` message is acknowledged once handled (a callback
subscription's cumulatively, in batches: ``_autoack``), a handler that raises gets its message
rejected (``nack``) so the broker redelivers or dead-letters it. Since
every subscription is on the wire with client acknowledgement and a prefetch, the broker sends
a subscription at most ``prefetch`` messages beyond what was handled: a slow handler leaves the
backlog on the broker.

Why one worker thread per callback subscription (not one dispatch thread, not a shared pool):
the order of a subscription's messages is its handler's order, so one subscription runs one
handler at a time whatever the pool; a pool smaller than the subscriptions would let a few slow
handlers hold every thread and starve the others, and a pool as large is a thread each anyway.
A thread per subscription is also what makes a stuck handler cheap to leave behind at close
(a daemon thread, named after its subscription). Events stay on the dispatch thread, so a slow
handler delays neither listeners nor confirmations, nor heart-beats (the I/O threads).

A worker runs on the connection's clock for its whole life (waiting for messages through it),
so a virtual clock only moves while every worker waits: a handler is never cut short by a
jump of time, and a stop's deadlines are exact. The price, in tests on a virtual clock: a
handler that blocks outside the clock (a plain ``Event.wait``) stops virtual time while it
blocks, reconnect delays included; block through the clock (``clock.wait(event, None)``) or
move it by hand.

Stopping (``close(drain=...)``, ``drain()``, an unsubscribe) follows one order: hold the
acknowledgements (none is written, so the broker's window stays full and it sends nothing
new), let the workers handle what is buffered until the buffers are empty or the deadline,
stop taking, give running handlers until ``max(drain, 1 s)``, write the held acknowledgements,
then hand back (``Session.release``) every message never handled, reported as
``MessagesReleased``. Nothing is acknowledged unhandled and nothing is lost: what was neither
acknowledged nor released goes back to the broker when its session or subscription ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from failover_client._clock import Clock, running_on
from failover_client._errors import ConfigurationError
from failover_client._events import (
    AckDropped,
    Event,
    HandlerError,
    PrefetchExceeded,
    SubscriptionFailed,
)
from failover_client.adapter import AckMode, Received, Session, SubscriptionSpec
from failover_client.engine._arguments import check_timeout
from failover_client.engine._autoack import ACK_LINGER, AutoAcks, batched, may_wait
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._inbox import Inbox
from failover_client.engine._observe import Observer, broker_of, observe_handler, safely
from failover_client.engine._progress import Progress
from failover_client.engine._releases import Releases
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState
from failover_client.engine._subscriptions import Handler, Message, Subscription

__all__ = ["HANDLER_GRACE", "TAKE_MAX", "Consumers"]

_log = logging.getLogger("failover_client")

HANDLER_GRACE = 1.0
"""Seconds a stop gives the running handlers at least (``close()`` returns after them at most)."""

TAKE_MAX = 64
"""The most buffered messages a handler worker takes at once (``Inbox.take_batch``).

Taking and finishing one at a time cost 1.33 us a message on one thread (two locks, two
``changed``: ``benchmarks/probe_inbox_handoff.py``); batches of 16 cost 0.28 us, of 64 0.16, of
256 0.12: past 64 what is left is under 0.1 % of a consumed message's CPU, and a smaller batch
holds the lock the I/O thread puts with for less time."""


class Consumers:
    """The consuming side of one connection (see the module docstring); the messages' router."""

    __slots__ = ("_auto_acks", "_clock", "_dispatcher", "_emit", "_held", "_holding",
                 "_lock", "_name", "_progress", "_releases", "_state",
                 "_subscriptions", "_unsubscribe_after", "_workers", "observer")  # fmt: skip

    def __init__(
        self,
        *,
        state: ConnectionState,
        clock: Clock,
        emit: Callable[[Event], None],
        dispatcher: Dispatcher,
        name: str,
    ) -> None:
        self._state = state
        self._clock = clock
        self._emit = emit
        self._dispatcher = dispatcher
        self._name = name
        self._lock = threading.Lock()
        self._holding = False
        """Acknowledgements are held (a stop is under way), written by :meth:`_flush_held`."""
        self._held: list[tuple[Message, bool]] = []
        self._workers: dict[threading.Thread, Subscription] = {}
        self._subscriptions: dict[str, Subscription] = {}
        """By id, the subscriptions made here and not yet unsubscribed, drained or refused."""
        self._auto_acks = AutoAcks()
        self._progress = Progress(clock, self._holds)
        """What a stop and a session being left wait for (inboxes tell it when they move on)."""
        self._unsubscribe_after: dict[str, Slot] = {}
        """UNSUBSCRIBEs asked by a handler of the subscription itself: written after its ack."""
        self._releases = Releases(
            state=state, dispatcher=dispatcher, emit=emit, ack_handled_on=self.ack_handled_on
        )
        self.observer: Observer | None = None
        """Told of each handler call and pulled message (``_observe``)."""

    # --- subscribing -------------------------------------------------------------------------

    def subscribe(
        self,
        destination: str,
        handler: Handler | None,
        *,
        ack: AckMode,
        subscription_id: str | None,
        durable_name: str | None,
        headers: Mapping[str, str] | None,
        prefetch: int,
        prefetch_bytes: int,
    ) -> Subscription:
        spec = SubscriptionSpec(
            id=subscription_id or self._state.keeper.new_id(),
            destination=destination,
            # The broker's flow control binds only with client acknowledgement; a callback
            # subscription's handled messages are acknowledged cumulatively (``_autoack``).
            ack=("client" if handler is not None else "client-individual")
            if ack == "auto"
            else ack,
            engine_acks=ack == "auto",
            durable_name=durable_name,
            headers=tuple((headers or {}).items()),
            prefetch=prefetch,
            prefetch_bytes=prefetch_bytes,
        )
        inbox = Inbox(self._clock, prefetch, self._progress.moved_on)
        subscription = Subscription(spec, handler, self, inbox, ack=ack)
        self._state.subscribe(subscription)
        with self._lock:
            self._subscriptions[spec.id] = subscription
        if handler is not None:
            worker = threading.Thread(
                target=self._work,
                args=(subscription,),
                name=f"{self._name}-handler-{spec.id}",
                daemon=True,  # a handler that never returns must not keep the process alive
            )
            with self._lock:
                self._workers[worker] = subscription
            worker.start()
        return subscription

    def observe(self, event: Event) -> None:
        """A subscription a broker refused is gone: end its worker and its pull consumers."""
        if isinstance(event, SubscriptionFailed):
            with self._lock:
                subscription = self._subscriptions.get(event.subscription_id)
            if subscription is not None and subscription.error is not None:
                self._forget(subscription)
                subscription.inbox.close()

    def _forget(self, subscription: Subscription) -> None:
        with self._lock:
            if self._subscriptions.get(subscription.id) is subscription:
                del self._subscriptions[subscription.id]

    def wait_active(self, subscription: Subscription, timeout: float | None) -> None:
        self._state.wait_active(subscription, timeout)

    def is_active(self, subscription: Subscription) -> bool:
        return self._state.is_active(subscription)

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop taking, let the running handler finish (up to 1 s), hand back the rest."""
        slot = self._state.forget(subscription)
        self._forget(subscription)
        inbox = subscription.inbox
        inbox.stop()
        own = self._own_subscription() is subscription
        if not own:
            self._progress.wait_until(
                lambda: inbox.running == 0, self._clock.monotonic() + HANDLER_GRACE
            )
            self._ack_handled(subscription)
        self._done_with_outstanding(subscription, handled=False, reason="unsubscribe")
        self._releases.release_or_defer(subscription, inbox.close(), "unsubscribe", own=own)
        if slot is None:
            return
        if own:
            # Its handler is running on this thread: the UNSUBSCRIBE goes after its ack
            # (a broker may refuse an ack for a subscription it no longer has).
            with self._lock:
                self._unsubscribe_after[subscription.id] = slot
            return
        self._unsubscribe_on(slot, subscription.id)

    # --- deliveries (adapter I/O threads) ----------------------------------------------------

    def deliver(self, slot: Slot, received: Received) -> None:
        """Put ``received`` in its subscription's buffer (never blocks, never drops)."""
        subscription = self._state.keeper.get(received.subscription_id)
        if subscription is None:
            # Crossed an unsubscribe on the wire: back to the broker, for another consumer.
            self._state.count("unroutable")
            self._releases.later(slot, received)
            return
        if slot.releases(subscription.id):  # a session being left stopped consuming it
            self._releases.hand_back(slot, subscription, received, now=False)
            return
        message = Message(received, subscription, slot, self)
        subscription.delivered += 1
        kept, held = subscription.inbox.put(message)
        if not kept:
            self._releases.later(slot, received)
            return
        if held is not None:
            _log.warning(
                "%s delivered %d unsettled messages on subscription %s, past its prefetch %d",
                slot.broker,
                held,
                subscription.id,
                subscription.prefetch,
            )
            self._emit(PrefetchExceeded(subscription.id, slot.broker, held, subscription.prefetch))

    # --- handlers (workers) ------------------------------------------------------------------

    def _work(self, subscription: Subscription) -> None:
        inbox = subscription.inbox
        pending = False
        with running_on(self._clock):
            while True:
                # None: till it stops; with an acknowledgement pending, ``ACK_LINGER``.
                if inbox.take_batch(ACK_LINGER if pending else None, TAKE_MAX):
                    pending = self._run(subscription, pending)
                elif pending and inbox.taking:
                    self._ack_handled(subscription)  # the buffer stayed empty (``_autoack``)
                    pending = False
                else:
                    break  # the inbox stopped
        self._ack_handled(subscription)
        with self._lock:
            self._workers.pop(threading.current_thread(), None)
            slot = self._unsubscribe_after.pop(subscription.id, None)
        self._releases.deferred(subscription)
        if slot is not None:
            self._unsubscribe_on(slot, subscription.id)

    def _run(self, subscription: Subscription, pending: bool) -> bool:
        """Handle a batch taken from the buffer, in order, until it ends or the inbox stops
        (which puts the rest back in the buffer); whether an acknowledgement is pending."""
        inbox, batch = subscription.inbox, batched(subscription)
        handler = subscription.handler
        assert handler is not None
        if self.observer is not None:
            handler = observe_handler(self.observer, handler)
        # Handled and not finished yet, all of one session: finished together when the batch
        # ends or the next message is another session's (a session being left must not wait
        # for another's handler).
        run: list[Message] = []
        try:
            while (message := inbox.next_taken()) is not None:
                source = message.session
                if run and source is not run[0].session:
                    inbox.finish_all(run)
                    run = []
                if isinstance(source, Slot) and source.releases(subscription.id):
                    message.mark_settled()
                    inbox.settled(message, cumulative=False)
                    self._releases.hand_back(source, subscription, message.received, now=True)
                    inbox.finish(message, handled=False)
                    continue
                run.append(message)  # before the handler: finished whatever it raises
                pending = self._handle(subscription, handler, message, batch, len(run) - 1)
        finally:
            inbox.finish_all(run)
        return pending

    def _handle(
        self,
        subscription: Subscription,
        handler: Handler,
        message: Message,
        batch: bool,
        unfinished: int,
    ) -> bool:
        """Call ``handler``; settle ``message`` (or leave its acknowledgement pending: True).
        ``unfinished``: the messages of its session handled before it, not finished yet."""
        try:
            handler(message)
        except Exception as exc:  # noqa: BLE001 - reported; the subscription carries on
            self._state.count("handler_errors")
            self._emit(HandlerError(subscription.id, message.message_id, exc))
            # Not acknowledged: rejected, so the broker redelivers or dead-letters it by its
            # rules. Not in the application's ``client`` mode, where a NACK is cumulative on
            # the wire and would reject the earlier messages it still means to acknowledge.
            # (An ``auto`` one is ``client`` on the wire: its handled predecessors are
            # acknowledged first, in ``settle_message``.)
            if subscription.ack == "auto" or subscription.spec.ack != "client":
                self._settle_quietly(message, nack=True)
        else:
            if batch:
                more = may_wait(message, unfinished)
                due = self._auto_acks.handled(message, more=more)
                if due is None:
                    return True
                self._settle_quietly(due, nack=False)
            elif subscription.ack == "auto":
                self._settle_quietly(message, nack=False)
        return False

    def _ack_handled(self, subscription: Subscription) -> None:
        """Write the batched acknowledgements still pending (before any release: in
        ``client`` mode a rejection is cumulative and would take handled messages with it)."""
        for handled in self._auto_acks.take(subscription.id):
            self._settle_quietly(handled, nack=False)

    def ack_handled_on(self, slot: Slot, subscription_ids: Iterable[str]) -> None:
        """Write now the pending acknowledgements of ``subscription_ids`` on ``slot``: what
        goes on the wire before a release or an UNSUBSCRIBE there (not held by a stop)."""
        for subscription_id in subscription_ids:
            handled = self._auto_acks.take_for(subscription_id, slot)
            if handled is None or handled.settled:
                continue  # settled already by a later message's cumulative acknowledgement
            handled.mark_settled()
            handled.subscription.inbox.settled(handled, cumulative=True)
            self._write_settle(handled, False)

    def _settle_quietly(self, message: Message, *, nack: bool) -> None:
        try:
            if nack:
                message.nack()
            else:
                message.ack()
        except Exception:  # noqa: BLE001 - a worker must outlive it; reaching here is a bug
            _log.exception("%s: settling %r failed", self._name, message)

    def _own_subscription(self) -> Subscription | None:
        """The subscription whose handler runs on the calling thread, if any."""
        with self._lock:
            return self._workers.get(threading.current_thread())

    # --- pull --------------------------------------------------------------------------------

    def receive(self, subscription: Subscription, timeout: float | None) -> Message | None:
        self._state.check_process()
        if subscription.handler is not None:
            raise ConfigurationError(
                f"subscription {subscription.id!r} has a handler; receive() and iteration are "
                "for subscriptions made with handler=None"
            )
        seconds = check_timeout(timeout)
        self._done_with_outstanding(subscription, handled=True)
        message = subscription.inbox.take(seconds)
        if message is None:
            return None
        if self.observer is not None:
            safely(self.observer.received, message, broker_of(message))
        if subscription.ack == "auto":
            subscription.outstanding = message  # acknowledged when the next one is asked
        else:
            subscription.inbox.finish(message)
        return message

    def _done_with_outstanding(
        self, subscription: Subscription, *, handled: bool, reason: str = "close"
    ) -> None:
        """Acknowledge (``handled``) or hand back (for ``reason``) the pull message given out
        last."""
        with self._lock:
            message, subscription.outstanding = subscription.outstanding, None
        if message is None:
            return
        if handled and not message.settled:
            self._settle_quietly(message, nack=False)
        elif not handled and not message.settled:
            self._releases.release(subscription, [message], reason)
        subscription.inbox.finish(message, handled=handled)

    # --- acknowledgements --------------------------------------------------------------------

    def settle_message(self, message: Message, *, nack: bool) -> None:
        """Ack/nack on the session that delivered ``message`` (held while a stop is under way)."""
        self._state.check_process()
        subscription = message.subscription
        if nack and batched(subscription):
            # A rejection is cumulative in ``client`` mode: the handled ones before it first.
            earlier = self._auto_acks.take_for(subscription.id, message.session)
            if earlier is not None and not earlier.settled:
                earlier.mark_settled()
                self.settle_message(earlier, nack=False)
        subscription.inbox.settled(message, cumulative=subscription.spec.ack == "client")
        with self._lock:
            if self._holding:
                self._held.append((message, nack))
                return
        self._write_settle(message, nack)

    def _write_settle(self, message: Message, nack: bool) -> None:
        slot = message.session
        assert isinstance(slot, Slot)
        received = message.received

        def send_it(session: Session) -> None:
            if nack:
                session.nack(received)
            else:
                session.ack(received)

        if not self._state.call(slot, send_it):
            self._state.count("acks_dropped")
            self._emit(AckDropped(message.subscription.id, message.message_id, slot.broker, nack))

    def _flush_held(self) -> None:
        with self._lock:
            held, self._held = self._held, []
            self._holding = False
        for message, nack in held:
            self._write_settle(message, nack)

    # --- stopping ----------------------------------------------------------------------------

    def stop(self, drain: float, *, reason: str, forget: bool) -> None:
        """Stop consuming (see the module docstring); ``forget``: unsubscribe on the wire too."""
        start = self._clock.monotonic()
        subscriptions = self._state.keeper.all()
        with self._lock:
            self._holding = True
        own = self._own_subscription()

        def busy(subscription: Subscription) -> bool:
            # Not its own: the caller is that worker, the only taker of its inbox.
            if subscription.handler is None or subscription is own:
                return False
            return subscription.inbox.running > 0

        if drain > 0:
            self._progress.wait_until(
                lambda: not any(s.inbox.buffered or busy(s) for s in subscriptions),
                start + drain,
            )
        for subscription in subscriptions:
            subscription.inbox.stop()
        self._progress.wait_until(
            lambda: not any(busy(s) for s in subscriptions), start + max(drain, HANDLER_GRACE)
        )
        for subscription in subscriptions:
            self._ack_handled(subscription)  # held with the rest, written next
        self._flush_held()
        slots = {s.id: self._state.forget(s) for s in subscriptions} if forget else {}
        for subscription in subscriptions if forget else ():
            self._forget(subscription)
        for subscription in subscriptions:
            self._done_with_outstanding(subscription, handled=False, reason=reason)
            left = subscription.inbox.close()
            self._releases.release_or_defer(subscription, left, reason, own=subscription is own)
            if busy(subscription):
                _log.warning(
                    "%s: the handler of subscription %s (%s) did not return within %g s; "
                    "left running on its daemon thread, its message unacknowledged",
                    self._name,
                    subscription.id,
                    subscription.destination,
                    max(drain, HANDLER_GRACE),
                )
        for subscription_id, slot in slots.items():
            if slot is None:
                continue
            if own is not None and own.id == subscription_id:
                with self._lock:  # drain() from its own handler: after that handler's ack
                    self._unsubscribe_after[subscription_id] = slot
            else:
                self._unsubscribe_on(slot, subscription_id)

    def when_flushed(self, slot: Slot, flushed: Callable[[], None]) -> None:
        """Call ``flushed`` once no message of ``slot`` is buffered or handled (a session being
        left waits for it before it closes): :meth:`Progress.when_flushed`."""
        self._progress.when_flushed(slot, flushed)

    def _holds(self, slot: Slot) -> bool:
        return any(s.inbox.holds(slot) for s in self._state.keeper.all())

    def _unsubscribe_on(self, slot: Slot, subscription_id: str) -> None:
        self._state.call(slot, lambda session: session.unsubscribe(subscription_id))

    def close(self) -> None:
        """After the sessions closed: end every worker, also of subscriptions gone meanwhile
        (refused by a broker, or added while the stop ran); late deliveries are not kept."""
        with self._lock:
            orphans = list(self._workers.values())
        for subscription in (*self._state.keeper.all(), *orphans):
            subscription.inbox.close()
