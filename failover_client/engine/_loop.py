"""The reconnect loop: the one background thread that owns every connection attempt.

It reads as a short piece of orchestration::

    until closed or given up:
        session = a live standby, or a reconnect run (Dialer)
        install it (restore subscriptions, replay unconfirmed sends)
        serve it: sleep on the clock until it is lost, doing meanwhile
            - standby refill (backup=True)
            - priority probes (a better tier exists): on success, switch over

Every wait is ``clock.wait`` on an event that ``close()`` sets, and every connect carries a
cancellation token that ``close()`` cancels (``Dialer.cancel``), so closing interrupts at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from failover_client._clock import Clock
from failover_client._errors import AuthenticationFailed, ConnectionFailure, TLSFailure
from failover_client._events import (
    Connected,
    Event,
    FailedOver,
    GaveUp,
    PriorityRestored,
    Rebalanced,
)
from failover_client.engine._dial import (
    Dialer,
    DialOutcome,
    Interrupted,
    ScheduleLike,
    ScheduleRunLike,
)
from failover_client.engine._planner import Planner
from failover_client.engine._slot import Slot
from failover_client.engine._standby import refill_candidates
from failover_client.engine._state import ConnectionState
from failover_client.uri import FailoverOptions

__all__ = ["ReconnectLoop"]

_log = logging.getLogger("failover_client")

_MIN_BACKGROUND_DELAY = 0.01
"""Floor for probe/refill delays: an immediate retry would find the same broker still down."""


class _Backoff:
    """Delays for a background retry (probes, standby refill) drawn from the schedule.

    Background work never gives up: when a run is exhausted a new one starts at the
    schedule's maximum delay.
    """

    def __init__(self, schedule: ScheduleLike, max_delay: float) -> None:
        self._schedule = schedule
        self._max_delay = max_delay
        self._run: ScheduleRunLike | None = None
        self.due: float | None = None

    def reset(self) -> None:
        self._run = None
        self.due = None

    def arm(self, now: float) -> float:
        """Schedule the next try after ``now``; returns its due time."""
        if self._run is None:
            self._run = self._schedule.start(startup=False)
        delay = self._run.next_delay()
        if delay is None:
            self._run = self._schedule.start(startup=False)
            delay = self._max_delay
        self.due = now + max(delay, _MIN_BACKGROUND_DELAY)
        return self.due


class ReconnectLoop:
    """The reconnect loop of one connection, on its own thread."""

    def __init__(
        self,
        *,
        state: ConnectionState,
        dialer: Dialer,
        planner: Planner,
        schedule: ScheduleLike,
        clock: Clock,
        options: FailoverOptions,
        emit: Callable[[Event], None],
        name: str,
    ) -> None:
        self._state = state
        self._dialer = dialer
        self._planner = planner
        self._clock = clock
        self._options = options
        self._emit = emit
        self._probe = _Backoff(schedule, options.max_reconnect_delay)
        self._refill = _Backoff(schedule, options.max_reconnect_delay)
        self._probe_struck: set[str] = set()
        self.first_outcome = threading.Event()
        """Set once the first connection succeeded or the loop gave up / was closed."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        if self._thread.ident is not None and threading.current_thread() is not self._thread:
            self._thread.join()

    # --- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        startup = True
        previous: Slot | None = None
        lost_at = 0.0
        try:
            while True:
                outcome = self._standby() or self._dialer.dial(startup=startup)
                if not self._state.install(outcome.slot):
                    continue
                self._announce(outcome, previous, lost_at)
                startup = False
                self.first_outcome.set()
                previous = self._serve(outcome.slot)
                lost_at = self._clock.monotonic()
                self._dialer.lost(previous)
        except Interrupted:
            pass
        except ConnectionFailure as exc:
            self._give_up(exc)
        except Exception as exc:  # noqa: BLE001 - logged, and every waiter is failed with it
            # A bug (ours or an adapter's): fail loudly rather than leave senders waiting.
            _log.exception("the reconnect loop failed")
            self._give_up(exc)
        finally:
            self._state.drop_standbys()
            self.first_outcome.set()

    def _give_up(self, error: BaseException) -> None:
        causes = self._dialer.last_causes
        self._state.give_up(error, dict(causes))
        self._emit(GaveUp(error, causes))

    def _standby(self) -> DialOutcome | None:
        slot = self._state.take_standby()
        return None if slot is None else DialOutcome(slot, 0, 0.0)

    def _announce(self, outcome: DialOutcome, previous: Slot | None, lost_at: float) -> None:
        slot = outcome.slot
        self._emit(Connected(slot.broker, outcome.attempt, outcome.elapsed))
        if previous is not None:
            with self._state.cond:
                self._state.stats.failovers += 1
            self._emit(FailedOver(previous.broker, slot.broker, self._clock.monotonic() - lost_at))
        _log.info("connected to %s", slot.broker)

    def _serve(self, slot: Slot) -> Slot:
        """Watch ``slot`` until it is lost (returns the lost slot); background work meanwhile."""
        current = slot
        self._probe.reset()
        self._refill.reset()
        while True:
            self._state.wake.clear()
            if self._state.stop.is_set():
                raise Interrupted
            if not current.alive:
                return current
            due: list[float] = []
            if self._options.backup:
                due.extend(self._maintain_standbys(current))
            switched = self._maybe_probe(current, due) or self._maybe_rebalance(current, due)
            if switched is not None:
                current = switched
                continue
            now = self._clock.monotonic()
            timeout = None if not due else max(0.0, min(due) - now)
            self._clock.wait(self._state.wake, timeout)

    # --- priority backup ---------------------------------------------------------------------

    def _maybe_probe(self, current: Slot, due: list[float]) -> Slot | None:
        targets = [
            a for a in self._planner.better(current.address) if a.key not in self._probe_struck
        ]
        if not targets:
            self._probe.reset()
            return None
        now = self._clock.monotonic()
        if self._probe.due is None:
            self._probe.arm(now)
        assert self._probe.due is not None
        if now < self._probe.due:
            due.append(self._probe.due)
            return None
        for address in targets:
            if self._state.stop.is_set():
                raise Interrupted
            try:
                found = self._dialer.open(address)
            except (AuthenticationFailed, TLSFailure):
                self._probe_struck.add(address.key)
            except ConnectionFailure:
                continue
            else:
                self._probe.reset()
                return self._switch(current, found)
        due.append(self._probe.arm(self._clock.monotonic()))
        return None

    def _switch(self, old: Slot, new: Slot, *, rebalance: bool = False) -> Slot:
        """Move traffic from ``old`` to the preferred ``new`` without losing a confirmation."""
        state = self._state
        state.begin_switch()
        state.drain(old, self._clock.monotonic() + self._options.connect_timeout)
        state.retire(old)
        if state.install(new):
            self._emit(Connected(new.broker, 1, 0.0))
            if rebalance:
                self._emit(Rebalanced(old.broker, new.broker))
                _log.info("rebalanced: moved from %s to %s", old.broker, new.broker)
            else:
                self._emit(PriorityRestored(old.broker, new.broker))
                _log.info("priority backup: moved from %s to %s", old.broker, new.broker)
        return new

    # --- rebalancing -------------------------------------------------------------------------

    def _maybe_rebalance(self, current: Slot, due: list[float]) -> Slot | None:
        """Move to this client's rendezvous home once its turn in the drain window came."""
        rebalancer = self._planner.rebalancer
        if rebalancer is None:
            return None
        home = self._planner.home(current.address)
        if home is None:
            rebalancer.settle()
            # A broker back from quarantine may be this client's home again: look then.
            release = self._planner.next_release()
            if release is not None:
                due.append(release)
            return None
        now = self._clock.monotonic()
        when = rebalancer.due(home, now)
        if now < when:
            due.append(when)
            return None
        rebalancer.settle()
        if self._state.stop.is_set():
            raise Interrupted
        try:
            found = self._dialer.open(home)
        except ConnectionFailure:
            # Recorded in the pool: the broker is quarantined, so the next home is another
            # (or this one again once its quarantine is over).
            due.append(self._clock.monotonic() + _MIN_BACKGROUND_DELAY)
            return None
        return self._switch(current, found, rebalance=True)

    # --- standbys ----------------------------------------------------------------------------

    def _maintain_standbys(self, current: Slot) -> list[float]:
        """Top the standbys up; returns when to try again (empty: nothing to do)."""
        wanted = self._options.backup_pool_size - self._state.standby_count()
        if wanted <= 0:
            self._refill.reset()
            return []
        now = self._clock.monotonic()
        if self._refill.due is not None and now < self._refill.due:
            return [self._refill.due]
        exclude = {current.address.key} | self._state.standby_keys()
        candidates = refill_candidates(self._planner.plan(), exclude)
        if not candidates:
            return []  # nobody else to stand by; a topology change wakes the loop
        for address in candidates:
            if wanted <= 0:
                break
            if self._state.stop.is_set():
                raise Interrupted
            try:
                slot = self._dialer.open(address)
            except ConnectionFailure:
                continue
            if self._state.add_standby(slot):
                wanted -= 1
        if wanted <= 0:
            self._refill.reset()
            return []
        return [self._refill.arm(self._clock.monotonic())]
