"""The canary: each session proves, every ``canary_interval`` seconds, that it still hears.

A connection can look alive while nothing reaches its subscriptions: heart-beats flow, yet a
broker-side consumer is stuck, a proxy or bridge stopped forwarding deliveries, an AMQP link
was left without credit. Neither TCP nor heart-beats notice. With ``canary_interval`` > 0 the
connection subscribes, on each session that becomes current, a destination only that session
reads (:meth:`Session.private_destination <failover_client.adapter.Session.private_destination>`)
and sends itself a small message there every interval. A session that owes a canary for
``canary_misses`` intervals (or never had the canary's subscription confirmed in that time) is
deaf: :class:`~failover_client.SessionDeaf` is emitted and the connection fails over, as if the
session had been lost.

Off by default, because it costs on every session: ``60 / canary_interval`` messages a minute
each way (sent, delivered), a temporary destination on the broker for each session, and the
permission to create one and to send to it; a broker that refuses either (a canary whose
subscription is refused) runs that session without a canary, with a warning in the log.

The canary stays out of the way of the application: its messages are fire-and-forget writes on
the session under its ``io_lock`` (not in the outbox, the confirmation window or the send
counters), and its deliveries are handled on the adapter's thread as they arrive, never queued
behind the application's handlers (a slow handler must not make a healthy session look deaf).

Timing is :func:`~failover_client.engine._decide.decide`'s: :meth:`Canary.view` gives it the
next canary's turn and since when one is owed; the reconnect loop performs its ``CanaryTick``
(:meth:`Canary.tick`) and ``Deaf`` (:meth:`Canary.deaf`).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable, ConnectionFailure, SubscriptionRefused
from failover_client._events import Event, SessionDeaf
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState

__all__ = ["CANARY_PREFIX", "Canary", "CanaryReading"]

_log = logging.getLogger("failover_client")

CANARY_PREFIX = "failover-canary-"
"""Names of the canary's subscriptions and destinations (followed by a per-connection token)."""

_HEADERS = {"persistent": "false"}
"""A canary is worth nothing after its session: never stored to disk."""


@dataclass(frozen=True)
class CanaryReading:
    """The canary's last round trip, for ``connection.health()``."""

    round_trip: float | None
    """Seconds the last canary took to come back (None: none came back on this session)."""
    back_at: float | None
    """``clock.monotonic()`` when it came back."""
    sent: int = 0
    """Canaries sent over the connection's life (every session)."""
    back: int = 0
    """Canaries that came back."""


