"""A session together with what the connection knows about it.

A connection holds several sessions over its life (the current one, standbys, a probe that becomes
current, old ones that are retired). A :class:`Slot` wraps one of them with its role and liveness,
so a late callback (a confirmation, a message, a loss) from any session is attributed to the
right one, and ``io_lock`` serialises every call into the session (adapters are not thread-safe).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal, Protocol

from failover_client.adapter import AdvertisedBrokers, Received, Session
from failover_client.uri import BrokerAddress

__all__ = ["Role", "Slot", "SlotEvents", "SlotListener"]

Role = Literal["dialing", "current", "standby", "retired"]


@dataclass(eq=False)
class Slot:
    """One session and its state; identity (``is``) distinguishes slots."""

    number: int
    address: BrokerAddress
    role: Role = "dialing"
    session: Session | None = None
    alive: bool = True
    cause: BaseException | None = None
    subscribed: set[str] = field(default_factory=set)
    """Subscriptions written to this session (confirmed or not)."""
    pending_subs: set[str] = field(default_factory=set)
    """Subscriptions written to this session that it has neither confirmed nor refused."""
    io_lock: threading.Lock = field(default_factory=threading.Lock)
    redirected: bool = False
    """The broker sent the client elsewhere: its end blames no frame (see ``_poison``)."""

    @property
    def broker(self) -> str:
        return str(self.address)

    def __repr__(self) -> str:
        return f"<Slot #{self.number} {self.address} {self.role}{'' if self.alive else ' dead'}>"


class SlotEvents(Protocol):
    """What a slot's listener reports to the connection, naming the slot it came from."""

    def _slot_message(self, slot: Slot, message: Received) -> None: ...

    def _slot_lost(self, slot: Slot, cause: BaseException) -> None: ...

    def _slot_brokers(self, slot: Slot, advertised: AdvertisedBrokers) -> None: ...


class SlotListener:
    """The :class:`SessionListener` handed to ``Connector.connect`` for one slot."""

    def __init__(self, events: SlotEvents, slot: Slot) -> None:
        self._events = events
        self._slot = slot

    def on_message(self, session: Session, message: Received) -> None:
        self._events._slot_message(self._slot, message)

    def on_lost(self, session: Session, cause: BaseException) -> None:
        self._events._slot_lost(self._slot, cause)

    def on_brokers(self, session: Session, advertised: AdvertisedBrokers) -> None:
        self._events._slot_brokers(self._slot, advertised)
