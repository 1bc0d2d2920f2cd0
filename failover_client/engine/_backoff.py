"""The timers of the reconnect loop's background retries (priority probes, standby refill,
recovery of brokers left by a failure)."""

from __future__ import annotations

from failover_client.engine._decide import Timer
from failover_client.engine._dial import ScheduleLike, ScheduleRunLike

__all__ = ["Backoff"]

_MIN_BACKGROUND_DELAY = 0.01
"""Floor for probe/refill delays: an immediate retry would find the same broker still down."""


class Backoff:
    """The timer of a background retry (probes, standby refill), on the schedule's delays.

    Background work never gives up: when a run is exhausted a new one starts at the
    schedule's maximum delay.
    """

    __slots__ = ("_max_delay", "_run", "_schedule", "timer")

    def __init__(self, schedule: ScheduleLike, max_delay: float) -> None:
        self._schedule = schedule
        self._max_delay = max_delay
        self._run: ScheduleRunLike | None = None
        self.timer = Timer()

    def reset(self) -> None:
        """The work is gone: the next one starts idle, with the schedule's first delay."""
        self._run = None
        self.timer = Timer()

    def failed(self) -> None:
        """A try failed: the next waits for the schedule's next delay (see :class:`Arm`)."""
        self.timer = Timer(retry=True)

    def arm(self, now: float) -> None:
        if self._run is None:
            self._run = self._schedule.start(startup=False)
        delay = self._run.next_delay()
        if delay is None:
            self._run = self._schedule.start(startup=False)
            delay = self._max_delay
        self.timer = Timer(due=now + max(delay, _MIN_BACKGROUND_DELAY))
