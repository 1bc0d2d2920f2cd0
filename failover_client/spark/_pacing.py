"""How much the next micro-batch takes: rate options, the trigger, AvailableNow's target.

Spark asks the source for the end of the next batch (``latestOffset``) on the driver, on the
query's critical path. Three kinds of trigger reach the source:

* a processing-time or default trigger: Spark passes ``ReadMaxRows(maxMessagesPerBatch)``
  and calls again soon when nothing is new, so with nothing buffered the source returns at
  once (an idle query stays cheap). With fewer buffered than the limit it keeps taking while
  the broker is still delivering: until the limit, a pause of :data:`FILL_GAP`, or
  :data:`FILL_WITHIN` in all. A batch pays a fixed cost in Spark (planning, the offset and
  commit logs, its tasks: a third of a second on a loaded 2-core machine), so a batch cut
  at the first messages of a window the broker is sending (the first batch after the
  query's start always is) costs as much as a full one. ``maxBytesPerBatch`` bounds the
  bodies' bytes; ``minMessagesPerBatch`` holds a batch back until that many messages are
  buffered or ``maxBatchDelay`` passed since the last batch (Kafka's ``minOffsetsPerTrigger``
  and ``maxTriggerDelay``);
* ``Trigger.AvailableNow``: Spark calls ``prepareForTriggerAvailableNow`` first, and the source
  fixes a target: the position it reaches once the messages on the broker *now* are spooled
  (the queue's depth where the broker tells it, :mod:`._depth`), or, where it does not,
  "until the broker delivered nothing for ``receiveTimeout``". Batches of the usual bounds
  then drain to it, each waiting up to ``receiveTimeout`` for deliveries (the broker sends
  the next ones only after the last batch's acknowledgements), and the query stops;
* ``Trigger.Once`` (and AvailableNow on a Spark that does not call the source first):
  ``ReadAllAvailable``, one batch of everything the broker delivers until it is quiet for
  ``receiveTimeout``, bounded by the prefetch (the broker delivers no more unacknowledged
  messages than that, and a batch is acknowledged only after its commit).

Pure: the clock is injected; the driver does the taking.
"""

from __future__ import annotations

from dataclasses import dataclass

from failover_client import Clock
from failover_client.spark._options import SourceOptions

__all__ = ["FILL_GAP", "FILL_WITHIN", "Pacer", "Step"]

FILL_GAP = 0.05
"""A pause in deliveries this long (seconds) ends a batch short of its limit: the broker has
sent what it had (a broker sending a window delivers thousands a second)."""

FILL_WITHIN = 0.5
"""The most seconds a batch short of its limit keeps taking (a steady trickle never pauses
for :data:`FILL_GAP`)."""


@dataclass(frozen=True)
class Step:
    """What one ``latestOffset`` takes from the consumer."""

    limit: int | None
    """The most messages (None: no count bound)."""
    max_bytes: int | None
    """The most body bytes (None: no byte bound); a lone larger message still goes."""
    wait: float
    """Seconds to wait for a delivery; 0 takes only what is buffered."""
    drain: bool
    """Keep taking until ``limit`` / ``max_bytes`` is reached or ``wait`` passes quietly."""
    within: float | None = None
    """With ``drain``: stop taking after this many seconds in all (None: no such bound)."""


class Pacer:
    """Decides each batch's :class:`Step` (see the module docstring)."""

    def __init__(self, options: SourceOptions, clock: Clock) -> None:
        self._options = options
        self._clock = clock
        self._last_batch = clock.monotonic()
        self._available_now = False
        self._target: int | None = None
        self._done = False

    @property
    def available_now(self) -> bool:
        """Whether ``prepareForTriggerAvailableNow`` was called."""
        return self._available_now

    @property
    def target(self) -> int | None:
        """AvailableNow's end position (None: until the broker is quiet, or not AvailableNow)."""
        return self._target

    @property
    def done(self) -> bool:
        """AvailableNow reached its target: no batch follows."""
        return self._done

    def prepare_available_now(self, position: int, target: int | None) -> None:
        """Fix AvailableNow's target (None: drain until quiet); ``position`` is where it starts."""
        self._available_now = True
        self._target = target
        self._done = target is not None and target <= position

    def step(self, position: int, limit: int | None, buffered: int) -> Step | None:
        """The next batch's step from ``position``, or None for no batch now.

        ``limit`` is Spark's row limit (None: ``ReadAllAvailable``), ``buffered`` the
        deliveries waiting in the consumer.
        """
        options = self._options
        if self._available_now:
            if self._done:
                return None
            count = limit
            if self._target is not None:
                left = self._target - position
                count = left if count is None else min(count, left)
            return Step(count, options.max_bytes_per_batch, options.receive_timeout, True)
        if limit is None:
            # ReadAllAvailable ignores the rate options (Spark's contract for it).
            return Step(None, None, options.receive_timeout, True)
        if buffered < options.min_messages_per_batch:
            waited = self._clock.monotonic() - self._last_batch
            if waited < options.max_batch_delay:
                return None
        if 0 < buffered < limit:
            # The broker may be sending the rest of a window: take it in this batch.
            return Step(limit, options.max_bytes_per_batch, FILL_GAP, True, FILL_WITHIN)
        return Step(limit, options.max_bytes_per_batch, 0.0, False)

    def planned(self, position: int, received: int, step: Step) -> None:
        """``step`` took ``received`` deliveries (copies too); the spool ends at ``position``."""
        if received:
            self._last_batch = self._clock.monotonic()
        if not self._available_now:
            return
        if self._target is not None and position >= self._target:
            self._done = True
        elif received == 0 and step.drain:
            # Quiet for receiveTimeout: nothing more was on the broker (or it went to
            # another consumer, or was a copy of a spooled message): the target is here.
            self._done = True

    def __repr__(self) -> str:
        return (
            f"Pacer(available_now={self._available_now}, target={self._target}, done={self._done})"
        )
