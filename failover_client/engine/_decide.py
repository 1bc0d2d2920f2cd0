"""The reconnect loop's decisions: one pure function of (a view of the state, one ``now``).

:func:`decide` looks at a :class:`View` (plain values the driver copied out of the connection
state at one reading of the clock) and returns a :class:`Step`: at most one action to perform
now, and otherwise the deadline at which to look again (``wake_at``). It touches no thread,
event or clock, so the thread driver (:mod:`._loop`) and, later, an asyncio driver run the same
decisions, and a test states them as a table of ``(view, now) -> step`` rows.

Why one reading of the clock: helpers that each read the clock and add to a shared list of
deadlines lose wake-ups. When a broker's quarantine ended between two readings, the first said
"your home is quarantined, stay" and the second found no quarantine left to wait for, so the
loop waited with no deadline and the client stayed off its home until something unrelated woke
it. Here every timed duty is judged against the same ``now``, and the rule is simple enough to
check row by row: **while any work is pending, the step has an action or a deadline**;
``wake_at`` is None only when nothing at all is pending (the driver then waits for a wake-up:
a lost session, a topology change, ``close()``).

The timed duties, in the order they are served (an action ends the step; the driver performs
it and decides again with a fresh view, since performing it may take a connect timeout):

1. ``close()`` (:class:`Stop`) and a lost session (:class:`Reconnect`): at once.
2. The start-up deadline (``connect(timeout=...)``, dialing only): once it passed the run ends
   (:class:`Expire`), whatever the schedule would still allow.
3. The reconnect run's next attempt (dialing only): its delay, cut short by a pool change.
4. Standby refill (``backup=True``): the first try at once, later ones on the schedule.
5. Priority probes (a better tier exists): on the schedule's back-off.
6. Rebalancing: the move to this client's rendezvous home at its turn in the drain window,
   and every quarantine release (a released broker may be the home again).
7. Brokers being left (:class:`Leaving`): a drain ends when its session was quiet for
   ``drain_quiet`` or at its ``drain_timeout`` deadline (:class:`EndDrain`); once the messages it
   delivered are handled, its session closes (:class:`CloseLeaving`).
8. Brokers left by a failure that still hold our queue subscriptions' messages: retried on the
   schedule's back-off until one answers, then drained (:class:`Recover`).

The canary (``canary_interval`` > 0) comes first among a live session's duties: a session whose
canary is overdue is deaf (:class:`Deaf`, a loss), else the next canary goes at its turn
(:class:`CanaryTick`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = [
    "Action",
    "Arm",
    "CanaryTick",
    "CloseLeaving",
    "Deaf",
    "Dial",
    "Disarm",
    "DrawTurn",
    "EndDrain",
    "Expire",
    "Leaving",
    "Probe",
    "Rebalance",
    "Reconnect",
    "Recover",
    "Refill",
    "Settle",
    "Step",
    "Stop",
    "Timer",
    "TimerName",
    "View",
    "decide",
]

K = TypeVar("K")
"""A broker as the driver names it (an address in the engine; a plain int or str in tests)."""

TimerName = Literal["probe", "refill", "recover"]


@dataclass(frozen=True, slots=True)
class Timer:
    """A background retry's timer: ``due`` when armed; ``retry`` after a try that failed."""

    due: float | None = None
    retry: bool = False

    @property
    def idle(self) -> bool:
        return self.due is None and not self.retry


@dataclass(frozen=True, slots=True)
class Leaving:
    """A session the connection left (a move, or a drain of a recovered broker), by number.

    ``quiet_until``: when its drain ends for want of deliveries (the last delivery plus
    ``drain_quiet``; the start for a session that is not drained); ``deadline``: when it ends
    whatever is left. ``ending``: its end is decided, and the messages it delivered are being
    handled (the dispatch thread's barrier wakes the loop); ``flushed``: they are.
    """

    slot: int
    quiet_until: float
    deadline: float
    ending: bool = False
    flushed: bool = False


