"""Cumulative acknowledgements for the source: one ACK frame where there were thousands.

The source acknowledges a message only once Spark committed the batch that holds it (or, for a
copy of a committed message, at once). With ``client-individual`` that is one ACK frame per
message: ten thousand frames per batch of ten thousand, written, parsed by the broker and
confirmed, in the one Python process that also receives and spools every message, where they
cost a sixth of that process's interpreter time (measured: py-spy, 100,000 messages).

STOMP's ``client`` mode (and the engine's emulation of it over AMQP) acknowledges cumulatively:
an ACK of a message settles every message its session delivered to that subscription before
it. That is safe exactly when every one of those earlier messages is itself done (committed,
or a copy of a committed one). :class:`AckFrontier` keeps each (subscription, session)'s
deliveries in arrival order, which is the broker's delivery order (one handler worker per
subscription keeps it), and acknowledges only the newest message of the done prefix: a
message of an uncommitted batch is never covered by an earlier ACK, whatever order the
source's commits come in.

A session that died keeps its place in the order until its messages are done: they are
spooled and committed like any (their broker redelivers them, and the ledger drops the copies by
id), and an ACK the engine cannot write on a dead session is reported lost, as before.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

__all__ = ["AckFrontier", "Acknowledgeable"]


class Acknowledgeable(Protocol):
    """A delivery as the frontier sees one (the shape of ``failover_client.Message``)."""

    @property
    def session(self) -> object: ...

    @property
    def subscription(self) -> object: ...

    def ack(self) -> None: ...


A = TypeVar("A", bound=Acknowledgeable)


class _Entry(Generic[A]):
    """One delivery's place in its order, and whether it is done."""

    __slots__ = ("done", "message")

    def __init__(self, message: A) -> None:
        self.message = message
        self.done = False


class AckFrontier(Generic[A]):
    """Per (subscription, session): the deliveries not yet acknowledged, in arrival order.

    :meth:`arrived` is called for every delivery as it arrives, :meth:`acknowledge` with the
    ones that may be acknowledged; it writes one cumulative ACK per order whose done prefix
    grew. Thread-safe: deliveries arrive on a handler worker while another thread acknowledges.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acking = threading.Lock()
        """Serialises the ACK writes: a newer ACK written before an older one would make the
        older one a second ACK of a settled message (ActiveMQ answers it with an ERROR)."""
        self._orders: dict[tuple[int, int], collections.deque[_Entry[A]]] = {}
        self._entries: dict[int, _Entry[A]] = {}
        """id(message) -> its entry, while the message waits in an order (so is alive, and its
        id cannot be reused by another object)."""

    def arrived(self, message: A) -> None:
        """``message`` was delivered; it is acknowledged once it and all before it are done."""
        entry = _Entry(message)
        key = (id(message.subscription), id(message.session))
        with self._lock:
            order = self._orders.get(key)
            if order is None:
                order = self._orders[key] = collections.deque()
            order.append(entry)
            self._entries[id(message)] = entry

    def acknowledge(self, messages: Iterable[A]) -> list[A]:
        """Mark ``messages`` done; acknowledge the newest of each order's done prefix.

        Returns the messages whose ACK frames were written (one per order that moved): the
        ones to ask the brokers to confirm. Raises ValueError for a message that never
        :meth:`arrived` (or was acknowledged already): it cannot be placed in any order, and
        acknowledging it cumulatively could settle messages that are not done.
        """
        with self._acking:
            newest = self._advance(messages)
            for message in newest:
                message.ack()
            return newest

    def _advance(self, messages: Iterable[A]) -> list[A]:
        with self._lock:
            moved: set[tuple[int, int]] = set()
            for message in messages:
                entry = self._entries.get(id(message))
                if entry is None or entry.message is not message:
                    raise ValueError(
                        f"failover source: {message!r} is not awaiting an acknowledgement "
                        "(never delivered to the source's consumer, or acknowledged already)"
                    )
                entry.done = True
                moved.add((id(message.subscription), id(message.session)))
            newest: list[A] = []
            for key in moved:
                order = self._orders[key]
                last: _Entry[A] | None = None
                while order and order[0].done:
                    last = order.popleft()
                    del self._entries[id(last.message)]
                if not order:
                    del self._orders[key]
                if last is not None:
                    newest.append(last.message)
            return newest

    def waiting(self) -> int:
        """Deliveries not yet covered by an acknowledgement."""
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        with self._lock:
            return f"AckFrontier(orders={len(self._orders)}, waiting={len(self._entries)})"