class Canary:
    """The canary of one connection; it follows whichever session is current."""

    __slots__ = (
        "_back",
        "_back_at",
        "_clock",
        "_confirmed",
        "_emit",
        "_heard_at",
        "_lock",
        "_lost",
        "_next_due",
        "_numbers",
        "_owed",
        "_prefix",
        "_round_trip",
        "_sent",
        "_slot",
        "_spec",
        "_started_at",
        "_wake",
        "interval",
        "patience",
    )

    def __init__(
        self,
        *,
        interval: float,
        misses: int,
        clock: Clock,
        emit: Callable[[Event], None],
        lost: Callable[[Slot, BaseException], None],
        wake: threading.Event,
        token: str | None = None,
    ) -> None:
        self.interval = interval
        self.patience = interval * misses
        self._clock = clock
        self._emit = emit
        self._lost = lost
        self._wake = wake
        self._prefix = f"{CANARY_PREFIX}{token or f'{random.getrandbits(32):08x}'}-"
        self._lock = threading.Lock()
        self._slot: Slot | None = None
        """The session the canary runs on (None: not started on any yet)."""
        self._spec: SubscriptionSpec | None = None
        """Its subscription there (None: that session has no canary: unsupported, refused)."""
        self._confirmed = False
        self._started_at = 0.0
        self._heard_at = 0.0
        """When the session last heard its canary (or had its subscription confirmed)."""
        self._next_due = 0.0
        # A list, not a deque (which preallocates a 528-byte block): a few canaries at most
        # are ever in flight, and an idle connection keeps one of these per canary.
        self._owed: list[tuple[int, float]] = []
        """(number, sent at) of the canaries not back yet, oldest first."""
        self._numbers = 0
        self._round_trip: float | None = None
        self._back_at: float | None = None
        self._sent = self._back = 0

    @classmethod
    def for_state(cls, state: ConnectionState, emit: Callable[[Event], None]) -> Canary:
        """The canary of the connection ``state`` belongs to, as its options ask."""
        options = state.options
        return cls(
            interval=options.canary_interval,
            misses=options.canary_misses,
            clock=state.clock,
            emit=emit,
            lost=state.slot_lost,
            wake=state.wake,
        )

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def owns(self, subscription_id: str) -> bool:
        """Whether ``subscription_id`` is one of this canary's subscriptions."""
        return subscription_id.startswith(self._prefix)

    # --- what decide() needs -----------------------------------------------------------------

    def view(self, slot: Slot, now: float) -> tuple[float | None, float | None]:
        """(the next canary's turn, since when one is owed) on the current ``slot``."""
        if not self.enabled:
            return None, None
        with self._lock:
            if self._slot is not slot:
                return now, None  # a new current session: subscribe its canary at once
            if self._spec is None:
                return None, None  # no canary on this session (see _start)
            if not self._confirmed:
                return None, self._started_at
            # Owed since the session was last heard (its last canary back, or the confirmation
            # of the canary's subscription): a session that went deaf just after a canary came
            # back is found ``misses`` intervals after that, not after the next one was sent.
            since = self._heard_at if self._owed else None
            return self._next_due, since

    def reading(self) -> CanaryReading:
        with self._lock:
            return CanaryReading(self._round_trip, self._back_at, self._sent, self._back)

    # --- what the reconnect loop performs ----------------------------------------------------

    def tick(self, slot: Slot, now: float) -> None:
        """Start the canary on ``slot`` (a new current session), or send its next canary."""
        with self._lock:
            started = self._slot is slot
            spec = self._spec
            if started and spec is not None:
                self._numbers += 1
                self._sent += 1
                number = self._numbers
                self._owed.append((number, now))
                self._next_due = now + self.interval
        if not started:
            self._start(slot, now)
            return
        if spec is None:
            return
        self._write(
            slot, lambda session: session.send(spec.destination, b"%d" % number, _HEADERS, None)
        )

    def deaf(self, slot: Slot, silent_for: float) -> None:
        """The session owes a canary for too long: report it and fail over."""
        broker = slot.broker
        _log.warning("%s is deaf: no canary back for %.1fs; failing over", broker, silent_for)
        self._emit(SessionDeaf(broker, silent_for))
        self._lost(
            slot,
            BrokerUnavailable(
                f"session deaf: no canary came back for {silent_for:.1f}s while the "
                "connection looked alive (deliveries stopped)",
                broker=broker,
            ),
        )
        session = slot.session
        if session is not None:
            # Its socket is still up (that is the point): close it, off the loop's thread, as
            # a polite close waits up to the adapter's close timeout for the broker.
            threading.Thread(
                target=session.close, name=f"failover-client-close-deaf-{slot.number}", daemon=True
            ).start()

    # --- the adapter's thread ----------------------------------------------------------------

    def on_message(self, slot: Slot, received: Received) -> bool:
        """Take a canary delivery (adapter thread); False: not the canary's, deliver it."""
        if not self.owns(received.subscription_id):
            return False
        now = self._clock.monotonic()
        try:
            number = int(received.body)
        except ValueError:
            _log.warning("%s: a canary with an unreadable body, ignored", slot.broker)
            return True
        with self._lock:
            if slot is not self._slot:
                return True  # a late one of a session the canary left
            sent_at = None
            answered = 0
            for owed_number, owed_at in self._owed:
                if owed_number > number:
                    break
                answered += 1
                sent_at = owed_at
            del self._owed[:answered]
            if sent_at is not None:
                self._back += 1
                self._round_trip = now - sent_at
                self._back_at = self._heard_at = now
        return True

    # --- inside ------------------------------------------------------------------------------

    def _start(self, slot: Slot, now: float) -> None:
        session = slot.session
        name = f"{self._prefix}{slot.number}"
        spec: SubscriptionSpec | None = None
        if session is not None:
            try:
                address, headers = session.private_destination(name)
            except NotImplementedError:
                _log.warning("%s: the adapter has no private destination; no canary", slot.broker)
            else:
                spec = SubscriptionSpec(
                    id=name, destination=address, ack="auto", headers=tuple(headers.items())
                )
        with self._lock:
            self._slot = slot
            self._spec = spec
            self._confirmed = False
            self._started_at = now
            self._owed.clear()
            self._round_trip = self._back_at = None
        if spec is not None:
            self._write(slot, lambda s: s.subscribe(spec, partial(self._answered, slot)))

    def _answered(self, slot: Slot, outcome: BaseException | None) -> None:
        """The broker's answer to the canary's SUBSCRIBE (adapter thread)."""
        with self._lock:
            if slot is not self._slot:
                return
            if outcome is None:
                self._confirmed = True
                self._heard_at = self._next_due = self._clock.monotonic()  # the first at once
            elif _refused(outcome):
                self._spec = None
        if outcome is None:
            self._wake.set()
        elif _refused(outcome):
            _log.warning(
                "%s refused the canary's destination (%s); no canary", slot.broker, outcome
            )

    def _write(self, slot: Slot, call: Callable[..., object]) -> None:
        """``call(session)`` under the slot's io_lock; a dead session counts as lost."""
        with slot.io_lock:
            session = slot.session
            if not slot.alive or session is None:
                return
            try:
                call(session)
            except ConnectionFailure as exc:
                failure: ConnectionFailure | None = exc
            else:
                failure = None
        if failure is not None:
            self._lost(slot, failure)


def _refused(outcome: BaseException) -> bool:
    """A refusal of the canary's subscription (not the loss of its session)."""
    return isinstance(outcome, SubscriptionRefused) or not isinstance(outcome, ConnectionFailure)
