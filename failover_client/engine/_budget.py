"""How long a blocking send may wait, when the wait while failing over has its own bound.

Artemis clients know two bounds for a blocking call: ``callTimeout`` while the connection is up
(waiting for the broker's answer) and ``callFailoverTimeout`` while it fails over (waiting for a
live broker). A :class:`PhasedBudget` keeps both for one call: each stretch of the wait in which
the connection stays up, or stays down, gets its own bound, counted from when that stretch
began. A send written, lost with its session and replayed on the next broker thus waits at most
``callTimeout`` on each broker and ``callFailoverTimeout`` for each failover in between, as an
Artemis call does.

Without ``failover_timeout`` (ActiveMQ Classic and Qpid JMS URIs, or an explicit per-call
``timeout``) a send has one absolute deadline for the whole call, a plain float, and none of
this runs: the hot path stays a comparison of two floats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from failover_client._clock import Clock
from failover_client.engine._sync import ClockCondition

__all__ = ["PhasedBudget", "SendDeadline", "wait_phased"]


@dataclass
class PhasedBudget:
    """The bounds of one blocking call, by phase; changed only by the calling thread.

    ``connected`` and ``failing_over`` are seconds (None: no bound). ``spelling_connected`` and
    ``spelling_failing_over`` name the options as the user wrote them, for the error.
    """

    connected: float | None
    failing_over: float | None
    spelling_connected: str = "callTimeout"
    spelling_failing_over: str = "callFailoverTimeout"
    _phase: bool | None = field(default=None, init=False)
    _started: float = field(default=0.0, init=False)

    def deadline(self, connected: bool, now: float) -> float | None:
        """The absolute deadline of the current phase; a new phase starts its bound at ``now``."""
        if self._phase is not connected:
            self._phase = connected
            self._started = now
        limit = self.connected if connected else self.failing_over
        return None if limit is None else self._started + limit

    def exceeded(self) -> str:
        """Which bound ran out, for the SendTimeout message."""
        if self._phase:
            return f"{self.spelling_connected}={_ms(self.connected)} while connected"
        return f"{self.spelling_failing_over}={_ms(self.failing_over)} while failing over"


def _ms(seconds: float | None) -> str:
    return "-1" if seconds is None else f"{round(seconds * 1000)}ms"


SendDeadline = float | PhasedBudget | None
"""An absolute clock deadline, a :class:`PhasedBudget`, or None (wait forever)."""


def wait_phased(
    cond: ClockCondition,
    clock: Clock,
    ready: Callable[[], bool],
    connected: Callable[[], bool],
    budget: PhasedBudget,
) -> bool:
    """Wait (``cond`` held) until ``ready()``; False when the current phase's bound ran out.

    A change between connected and not connected wakes the wait (the connection notifies
    ``cond`` on every state change) and starts the new phase's bound.
    """
    while True:
        if ready():
            return True
        phase = connected()
        at = budget.deadline(phase, clock.monotonic())

        def settled(was: bool = phase) -> bool:
            return ready() or connected() is not was

        # Ends by the phase's deadline, or (no bound) when ready or the phase changes.
        if not cond.wait_until(settled, at):
            return False
