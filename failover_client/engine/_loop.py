"""The reconnect loop: the one background thread that owns every connection attempt.

It reads as a short piece of orchestration::

    until closed or given up:
        session = a live standby, or a reconnect run (Dialer.attempts)
        install it (restore subscriptions, replay unconfirmed sends)
        serve it until it is lost: standby refill, priority probes, rebalancing,
            drains of the brokers it left (make-before-break moves: ``._leaving``)

Every timed decision is :func:`._decide.decide`'s: each pass reads the clock once, copies what
the decisions need into a :class:`~._decide.View`, performs the one action the step names (then
looks again at once) or waits until its ``wake_at`` or a wake-up. The wait is ``clock.wait`` on
the state's ``wake`` event, which a lost session, a topology change and ``close()`` set, and
every connect carries a cancellation token that ``close()`` cancels (``Dialer.cancel``), so
closing interrupts at once.

The loop is written as a generator of its waits (:meth:`ReconnectLoop.steps`): its own thread
waits through them, or, for an event-loop driver, :mod:`._parking` runs the passes on threads
that end at each wait (:meth:`ReconnectLoop.park`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator

from failover_client._clock import Clock, ThreadAwareClock, running_on
from failover_client._errors import AuthenticationFailed, ConnectionFailure, TLSFailure
from failover_client._events import (
    Connected,
    Event,
    FailedOver,
    GaveUp,
    PriorityRestored,
    Rebalanced,
)
from failover_client._lazy import LazyEvent
from failover_client.engine._backoff import Backoff
from failover_client.engine._canary import Canary
from failover_client.engine._decide import (
    Arm,
    CanaryTick,
    CloseLeaving,
    Deaf,
    Dial,
    Disarm,
    DrawTurn,
    EndDrain,
    Expire,
    Probe,
    Rebalance,
    Reconnect,
    Recover,
    Refill,
    Settle,
    Stop,
    TimerName,
    View,
    decide,
)
from failover_client.engine._dedup import DuplicateNotice
from failover_client.engine._dial import (
    Dialer,
    DialOutcome,
    Interrupted,
    ScheduleLike,
)
from failover_client.engine._leaving import Departures
from failover_client.engine._parking import Parking, Schedule, Steps, WakeEvent
from failover_client.engine._planner import Planner
from failover_client.engine._slot import Slot
from failover_client.engine._standby import refill_candidates
from failover_client.engine._state import ConnectionState
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["ReconnectLoop"]

_log = logging.getLogger("failover_client")


class ReconnectLoop:
    """The reconnect loop of one connection, on its own thread."""

    __slots__ = ("_canary", "_clock", "_departures", "_dialer", "_duplicates", "_emit", "_name",
                 "_options", "_parking", "_planner", "_probe", "_probe_struck", "_recover",
                 "_refill", "_state", "_thread", "first_outcome", "on_clock")  # fmt: skip

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
        canary: Canary | None = None,
        when_flushed: Callable[[Slot, Callable[[], None]], None] | None = None,
        ack_handled: Callable[[Slot, list[str]], None] = lambda slot, ids: None,
    ) -> None:
        self._state = state
        self._canary = canary
        self._dialer = dialer
        self._planner = planner
        self._clock = clock
        self._options = options
        self._emit = emit
        self._probe = Backoff(schedule, options.max_reconnect_delay)
        self._refill = Backoff(schedule, options.max_reconnect_delay)
        self._recover = Backoff(schedule, options.max_reconnect_delay)
        self._departures = Departures(
            state=state,
            open_session=dialer.open,
            clock=clock,
            options=options,
            emit=emit,
            when_flushed=when_flushed or _flushed_at_once,
            ack_handled=ack_handled,
        )
        self._probe_struck: dict[str, None] = {}  # a dict's keys: 64 bytes empty, a set 216
        self._duplicates = DuplicateNotice(options)
        self.first_outcome: threading.Event = LazyEvent()
        """Set once the first connection succeeded or the loop gave up / was closed."""
        self.on_clock = LazyEvent()
        """Set once the loop's thread runs on the clock (see :meth:`start`)."""

        self._name = name
        self._thread: threading.Thread | None = None
        """Made by :meth:`start` when the loop does not park (a parked loop has none)."""
        self._parking: Parking | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread if self._parking is None else self._parking.thread

    def park(self, schedule: Schedule) -> bool:
        """Run without a thread of its own between passes (see :mod:`._parking`); call before
        :meth:`start`. False (the loop keeps its thread) on a virtual clock."""
        wake = self._state.wake
        if isinstance(self._clock, ThreadAwareClock) or not isinstance(wake, WakeEvent):
            return False
        self._parking = Parking(self.steps(), wake, schedule, self._clock, self._name)
        return True

    def start(self) -> None:
        if self._parking is not None:
            self.on_clock.set()  # the real clock: nothing to register with
            self._parking.start()
            return
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        # Until the loop runs on the clock, a virtual clock could jump past a caller's
        # connect(timeout=...) before the first attempt; the thread sets it first thing.
        self.on_clock.wait()  # ends at once: the thread sets it first thing

    def join(self) -> None:
        if self._parking is not None:
            if self.on_clock.is_set():  # started
                self._parking.join()  # ends once stop is set and the dialer cancelled
            return
        thread = self._thread
        if thread is not None and threading.current_thread() is not thread:
            thread.join()  # ends once stop is set and the dialer cancelled (close())

    # --- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        # On the clock until the first outcome is set: connect()'s timed wait must not see
        # time jump while the loop is still about to say how the start-up ended.
        with running_on(self._clock):
            self.on_clock.set()
            for wake_at in self.steps():
                self._wait(wake_at)

    def steps(self) -> Steps:
        """The loop, yielding each wait's ``wake_at`` (None: until a wake-up) to its driver."""
        startup = True
        previous: Slot | None = None
        lost_at = 0.0
        try:
            while True:
                # A session ended by a redirect while redirects come too fast to follow
                # (two brokers sending the client to each other) was no success: the
                # schedule goes on instead of starting over at its first delay.
                resume = previous is not None and previous.redirected
                resume = resume and self._planner.bouncing()
                outcome = self._standby() or (
                    yield from self._reconnect(startup=startup, resume=resume)
                )
                if not self._state.install(outcome.slot):
                    continue
                self._announce(outcome, previous, lost_at)
                if startup:
                    self._departures.started(outcome.slot, self._planner.plan())
                startup = False
                self.first_outcome.set()
                previous = yield from self._serve(outcome.slot)
                lost_at = self._clock.monotonic()
                self._departures.lost(previous)
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
            self._departures.close_all()
            self._state.drop_standbys()
            self.first_outcome.set()

    def _begin_pass(self) -> float:
        """Start a decision: the one reading of the clock it is judged at."""
        # Cleared before the view is built: a change after this point wakes the next wait.
        self._state.wake.clear()
        return self._clock.monotonic()

    def _wait(self, wake_at: float | None) -> None:
        """Wait until ``wake_at`` (None: nothing pending) or a wake-up."""
        if wake_at is None:
            self._clock.wait(self._state.wake, None)
            return
        # Measured now, not at the pass's reading: the deadline is absolute, and the time the
        # pass took is not added to it.
        left = wake_at - self._clock.monotonic()
        if left > 0:
            self._clock.wait(self._state.wake, left)

    def _give_up(self, error: BaseException) -> None:
        causes = self._dialer.last_causes
        self._state.give_up(error, dict(causes))
        self._emit(GaveUp(error, causes))

    def _standby(self) -> DialOutcome | None:
        slot = self._state.take_standby()
        return None if slot is None else DialOutcome(slot, 0, 0.0)

    def _reconnect(
        self, *, startup: bool, resume: bool
    ) -> Generator[float | None, None, DialOutcome]:
        """Drive one reconnect run (:meth:`Dialer.attempts`) through the decisions."""
        run = self._dialer.attempts(startup=startup, resume=resume)
        try:
            due = next(run)
            while True:
                now = self._begin_pass()
                view: View[BrokerAddress] = View(
                    stopping=self._state.stop.is_set(),
                    dialing=True,
                    attempt_due=due,
                    brokers_changed=self._dialer.pool_changed(),
                    deadline=self._dialer.deadline if startup else None,
                )
                step = decide(view, now)
                if isinstance(step.action, Stop):
                    raise Interrupted
                if isinstance(step.action, Expire):
                    raise self._dialer.expired()
                if isinstance(step.action, Dial):
                    due = run.send(None)
                else:
                    yield step.wake_at
        except StopIteration as done:
            outcome: DialOutcome = done.value
            return outcome
        finally:
            run.close()

    def _announce(self, outcome: DialOutcome, previous: Slot | None, lost_at: float) -> None:
        slot = outcome.slot
        self._connected(slot, outcome.attempt, outcome.elapsed)
        if previous is not None:
            with self._state.cond:
                self._state.stats.failovers += 1
            self._emit(FailedOver(previous.broker, slot.broker, self._clock.monotonic() - lost_at))
        _log.info("connected to %s", slot.broker)

    def _connected(self, slot: Slot, attempt: int, elapsed: float) -> None:
        self._emit(Connected(slot.broker, attempt, elapsed))
        product = slot.session.product if slot.session is not None else None
        notice = self._duplicates.connected(slot.broker, product)
        if notice is not None:
            self._emit(notice)

    def _serve(self, slot: Slot) -> Generator[float | None, None, Slot]:
        """Watch ``slot`` until it is lost (returns the lost slot); background work meanwhile."""
        current = slot
        self._probe.reset()
        self._refill.reset()
        while True:
            now = self._begin_pass()
            step = decide(self._view(current, now), now)
            action = step.action
            if action is None:
                yield step.wake_at
            elif isinstance(action, Stop):
                raise Interrupted
            elif isinstance(action, Reconnect):
                return current
            elif isinstance(action, Arm):
                self._timer(action.timer).arm(now)
            elif isinstance(action, Disarm):
                self._timer(action.timer).reset()
            elif isinstance(action, Refill):
                self._refill_standbys(action.candidates, action.wanted)
            elif isinstance(action, Probe):
                current = self._probe_better(current, action.targets)
            elif isinstance(action, DrawTurn | Settle | Rebalance):
                current = self._rebalance(current, action, now)
            elif isinstance(action, CanaryTick | Deaf):
                self._canary_step(current, action, now)
            elif isinstance(action, EndDrain | CloseLeaving | Recover):
                self._depart(action)
            else:  # Dial: decide() names it only while dialing
                raise AssertionError(f"{action!r} while serving a session")

    def _view(self, current: Slot, now: float) -> View[BrokerAddress]:
        """What the decisions need, at ``now``: plain values, copied out of the state."""
        planner = self._planner
        state = self._state
        wanted = (
            self._options.backup_pool_size - state.standby_count() if self._options.backup else 0
        )
        refill = self._refill.timer
        candidates: tuple[BrokerAddress, ...] = ()
        if wanted > 0 and (refill.due is None or now >= refill.due):
            # Only when a refill may happen: a plan advances a round-robin policy.
            exclude = {current.address.key} | state.standby_keys()
            candidates = tuple(refill_candidates(planner.plan(now), exclude))
        rebalancer = planner.rebalancer
        home = turn = release = None
        if rebalancer is not None:
            home = planner.home(current.address, now)
            turn = None if home is None else rebalancer.turn(home)
            release = planner.next_release(now)
        struck = self._probe_struck
        canary_due = canary_since = None
        if self._canary is not None:
            canary_due, canary_since = self._canary.view(current, now)
        better = tuple(a for a in planner.better(current.address, now) if a.key not in struck)
        return View(
            stopping=state.stop.is_set(),
            alive=current.alive,
            probe_targets=better,
            probe=self._probe.timer,
            standbys_wanted=wanted,
            refill_candidates=candidates,
            refill=refill,
            rebalancing=rebalancer is not None,
            home=home,
            turn=turn,
            turn_pending=rebalancer is not None and rebalancer.pending,
            next_release=release,
            canary_due=canary_due,
            canary_since=canary_since,
            canary_patience=0.0 if self._canary is None else self._canary.patience,
            leaving=self._departures.view(now),
            recover_targets=self._departures.recover_targets(current, better),
            recover=self._recover.timer,
        )

    def _canary_step(self, current: Slot, action: CanaryTick | Deaf, now: float) -> None:
        canary = self._canary
        assert canary is not None  # decide() names it only with a canary's view
        if isinstance(action, Deaf):
            canary.deaf(current, action.silent_for)
        else:
            canary.tick(current, now)

    def _timer(self, name: TimerName) -> Backoff:
        if name == "recover":
            return self._recover
        return self._probe if name == "probe" else self._refill

    # --- priority backup ---------------------------------------------------------------------

    def _probe_better(self, current: Slot, targets: tuple[BrokerAddress, ...]) -> Slot:
        """Try the better brokers in order; switch to the first that handshakes."""
        for address in targets:
            if self._state.stop.is_set():
                raise Interrupted
            try:
                found = self._dialer.open(address)
            except (AuthenticationFailed, TLSFailure):
                self._probe_struck[address.key] = None
            except ConnectionFailure:
                continue
            else:
                self._probe.reset()
                return self._switch(current, found)
        self._probe.failed()
        return current

    def _switch(self, old: Slot, new: Slot, *, rebalance: bool = False) -> Slot:
        """Move traffic from ``old`` to the preferred ``new``, make-before-break.

        New sends wait while ``old``'s confirmations come in (nothing is replayed twice), the
        subscriptions are made and confirmed on ``new``, sends move to it, and only then does
        ``old`` stop being current: it goes on delivering as a leaving session until its
        broker is drained (see :mod:`._leaving`).
        """
        state = self._state
        state.begin_switch()
        state.drain(old, self._clock.monotonic() + self._options.connect_timeout)
        if not self._departures.prepare(new):
            state.retire(new)
            return old if state.reinstate(old) else new
        state.hand_over(old)
        if not state.install(new):
            # ``new`` died on the way: ``old`` never stopped, so it carries on as it was.
            if state.reinstate(old):
                state.retire(new)
                return old
            state.retire(old)
            return new
        self._connected(new, 1, 0.0)
        if rebalance:
            self._emit(Rebalanced(old.broker, new.broker))
            _log.info("rebalanced: moved from %s to %s", old.broker, new.broker)
        else:
            self._emit(PriorityRestored(old.broker, new.broker))
            _log.info("priority backup: moved from %s to %s", old.broker, new.broker)
        self._departures.leave(old, "move")
        return new

    # --- brokers left ------------------------------------------------------------------------

    def _depart(self, action: EndDrain | CloseLeaving | Recover[BrokerAddress]) -> None:
        if isinstance(action, EndDrain):
            self._departures.end(action.slot, complete=action.complete)
        elif isinstance(action, CloseLeaving):
            self._departures.close(action.slot)
        else:
            self._recover_left(action.targets)

    def _recover_left(self, targets: tuple[BrokerAddress, ...]) -> None:
        """Open a drain session on each broker left by a failure that answers again."""
        answered = False
        for address in targets:
            if self._state.stop.is_set():
                raise Interrupted
            try:
                answered = self._departures.recover(address) or answered
            except ConnectionFailure:
                continue
        if answered:
            self._recover.reset()
        else:
            self._recover.failed()

    # --- rebalancing -------------------------------------------------------------------------

    def _rebalance(
        self,
        current: Slot,
        action: DrawTurn[BrokerAddress] | Settle | Rebalance[BrokerAddress],
        now: float,
    ) -> Slot:
        """Draw this client's turn, forget it, or make the move to its rendezvous home."""
        rebalancer = self._planner.rebalancer
        assert rebalancer is not None  # decide() asks only when rebalancing
        if isinstance(action, DrawTurn):
            rebalancer.due(action.home, now)
            return current
        rebalancer.settle()
        if isinstance(action, Settle):
            return current
        if self._state.stop.is_set():
            raise Interrupted
        try:
            found = self._dialer.open(action.home)
        except ConnectionFailure:
            # Recorded in the pool: the broker is quarantined, so the next home is another
            # (or this one again once its quarantine is over).
            return current
        return self._switch(current, found, rebalance=True)

    # --- standbys ----------------------------------------------------------------------------

    def _refill_standbys(self, candidates: tuple[BrokerAddress, ...], wanted: int) -> None:
        """Open standbys to ``candidates`` in order until ``wanted`` are up."""
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
        else:
            self._refill.failed()


def _flushed_at_once(slot: Slot, flushed: Callable[[], None]) -> None:
    """Without consumers (a loop built alone, in tests) nothing is ever buffered."""
    flushed()