@dataclass(frozen=True, slots=True)
class View(Generic[K]):
    """What the decisions need of the connection's state, as plain values.

    Dialing (no current session): ``attempt_due`` is when the reconnect run's next attempt is
    due, ``brokers_changed`` that the pool changed since its delay began (which cuts it short:
    a broker that joined is tried at once). Serving: ``alive`` says whether the current session
    is; the rest describes the background work around it.
    """

    stopping: bool = False
    dialing: bool = False
    attempt_due: float | None = None
    brokers_changed: bool = False
    deadline: float | None = None
    """Dialing at start-up with ``connect(timeout=...)``: when the run must have found a
    broker (None: the schedule alone decides when to give up)."""
    alive: bool = True
    probe_targets: tuple[K, ...] = ()
    """Brokers of a better tier to probe, best first (empty: nothing better, or no priority
    backup)."""
    probe: Timer = Timer()
    standbys_wanted: int = 0
    refill_candidates: tuple[K, ...] = ()
    """Brokers to stand by, in plan order; needed only once the refill is due (a plan
    advances a round-robin policy, so the driver may leave it empty before)."""
    refill: Timer = Timer()
    rebalancing: bool = False
    home: K | None = None
    """Where rebalancing wants the client, when that is not where it is."""
    turn: float | None = None
    """When the move to ``home`` is due (None: its turn is not drawn yet)."""
    turn_pending: bool = False
    """A turn is drawn for some home (settle it when there is no home any more)."""
    next_release: float | None = None
    """The earliest end of a quarantine still running at ``now``."""
    canary_due: float | None = None
    """When the current session's next canary goes (its first: when the session became
    current); None: no canary (off, or waiting for its subscription's confirmation)."""
    canary_since: float | None = None
    """While a canary is owed, since when the session has heard nothing: its last canary back
    (or the confirmation of the canary's subscription), or the subscribing of its destination
    until the broker confirmed it; None: nothing owed."""
    canary_patience: float = 0.0
    """How long the session may hear nothing while a canary is owed before it is deaf
    (misses x interval)."""
    leaving: tuple[Leaving, ...] = ()
    """Sessions being left (drained or flushed), oldest first."""
    recover_targets: tuple[K, ...] = ()
    """Brokers left by a failure that hold queue messages of ours, to drain once they answer."""
    recover: Timer = Timer()


@dataclass(frozen=True, slots=True)
class Stop:
    """``close()`` was called: end the loop."""


@dataclass(frozen=True, slots=True)
class Reconnect:
    """The current session is lost: fail over."""


@dataclass(frozen=True, slots=True)
class Dial:
    """Make the reconnect run's next attempt."""


@dataclass(frozen=True, slots=True)
class Expire:
    """The start-up deadline passed: end the run with every broker's cause."""


@dataclass(frozen=True, slots=True)
class Arm:
    """Draw the timer's next delay from the schedule and set it due ``now`` + that delay."""

    timer: TimerName


@dataclass(frozen=True, slots=True)
class Disarm:
    """The timer's work is gone: forget it and its back-off."""

    timer: TimerName


@dataclass(frozen=True, slots=True)
class Refill(Generic[K]):
    """Open standbys to ``candidates``, in order, until ``wanted`` are up."""

    candidates: tuple[K, ...]
    wanted: int


@dataclass(frozen=True, slots=True)
class Probe(Generic[K]):
    """Try the better ``targets`` in order; switch to the first that handshakes."""

    targets: tuple[K, ...]


@dataclass(frozen=True, slots=True)
class DrawTurn(Generic[K]):
    """The home changed: draw this client's turn in the drain window for ``home``."""

    home: K


@dataclass(frozen=True, slots=True)
class Settle:
    """No move is waiting any more (the home is where the client is, or gone)."""


@dataclass(frozen=True, slots=True)
class Rebalance(Generic[K]):
    """Move to ``home`` now (its turn came)."""

    home: K


@dataclass(frozen=True, slots=True)
class CanaryTick:
    """Send the current session's next canary (the first: subscribe its destination)."""


@dataclass(frozen=True, slots=True)
class Deaf:
    """No canary came back for ``silent_for`` seconds: the session is deaf; fail over."""

    silent_for: float


@dataclass(frozen=True, slots=True)
class EndDrain:
    """End the leaving session ``slot``'s drain: ``complete`` when it went quiet, False at its
    deadline. Its delivered messages are handled (or released when incomplete) before it
    closes."""

    slot: int
    complete: bool


@dataclass(frozen=True, slots=True)
class CloseLeaving:
    """The leaving session ``slot`` delivered nothing more to handle: close it."""

    slot: int


