"""``connection.health()``: what a readiness probe needs, read at one moment.

A :class:`Health` is a frozen snapshot: the connection's state, the broker in use, each
subscription's state (confirmed by that broker, age of its last delivery, messages in flight),
the confirmation window, and the canary's last round trip. ``health.ready`` is the readiness
answer (connected, and every subscription confirmed by the broker in use), and ``str(health)``
is one line for a log or a probe's output::

    ready broker=stomp://b1:61613 subscriptions=2/2 unconfirmed=0/1024 canary=3.1ms@0.4s
"""

from __future__ import annotations

from dataclasses import dataclass

from failover_client.engine._canary import Canary
from failover_client.engine._state import ConnectionState

__all__ = ["Health", "SubscriptionHealth", "read_health"]


@dataclass(frozen=True)
class SubscriptionHealth:
    """One subscription, as the broker in use has it."""

    id: str
    destination: str
    active: bool
    """Confirmed by the broker in use (False while it is being restored, or refused)."""
    last_delivery_age: float | None
    """Seconds since its last message arrived (None: none yet)."""
    in_flight: int
    """Messages delivered to the client and not settled yet."""


@dataclass(frozen=True)
class Health:
    """A connection's health at one moment (see the module docstring)."""

    state: str
    """new, connecting, connected, reconnecting, switching, failed or closed."""
    broker: str | None
    """The redacted address of the broker in use (None before the first connection)."""
    subscriptions: tuple[SubscriptionHealth, ...]
    unconfirmed_sends: int
    """Sends awaiting the broker's confirmation (or a replay)."""
    confirm_window: int
    """How many may await it before a send blocks (``confirm_window``)."""
    canary_round_trip: float | None
    """Seconds the last canary took to come back (None: canary off or none back yet)."""
    canary_age: float | None
    """Seconds since that canary came back."""

    @property
    def ready(self) -> bool:
        """Connected, and every subscription confirmed by the broker in use."""
        return self.state == "connected" and all(s.active for s in self.subscriptions)

    def __bool__(self) -> bool:
        return self.ready

    def __str__(self) -> str:
        active = sum(s.active for s in self.subscriptions)
        text = (
            f"{'ready' if self.ready else 'not-ready'} state={self.state} broker={self.broker}"
            f" subscriptions={active}/{len(self.subscriptions)}"
            f" unconfirmed={self.unconfirmed_sends}/{self.confirm_window}"
        )
        if self.canary_round_trip is not None and self.canary_age is not None:
            text += f" canary={self.canary_round_trip * 1000:.1f}ms@{self.canary_age:.1f}s"
        return text


def read_health(state: ConnectionState, canary: Canary | None) -> Health:
    """The health of the connection that ``state`` (and ``canary``) belong to, now."""
    now = state.clock.monotonic()
    reading = None if canary is None else canary.reading()
    with state.cond:
        current = state.current
        subscriptions = tuple(
            SubscriptionHealth(
                id=sub.id,
                destination=sub.destination,
                active=state.is_active_locked(sub),
                last_delivery_age=(
                    None if sub.last_delivery_at is None else max(0.0, now - sub.last_delivery_at)
                ),
                in_flight=sub.in_flight,
            )
            for sub in state.keeper.subscriptions()
        )
        return Health(
            state=state.state,
            broker=None if current is None else current.broker,
            subscriptions=subscriptions,
            unconfirmed_sends=state.sender.in_flight(),
            confirm_window=state.options.confirm_window,
            canary_round_trip=None if reading is None else reading.round_trip,
            canary_age=(
                None
                if reading is None or reading.back_at is None
                else max(0.0, now - reading.back_at)
            ),
        )
