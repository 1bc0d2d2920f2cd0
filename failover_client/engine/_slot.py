"""A session together with what the connection knows about it.

A connection holds several sessions over its life (the current one, standbys, a probe that becomes
current, old ones that are leaving (drained after a move) or retired). A :class:`Slot` wraps one
of them with its role and liveness, so a late callback (a confirmation, a message, a loss) from
any session is attributed to the right one, and ``io_lock`` serialises every call into the
session (adapters are not thread-safe).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Literal, Protocol

from failover_client.adapter import AdvertisedBrokers, Received, Session
from failover_client.uri import BrokerAddress

_log = logging.getLogger("failover_client")

__all__ = ["Lifecycle", "Role", "Slot", "SlotEvents", "SlotListener", "hand_back"]

Role = Literal["dialing", "current", "standby", "leaving", "retired"]


@dataclass(eq=False, slots=True)
class Slot:
    """One session and its state; identity (``is``) distinguishes slots.

    Sets of subscription ids are the keys of dicts: most sessions never hold one, and an empty
    dict costs 64 bytes where an empty set costs 216.
    """

    number: int
    address: BrokerAddress
    role: Role = "dialing"
    session: Session | None = None
    alive: bool = True
    cause: BaseException | None = None
    subscribed: dict[str, None] = field(default_factory=dict)
    """Subscriptions written to this session (confirmed or not); only the connection's
    ``SubscriptionKeeper`` reads or changes it."""
    pending_subs: dict[str, None] = field(default_factory=dict)
    """Subscriptions written to this session that it has neither confirmed nor refused
    (the ``SubscriptionKeeper``'s, like ``subscribed``)."""
    io_lock: threading.Lock = field(default_factory=threading.Lock)
    may_drop_duplicates: bool = True
    """Whether the broker may drop a replayed copy by ``_AMQ_DUPL_ID`` (its handshake's
    product, ``engine._dedup.may_drop_duplicates``): writes to it carry the header then."""
    redirected: bool = False
    """The broker sent the client elsewhere: its end blames no frame (see ``_poison``)."""
    deliveries: int = 0
    last_delivery_at: float | None = None
    """Messages this session delivered, and when the last came (``clock.monotonic()``, on the
    adapter's thread): what tells a drain that the broker went quiet."""
    release_unhandled: bool = False
    """Set when the connection stops consuming on this (leaving) session: a message it
    delivered that no handler took yet is released (``Session.release``), not handled."""
    stopped: dict[str, None] = field(default_factory=dict)
    """Subscriptions this (leaving) session no longer consumes for: their deliveries are
    released like those of ``release_unhandled``."""
    released: dict[str, int] = field(default_factory=dict)
    """Messages released per subscription id (see ``releases``)."""

    def releases(self, subscription_id: str) -> bool:
        """Whether a delivery of ``subscription_id`` on this session goes back unhandled."""
        return self.release_unhandled or subscription_id in self.stopped

    def note_delivery(self, now: float) -> None:
        """The session delivered a message at ``now`` (adapter thread; plain stores)."""
        self.deliveries += 1
        self.last_delivery_at = now

    @property
    def broker(self) -> str:
        return str(self.address)

    def __repr__(self) -> str:
        return f"<Slot #{self.number} {self.address} {self.role}{'' if self.alive else ' dead'}>"


def hand_back(session: Session, message: Received) -> None:
    """``Session.release(message)``; with an adapter that has no release yet, nothing.

    Nothing is what release writes on ActiveMQ too: a broker returns a message that was never
    settled when its subscription or session ends, and the leaving session that hands messages
    back is about to end.
    """
    try:
        session.release(message)
    except NotImplementedError:
        _log.debug(
            "%s: no release; the broker returns the message when the session ends", session.address
        )


class Lifecycle(Protocol):
    """What the send path and the subscriptions ask of the connection's state machine.

    The :class:`~failover_client.engine._state.ConnectionState` owns the state and the
    current session; the ``Sender`` and the ``SubscriptionKeeper`` own their own data and
    only ask these questions (under the connection's one lock, except :meth:`slot_lost`).
    """

    def connected_slot(self) -> Slot | None:
        """The current slot while new work may go out on it ("connected"), else None."""
        ...

    def is_over(self) -> bool:
        """Whether the connection closed or gave up for good."""
        ...

    def phase(self) -> str:
        """The state's name, for messages."""
        ...

    def raise_unusable(self) -> None:
        """Raise the error of a state in which no call may wait for a session."""
        ...

    def slot_lost(self, slot: Slot, cause: BaseException) -> None:
        """A write found ``slot``'s session dead (lock not held)."""
        ...


class SlotEvents(Protocol):
    """What a slot's listener reports to the connection, naming the slot it came from."""

    def _slot_message(self, slot: Slot, message: Received) -> None: ...

    def _slot_lost(self, slot: Slot, cause: BaseException) -> None: ...

    def _slot_brokers(self, slot: Slot, advertised: AdvertisedBrokers) -> None: ...


class SlotListener:
    """The :class:`SessionListener` handed to ``Connector.connect`` for one slot."""

    __slots__ = ("_events", "_slot")

    def __init__(self, events: SlotEvents, slot: Slot) -> None:
        self._events = events
        self._slot = slot

    def on_message(self, session: Session, message: Received) -> None:
        self._events._slot_message(self._slot, message)

    def on_lost(self, session: Session, cause: BaseException) -> None:
        self._events._slot_lost(self._slot, cause)

    def on_brokers(self, session: Session, advertised: AdvertisedBrokers) -> None:
        self._events._slot_brokers(self._slot, advertised)
