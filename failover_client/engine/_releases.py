"""Handing messages back to their broker unhandled (``Session.release``): :class:`Releases`.

A message the connection will not handle (its subscription ended, its session is being left, a
stop's deadline passed) goes back to the broker for another consumer, reported as
``MessagesReleased``. Two orders matter on the wire, because RabbitMQ's release (a NACK with
requeue) is cumulative in ``client`` mode: it would requeue every earlier unacknowledged message
of the subscription on that session with it. So the acknowledgements the consumers hold back for
a batch (``_autoack``) are written before any release, and releases asked from a subscription's
own handler wait until that handler's message was acknowledged (its worker writes them on its way
out).
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections.abc import Callable, Iterable

from failover_client._events import Event, MessagesReleased
from failover_client.adapter import Received
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState
from failover_client.engine._subscriptions import Message, Subscription

__all__ = ["Releases"]

_log = logging.getLogger("failover_client")


class Releases:
    """The releases of one connection's consumers (see the module docstring)."""

    __slots__ = ("_ack_handled_on", "_after", "_dispatcher", "_emit", "_lock", "_state")

    def __init__(
        self,
        *,
        state: ConnectionState,
        dispatcher: Dispatcher,
        emit: Callable[[Event], None],
        ack_handled_on: Callable[[Slot, Iterable[str]], None],
    ) -> None:
        self._state = state
        self._dispatcher = dispatcher
        self._emit = emit
        self._ack_handled_on = ack_handled_on
        self._lock = threading.Lock()
        self._after: dict[str, tuple[list[Message], str]] = {}
        """Releases asked by a handler of the subscription itself, by subscription id."""

    def later(self, slot: Slot, received: Received) -> None:
        """Release ``received`` from the dispatch thread (the caller is an I/O thread)."""
        self._dispatcher.submit(functools.partial(self.received, slot, received))

    def hand_back(
        self, slot: Slot, subscription: Subscription, received: Received, *, now: bool
    ) -> None:
        """A delivery of a session being left that no handler takes any more (counted on
        the slot; the departure reports them in one ``MessagesReleased``). ``now``: written
        on the calling thread (a worker, before the session can be found flushed and closed),
        else on the dispatch thread (the caller is an I/O thread)."""
        with self._state.cond:
            slot.released[subscription.id] = slot.released.get(subscription.id, 0) + 1
        if now:
            self.received(slot, received)
        else:
            self.later(slot, received)

    def received(self, slot: Slot, received: Received) -> None:
        """Release one delivery on the session that made it (a dead one writes nothing)."""
        self._ack_handled_on(slot, (received.subscription_id,))  # a release may be cumulative
        try:
            self._state.call(slot, lambda session: session.release(received))
        except (AttributeError, NotImplementedError) as exc:
            # An adapter written before Session.release existed: writing nothing is a release
            # too, only later: the broker returns the message when the session ends.
            _log.warning(
                "%s cannot release a message (%s); returned at session end", slot.broker, exc
            )

    def release(self, subscription: Subscription, messages: Iterable[Message], reason: str) -> None:
        """Hand ``messages`` back unhandled; one ``MessagesReleased`` per delivering broker."""
        counts: collections.Counter[str] = collections.Counter()
        for message in messages:
            if message.settled:
                continue
            message.mark_settled()
            subscription.inbox.settled(message, cumulative=False)
            slot = message.session
            assert isinstance(slot, Slot)
            # A dead session writes nothing: the broker returns what it had not seen settled.
            self.received(slot, message.received)
            counts[slot.broker] += 1
        for broker, count in counts.items():
            self._emit(MessagesReleased(subscription.id, broker, count, reason))

    def release_or_defer(
        self, subscription: Subscription, messages: list[Message], reason: str, *, own: bool
    ) -> None:
        """Release ``messages`` now or, asked from the subscription's own handler (``own``),
        once that handler's message was acknowledged: :meth:`deferred`, from its worker."""
        if own:
            with self._lock:
                if subscription.id not in self._after:
                    self._after[subscription.id] = (messages, reason)
                    return
        self.release(subscription, messages, reason)

    def deferred(self, subscription: Subscription) -> None:
        """The worker of ``subscription`` ends: write the releases its handler asked for."""
        with self._lock:
            messages, reason = self._after.pop(subscription.id, ([], ""))
        self.release(subscription, messages, reason)
