"""Which deliveries wait for which batch's commit, and which message ids were already spooled.

The source acknowledges a message only after Spark committed the batch that holds it. A broker
redelivers what it did not see acknowledged (after a fail-over back to it, after a driver
restart, after an ACK lost with its connection), so the same message can arrive again while
its first copy sits in the spool. The ledger sorts every delivery into one of three kinds:

* **fresh**: an id not seen before (or no id at all): spooled in the coming batch;
* **held**: a copy of a message in a spooled batch Spark has not committed yet: not spooled
  again, acknowledged together with that batch;
* **committed copy**: a copy of a message Spark already committed: acknowledged at once.

Pure bookkeeping over any delivery object with a ``message_id``: no I/O, no clock; the driver
acknowledges what :meth:`AckLedger.commit` and :meth:`AckLedger.admit` return.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = ["AckLedger", "Admission", "Delivery"]


class Delivery(Protocol):
    """A received message as far as the ledger cares."""

    @property
    def message_id(self) -> str | None: ...


D = TypeVar("D", bound=Delivery)


@dataclass
class Admission(Generic[D]):
    """How :meth:`AckLedger.admit` sorted a list of deliveries."""

    fresh: list[D] = field(default_factory=list)
    """To spool in the coming batch, in arrival order."""
    fresh_ids: list[str | None] = field(default_factory=list)
    """The ids of ``fresh``, in the same order (read once: an id is a property call)."""
    copies: list[D] = field(default_factory=list)
    """Second copies of fresh ones (one id twice in a row): acknowledged with the coming batch."""
    ack_now: list[D] = field(default_factory=list)
    """Copies of committed messages: acknowledge at once."""
    held: int = 0
    """Copies of spooled, uncommitted messages, now waiting for their batch's commit."""


class AckLedger(Generic[D]):
    """Deliveries by the end offset of the batch they wait for; spooled ids by batch."""

    def __init__(self, *, committed: int = 0, retained: int = 100_000) -> None:
        self._committed = committed
        self._retained = retained
        self._pending: dict[int, list[D]] = {}
        """Batch end -> deliveries to acknowledge once Spark committed it."""
        self._open: dict[int, list[str]] = {}
        """Batch end -> ids of a spooled, uncommitted batch."""
        self._where: dict[str, int] = {}
        """Id -> end of the (first) batch holding it, committed or not."""
        self._kept: collections.deque[tuple[int, list[str]]] = collections.deque()
        """Committed batches whose ids are still known, oldest first."""
        self._kept_ids = 0

    @property
    def committed(self) -> int:
        """Every offset below this was committed by Spark."""
        return self._committed

    def pending(self) -> int:
        """Deliveries waiting for a commit."""
        return sum(len(d) for d in self._pending.values())

    def restore(
        self,
        spooled: Iterable[tuple[int, Sequence[str | None]]],
        committed: Iterable[tuple[int, Sequence[str]]],
    ) -> None:
        """Learn the ids of a spool found on disk: (batch end, ids), committed ones apart."""
        for end, kept in committed:
            self._remember(end, list(kept))
            self._close(end)
        for end, ids in spooled:
            self._remember(end, [i for i in ids if i is not None])
        self._prune()

    def admit(self, deliveries: Sequence[D]) -> Admission[D]:
        """Sort ``deliveries`` (see the module docstring); copies join their batch's acks."""
        admission: Admission[D] = Admission()
        fresh_ids: set[str] = set()
        for delivery in deliveries:
            message_id = delivery.message_id
            if message_id is None:
                admission.fresh.append(delivery)
                admission.fresh_ids.append(None)
                continue
            if message_id in fresh_ids:
                admission.copies.append(delivery)
                continue
            end = self._where.get(message_id)
            if end is None:
                fresh_ids.add(message_id)
                admission.fresh.append(delivery)
                admission.fresh_ids.append(message_id)
            elif end <= self._committed:
                admission.ack_now.append(delivery)
            else:
                self._pending.setdefault(end, []).append(delivery)
                admission.held += 1
        return admission

    def spooled(self, end: int, admission: Admission[D]) -> None:
        """The batch ending at ``end`` now holds ``admission.fresh`` durably."""
        waiting = [*admission.fresh, *admission.copies]
        if waiting:
            self._pending.setdefault(end, []).extend(waiting)
        self._remember(end, [i for i in admission.fresh_ids if i is not None])

    def commit(self, end: int) -> list[D]:
        """Spark committed every offset below ``end``: the deliveries to acknowledge now."""
        if end <= self._committed:
            return []
        self._committed = end
        acks: list[D] = []
        for batch_end in sorted(e for e in self._pending if e <= end):
            acks.extend(self._pending.pop(batch_end))
        for batch_end in sorted(e for e in self._open if e <= end):
            self._close(batch_end)
        self._prune()
        return acks

    def ids_of(self, end: int) -> list[str] | None:
        """The ids of the uncommitted batch ending at ``end`` (None if unknown)."""
        ids = self._open.get(end)
        return None if ids is None else list(ids)

    def _remember(self, end: int, ids: list[str]) -> None:
        self._open[end] = ids
        for message_id in ids:
            self._where.setdefault(message_id, end)

    def _close(self, end: int) -> None:
        ids = self._open.pop(end, [])
        self._kept.append((end, ids))
        self._kept_ids += len(ids)

    def _prune(self) -> None:
        # The newest committed batch stays whatever its size: it is what was just acked.
        while len(self._kept) > 1 and self._kept_ids - len(self._kept[0][1]) >= self._retained:
            end, ids = self._kept.popleft()
            self._kept_ids -= len(ids)
            for message_id in ids:
                if self._where.get(message_id) == end:
                    del self._where[message_id]

    def __repr__(self) -> str:
        return (
            f"AckLedger(committed={self._committed}, open_batches={len(self._open)}, "
            f"pending={self.pending()}, known_ids={len(self._where)})"
        )
