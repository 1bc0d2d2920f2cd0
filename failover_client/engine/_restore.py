"""Subscribing on a session: every SUBSCRIBE confirmed, refusals surfaced, poison found.

Each subscription is written with a confirmation callback, so the connection knows which
subscriptions a session has confirmed (``Subscription.wait_active``) and which it has only
been asked for. A broker that refuses one by name (an ERROR naming its receipt, an AMQP attach
refused) ends it at once: it is removed, ``Subscription.error`` is set, ``SubscriptionFailed``
is emitted, and it is never restored elsewhere. A broker that ends the session over it without
naming it is found by the poison rule of :mod:`~failover_client.engine._poison`: suspects are
restored one at a time on the next session, before the others.

:class:`SubscriptionKeeper` owns the subscriptions (the registry, and which of them each
session was asked for and has answered) and offers operations on them; the connection state
asks it what to restore on a new session and what a lost one leaves unanswered, and it asks the
connection (:class:`~failover_client.engine._slot.Lifecycle`) only whether a session is current
and whether the connection is over. It runs under the connection's one lock and each slot's
``io_lock`` (``io_lock`` -> lock); events are emitted after the lock is released.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

from failover_client._clock import Clock
from failover_client._errors import (
    ConfigurationError,
    ConnectionFailure,
    SubscriptionRefused,
)
from failover_client._events import Event, SubscriptionFailed
from failover_client.adapter import SubscriptionSpec
from failover_client.engine._poison import PROBE_TIMEOUT, is_poison
from failover_client.engine._slot import Lifecycle, Slot
from failover_client.engine._subscriptions import Subscription, SubscriptionRegistry
from failover_client.engine._sync import ClockCondition

__all__ = ["SubscriptionKeeper"]

_log = logging.getLogger("failover_client")


class SubscriptionKeeper:
    """Writes, confirms, restores and refuses the subscriptions of one connection."""

    __slots__ = ("_clock", "_cond", "_emit", "_life", "_registry")

    def __init__(
        self,
        *,
        clock: Clock,
        cond: ClockCondition,
        lifecycle: Lifecycle,
        emit: Callable[[Event], None],
    ) -> None:
        self._clock = clock
        self._cond = cond
        self._life = lifecycle
        self._emit = emit
        self._registry = SubscriptionRegistry()

    # --- the registry (its own lock: the dispatch thread reads it without the connection's) --

    def new_id(self) -> str:
        return self._registry.new_id()

    def add(self, subscription: Subscription) -> None:
        """Keep ``subscription`` (ConfigurationError for an id in use)."""
        self._registry.add(subscription)

    def get(self, subscription_id: str) -> Subscription | None:
        return self._registry.get(subscription_id)

    def all(self) -> list[Subscription]:
        """The live subscriptions, in creation order."""
        return self._registry.all()

    def __len__(self) -> int:
        return len(self._registry)

    def subscriptions(self) -> list[Subscription]:
        """The live subscriptions, in creation order."""
        found = (self._registry.get(spec.id) for spec in self._registry.specs())
        return [s for s in found if s is not None]

    def specs(self) -> list[SubscriptionSpec]:
        """The live subscriptions' specs, in creation order."""
        return self._registry.specs()

    # --- what each session was asked (lock held) ---------------------------------------------

    def claim(self, slot: Slot, subscription_id: str) -> None:
        """``subscription_id`` is about to be written to ``slot`` (its caller writes it)."""
        slot.subscribed[subscription_id] = None

    def claim_missing(self, slot: Slot) -> list[SubscriptionSpec]:
        """The subscriptions ``slot`` was never asked for, in creation order, now claimed."""
        specs = [s for s in self._registry.specs() if s.id not in slot.subscribed]
        slot.subscribed.update(dict.fromkeys(s.id for s in specs))
        return specs

    def release(self, subscription_id: str, slot: Slot | None) -> bool:
        """Forget ``subscription_id``; whether ``slot`` was asked for it (so must drop it)."""
        self._registry.remove(subscription_id)
        if slot is None or subscription_id not in slot.subscribed:
            return False
        slot.subscribed.pop(subscription_id, None)
        return True

    def unanswered(self, slot: Slot) -> int:
        """How many subscriptions ``slot`` has neither confirmed nor refused."""
        return len(slot.pending_subs)

    # --- writing -----------------------------------------------------------------------------

    def write(self, slot: Slot, spec: SubscriptionSpec) -> bool:
        """SUBSCRIBE ``spec`` on ``slot`` (caller holds ``slot.io_lock``); False if it died."""
        session = slot.session
        with self._cond:
            if not slot.alive or session is None:
                return False
            slot.pending_subs[spec.id] = None
        try:
            session.subscribe(spec, partial(self._answered, slot, spec.id))
        except ConnectionFailure as exc:
            self._life.slot_lost(slot, exc)
            return False
        return True

    def restore(self, slot: Slot, specs: list[SubscriptionSpec]) -> None:
        """Subscribe ``specs`` on ``slot``: suspects one at a time first, then the rest at once.

        No lock held. Returns early when the slot dies; the install loop then ends.
        """
        with self._cond:
            suspects = [s for s in specs if self._is_suspect(s.id)]
        for spec in suspects:
            with slot.io_lock:
                if self._wanted(spec) and not self.write(slot, spec):
                    return
            if not self.settle(slot, (spec.id,)):
                return
        with slot.io_lock:
            for spec in specs:
                if spec not in suspects and self._wanted(spec) and not self.write(slot, spec):
                    return

    def settle(self, slot: Slot, ids: Iterable[str] | None = None) -> bool:
        """Wait until ``ids`` (default: all) are answered on ``slot``, at most ``PROBE_TIMEOUT``.

        False when the slot died or the connection ended meanwhile. A broker that takes longer
        is slow, not refusing: the caller goes on.
        """
        life = self._life
        waiting = None if ids is None else frozenset(ids)

        def answered() -> bool:
            if not slot.alive or life.is_over():
                return True
            pending = slot.pending_subs
            return not pending if waiting is None else pending.keys().isdisjoint(waiting)

        with self._cond:
            self._cond.wait_until(answered, self._clock.monotonic() + PROBE_TIMEOUT)
            return slot.alive and not life.is_over()

    def _wanted(self, spec: SubscriptionSpec) -> bool:
        # Unsubscribed (or refused) meanwhile: unsubscribe() waits for io_lock, but may have
        # run before the caller took it.
        with self._cond:
            return self._registry.get(spec.id) is not None

    def _is_suspect(self, subscription_id: str) -> bool:
        subscription = self._registry.get(subscription_id)
        return subscription is not None and subscription.suspect

    # --- answers -----------------------------------------------------------------------------

    def _answered(self, slot: Slot, subscription_id: str, outcome: BaseException | None) -> None:
        """A session's verdict on one SUBSCRIBE (adapter thread, or inside ``write``)."""
        if outcome is not None and not isinstance(outcome, SubscriptionRefused):
            return  # the session died first: the loss counts it, the next session restores it
        failed: SubscriptionFailed | None = None
        with self._cond:
            if subscription_id not in slot.pending_subs:
                return
            slot.pending_subs.pop(subscription_id, None)
            subscription = self._registry.get(subscription_id)
            if subscription is not None:
                if outcome is None:
                    subscription.losses = 0  # a broker accepted it: it is not poison
                    subscription.suspect = False
                else:
                    failed = self._refuse_locked(subscription, slot, outcome)
            self._cond.notify_all()
        if failed is not None:
            _log.error("subscription %s refused: %s", subscription_id, failed.error)
            self._emit(failed)

    def blame_loss(
        self, slot: Slot, cause: BaseException, *, alone: bool
    ) -> SubscriptionFailed | None:
        """Count ``slot``'s loss against its unanswered subscriptions (lock held).

        ``alone``: nothing else was unconfirmed on the slot. Returns the event of the one
        subscription this loss made poison (already removed); emit it after the lock.
        """
        unanswered = [s for i in slot.pending_subs if (s := self._registry.get(i)) is not None]
        for subscription in unanswered:
            subscription.losses += 1
            # A suspect after any loss, refusal or not: a broker that resets the connection
            # with our frames unread loses its ERROR with it (RabbitMQ, seen here), and a
            # SUBSCRIBE restored alone costs a round trip, no throughput.
            subscription.suspect = True
        if not alone or len(unanswered) != 1 or not is_poison(unanswered[0].losses, cause):
            return None
        poison = unanswered[0]
        error = SubscriptionRefused(
            f"subscription {poison.id!r} to {poison.destination} quarantined as poison after "
            f"{poison.losses} connection losses (the last: {cause})",
            subscription_id=poison.id,
        )
        error.__cause__ = cause
        return self._refuse_locked(poison, slot, error)

    def exonerate(self) -> None:
        """Clear every suspicion (lock held): the loss that raised them found its poison."""
        for spec in self._registry.specs():
            subscription = self._registry.get(spec.id)
            if subscription is not None:
                subscription.suspect = False

    def _refuse_locked(
        self, subscription: Subscription, slot: Slot, error: BaseException
    ) -> SubscriptionFailed:
        self._registry.remove(subscription.id)
        slot.subscribed.pop(subscription.id, None)
        subscription.error = error
        return SubscriptionFailed(
            subscription.id, subscription.destination, slot.broker, subscription.losses, error
        )

    # --- the application's wait --------------------------------------------------------------

    def wait_active(self, subscription: Subscription, timeout: float | None) -> None:
        """Block until the current session confirmed ``subscription`` (see ``Subscription``)."""
        life = self._life
        registry = self._registry
        deadline = None if timeout is None else self._clock.monotonic() + timeout

        def decided() -> bool:
            if subscription.error is not None or life.is_over():
                return True
            if registry.get(subscription.id) is not subscription:
                return True
            slot = life.connected_slot()
            return (
                slot is not None
                and subscription.id in slot.subscribed
                and subscription.id not in slot.pending_subs
            )

        with self._cond:
            done = self._cond.wait_until(decided, deadline)
            error = subscription.error
            if error is not None:
                raise SubscriptionRefused(
                    str(error), subscription_id=subscription.id
                ) from error.__cause__
            if life.is_over():
                life.raise_unusable()
            if registry.get(subscription.id) is not subscription:
                raise ConfigurationError(f"subscription {subscription.id!r} was unsubscribed")
        if not done:
            raise TimeoutError(
                f"subscription {subscription.id!r} not confirmed by a broker within {timeout} s"
            )