@dataclass(frozen=True, slots=True)
class Recover(Generic[K]):
    """Try the brokers left by a failure; open a drain session on each that answers."""

    targets: tuple[K, ...]


Action = (
    Stop
    | Reconnect
    | Dial
    | Expire
    | Arm
    | Disarm
    | Refill[K]
    | Probe[K]
    | DrawTurn[K]
    | Settle
    | Rebalance[K]
    | CanaryTick
    | Deaf
    | EndDrain
    | CloseLeaving
    | Recover[K]
)


@dataclass(frozen=True, slots=True)
class Step(Generic[K]):
    """An action to perform now (then decide again at once), or when to look again.

    ``wake_at`` None with no action: nothing is pending; wait for a wake-up only.
    """

    action: Action[K] | None = None
    wake_at: float | None = None


def decide(view: View[K], now: float) -> Step[K]:
    """The next step of the loop at ``now``; pure (see the module docstring)."""
    if view.stopping:
        return Step(Stop())
    if view.dialing:
        return _dialing(view, now)
    if not view.alive:
        return Step(Reconnect())
    deadlines: list[float] = []
    for duty in (_canary, _refill, _probe, _rebalance, _leave, _recover):
        action = duty(view, now, deadlines)
        if action is not None:
            return Step(action)
    return Step(wake_at=min(deadlines, default=None))


def _dialing(view: View[K], now: float) -> Step[K]:
    deadline = view.deadline
    if deadline is not None and now >= deadline:
        return Step(Expire())
    due = view.attempt_due
    if due is None or view.brokers_changed or now >= due:
        return Step(Dial())
    return Step(wake_at=due if deadline is None else min(due, deadline))


def _canary(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    since = view.canary_since
    if since is not None:
        deaf_at = since + view.canary_patience
        if now >= deaf_at:
            return Deaf(now - since)
        deadlines.append(deaf_at)
    due = view.canary_due
    if due is None:
        return None
    if now >= due:
        return CanaryTick()
    deadlines.append(due)
    return None


def _refill(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    timer = view.refill
    if view.standbys_wanted <= 0:
        return None if timer.idle else Disarm("refill")
    if timer.due is not None and now < timer.due:
        deadlines.append(timer.due)  # backing off (the candidates are not needed before)
        return None
    if not view.refill_candidates:
        return None  # nobody else to stand by: a topology change wakes the loop
    if timer.retry:
        return Arm("refill")  # the first refill is immediate; after a failed one, the back-off
    return Refill(view.refill_candidates, view.standbys_wanted)


def _probe(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    timer = view.probe
    if not view.probe_targets:
        return None if timer.idle else Disarm("probe")
    if timer.due is None:
        return Arm("probe")  # a preferred broker just went down: give it the schedule's delay
    if now >= timer.due:
        return Probe(view.probe_targets)
    deadlines.append(timer.due)
    return None


def _leave(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    for leaving in view.leaving:
        if leaving.flushed:
            return CloseLeaving(leaving.slot)
        if leaving.ending:
            continue  # the consumers wake the loop once its messages are handled
        if now >= leaving.quiet_until:
            return EndDrain(leaving.slot, complete=True)
        if now >= leaving.deadline:
            return EndDrain(leaving.slot, complete=False)
        deadlines.append(min(leaving.quiet_until, leaving.deadline))
    return None


def _recover(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    # The priority probe's rule: the broker just went down, so the first try waits the
    # schedule's delay, and a failed try backs off.
    timer = view.recover
    if not view.recover_targets:
        return None if timer.idle else Disarm("recover")
    if timer.due is None:
        return Arm("recover")
    if now >= timer.due:
        return Recover(view.recover_targets)
    deadlines.append(timer.due)
    return None


def _rebalance(view: View[K], now: float, deadlines: list[float]) -> Action[K] | None:
    if not view.rebalancing:
        return None
    release = view.next_release
    if release is not None and release > now:
        deadlines.append(release)  # a released broker may be the home again
    # (A release at ``now`` or before is in the home the view was built with.)
    if view.home is None:
        return Settle() if view.turn_pending else None
    if view.turn is None:
        return DrawTurn(view.home)
    if now >= view.turn:
        return Rebalance(view.home)
    deadlines.append(view.turn)
    return None
