"""The reconnect loop's decisions as a table: ``(view, now) -> step``, brokers as plain ints.

Each kind of pending work has rows that show it gets an action or a deadline; a property then
checks the rule for any view: ``wake_at`` is None only when nothing at all is pending, and a
deadline without an action always lies in the future (no spin, no lost wake-up).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover_client.engine._decide import (
    Arm,
    CanaryTick,
    CloseLeaving,
    Deaf,
    Dial,
    Disarm,
    DrawTurn,
    EndDrain,
    Leaving,
    Probe,
    Rebalance,
    Reconnect,
    Recover,
    Refill,
    Settle,
    Step,
    Stop,
    Timer,
    View,
    decide,
)

PROPERTY = settings(derandomize=True, database=None, max_examples=500, deadline=None)

NOW = 10.0
ARMED = Timer(due=15.0)
DUE = Timer(due=10.0)
RETRY = Timer(retry=True)

ROWS: list[tuple[str, View[int], Step[int]]] = [
    # nothing at all is pending: only a wake-up (loss, topology change, close) ends the wait
    ("idle", View(), Step()),
    ("closing", View(stopping=True, probe_targets=(1,)), Step(Stop())),
    ("session lost", View(alive=False, probe_targets=(1,)), Step(Reconnect())),
    # reconnect delays
    ("dial: delay running", View(dialing=True, attempt_due=12.0), Step(wake_at=12.0)),
    ("dial: delay over", View(dialing=True, attempt_due=10.0), Step(Dial())),
    ("dial: no delay", View(dialing=True), Step(Dial())),
    (
        "dial: the pool changed, the delay is cut short",
        View(dialing=True, attempt_due=12.0, brokers_changed=True),
        Step(Dial()),
    ),
    ("dial: closing", View(stopping=True, dialing=True, attempt_due=12.0), Step(Stop())),
    # standby refills
    (
        "refill: first try at once",
        View(standbys_wanted=1, refill_candidates=(2, 3)),
        Step(Refill((2, 3), 1)),
    ),
    (
        "refill: failed, back off",
        View(standbys_wanted=1, refill_candidates=(2,), refill=RETRY),
        Step(Arm("refill")),
    ),
    ("refill: backing off", View(standbys_wanted=1, refill=ARMED), Step(wake_at=15.0)),
    (
        "refill: back-off over",
        View(standbys_wanted=2, refill_candidates=(3,), refill=DUE),
        Step(Refill((3,), 2)),
    ),
    ("refill: nobody to stand by", View(standbys_wanted=1, refill_candidates=()), Step()),
    ("refill: full again", View(standbys_wanted=0, refill=ARMED), Step(Disarm("refill"))),
    # priority probes
    ("probe: a better broker, arm", View(probe_targets=(1,)), Step(Arm("probe"))),
    ("probe: waiting", View(probe_targets=(1,), probe=ARMED), Step(wake_at=15.0)),
    ("probe: due", View(probe_targets=(1, 0), probe=DUE), Step(Probe((1, 0)))),
    ("probe: failed, back off", View(probe_targets=(1,), probe=RETRY), Step(Arm("probe"))),
    ("probe: nothing better any more", View(probe=ARMED), Step(Disarm("probe"))),
    # rebalancing turns and quarantine releases
    (
        "rebalance: home quarantined until 12 (the lost wake-up)",
        View(rebalancing=True, next_release=12.0),
        Step(wake_at=12.0),
    ),
    ("rebalance: at home", View(rebalancing=True), Step()),
    (
        "rebalance: home gone, forget the turn",
        View(rebalancing=True, turn_pending=True),
        Step(Settle()),
    ),
    ("rebalance: new home, draw a turn", View(rebalancing=True, home=4), Step(DrawTurn(4))),
    (
        "rebalance: waiting for the turn",
        View(rebalancing=True, home=4, turn=11.5, turn_pending=True),
        Step(wake_at=11.5),
    ),
    (
        "rebalance: a release comes before the turn",
        View(rebalancing=True, home=4, turn=11.5, turn_pending=True, next_release=10.5),
        Step(wake_at=10.5),
    ),
    (
        "rebalance: the turn came",
        View(rebalancing=True, home=4, turn=10.0, turn_pending=True),
        Step(Rebalance(4)),
    ),
    ("rebalance: off, releases do not matter", View(next_release=12.0), Step()),
    # the canary: a tick at its turn, deafness once one is owed for misses x interval
    ("canary: a new session, start it", View(canary_due=10.0), Step(CanaryTick())),
    ("canary: next one later", View(canary_due=11.0), Step(wake_at=11.0)),
    (
        "canary: one owed, next one first",
        View(canary_due=11.0, canary_since=9.5, canary_patience=2.0),
        Step(wake_at=11.0),
    ),
    (
        "canary: one owed, deaf at its deadline",
        View(canary_due=12.0, canary_since=9.5, canary_patience=2.0),
        Step(wake_at=11.5),
    ),
    (
        "canary: owed misses x interval, deaf",
        View(canary_due=11.0, canary_since=8.0, canary_patience=2.0),
        Step(Deaf(2.0)),
    ),
    (
        "canary: subscription never confirmed, deaf",
        View(canary_since=7.0, canary_patience=2.0),
        Step(Deaf(3.0)),
    ),
    (
        "canary: deafness before a due tick and a due probe",
        View(canary_due=9.0, canary_since=8.0, canary_patience=1.0, probe_targets=(1,), probe=DUE),
        Step(Deaf(2.0)),
    ),
    (
        "canary: a due tick before a due refill",
        View(canary_due=10.0, standbys_wanted=1, refill_candidates=(2,)),
        Step(CanaryTick()),
    ),
    (
        "canary: a lost session fails over, no tick",
        View(alive=False, canary_due=9.0),
        Step(Reconnect()),
    ),
    # sessions being left: quiet, deadline, flushed
    (
        "leaving: draining, quiet at 11, deadline 40",
        View(leaving=(Leaving(7, quiet_until=11.0, deadline=40.0),)),
        Step(wake_at=11.0),
    ),
    (
        "leaving: quiet",
        View(leaving=(Leaving(7, quiet_until=10.0, deadline=40.0),)),
        Step(EndDrain(7, complete=True)),
    ),
    (
        "leaving: never quiet, the deadline",
        View(leaving=(Leaving(7, quiet_until=10.5, deadline=10.0),)),
        Step(EndDrain(7, complete=False)),
    ),
    (
        "leaving: ending, waiting for the handlers (the barrier wakes the loop)",
        View(leaving=(Leaving(7, quiet_until=9.0, deadline=40.0, ending=True),)),
        Step(),
    ),
    (
        "leaving: flushed, close it",
        View(leaving=(Leaving(7, 9.0, 40.0, ending=True, flushed=True),)),
        Step(CloseLeaving(7)),
    ),
    (
        "leaving: the earliest of two",
        View(leaving=(Leaving(7, 12.0, 40.0), Leaving(8, 11.0, 40.0))),
        Step(wake_at=11.0),
    ),
    (
        "leaving: a due probe first",
        View(probe_targets=(1,), probe=DUE, leaving=(Leaving(7, 9.0, 40.0),)),
        Step(Probe((1,))),
    ),
    # brokers left by a failure
    ("recover: a broker left, arm", View(recover_targets=(3,)), Step(Arm("recover"))),
    ("recover: waiting", View(recover_targets=(3,), recover=ARMED), Step(wake_at=15.0)),
    ("recover: due", View(recover_targets=(3,), recover=DUE), Step(Recover((3,)))),
    ("recover: failed, back off", View(recover_targets=(3,), recover=RETRY), Step(Arm("recover"))),
    ("recover: nothing left", View(recover=ARMED), Step(Disarm("recover"))),
    # several duties: the earliest deadline, the refill first among actions
    (
        "earliest of refill, probe and turn",
        View(
            standbys_wanted=1,
            refill=ARMED,
            probe_targets=(1,),
            probe=Timer(due=13.0),
            rebalancing=True,
            home=4,
            turn=14.0,
            turn_pending=True,
        ),
        Step(wake_at=13.0),
    ),
    (
        "a due refill before a due probe",
        View(standbys_wanted=1, refill_candidates=(2,), probe_targets=(1,), probe=DUE),
        Step(Refill((2,), 1)),
    ),
    (
        "a due probe before a due turn",
        View(probe_targets=(1,), probe=DUE, rebalancing=True, home=4, turn=9.0),
        Step(Probe((1,))),
    ),
]


@pytest.mark.parametrize(("view", "step"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_decision_table(view: View[int], step: Step[int]) -> None:
    assert decide(view, NOW) == step


def pending(view: View[int], now: float) -> bool:
    """Whether any work is pending, said independently of decide()."""
    return (
        view.stopping
        or view.dialing
        or not view.alive
        or (
            view.standbys_wanted > 0
            and (view.refill.due is not None or view.refill_candidates != ())
        )
        or (view.standbys_wanted <= 0 and not view.refill.idle)
        or view.probe_targets != ()
        or not view.probe.idle
        or (view.rebalancing and (view.home is not None or view.turn_pending))
        or (view.rebalancing and view.next_release is not None and view.next_release > now)
        or view.canary_due is not None
        or view.canary_since is not None
        or any(not leaving.ending or leaving.flushed for leaving in view.leaving)
        or view.recover_targets != ()
        or not view.recover.idle
    )


times = st.floats(min_value=0.0, max_value=20.0)
timers = st.builds(Timer, due=st.none() | times, retry=st.booleans())
brokers = st.lists(st.integers(0, 5), max_size=3, unique=True).map(tuple)
dialing = st.builds(
    View, dialing=st.just(True), attempt_due=st.none() | times, brokers_changed=st.booleans()
)
refilling = st.builds(
    View, standbys_wanted=st.integers(-1, 2), refill_candidates=brokers, refill=timers
)
probing = st.builds(View, probe_targets=brokers, probe=timers)
leaves = st.lists(
    st.builds(
        Leaving,
        slot=st.integers(0, 5),
        quiet_until=times,
        deadline=times,
        ending=st.booleans(),
        flushed=st.booleans(),
    ),
    max_size=3,
).map(tuple)
leaving = st.builds(View, leaving=leaves)
recovering = st.builds(View, recover_targets=brokers, recover=timers)
rebalancing = st.builds(
    View,
    rebalancing=st.just(True),
    home=st.none() | st.integers(0, 5),
    turn=st.none() | times,
    turn_pending=st.booleans(),
    next_release=st.none() | times,
)
everything = st.builds(
    View,
    stopping=st.booleans(),
    dialing=st.booleans(),
    attempt_due=st.none() | times,
    brokers_changed=st.booleans(),
    alive=st.booleans(),
    probe_targets=brokers,
    probe=timers,
    standbys_wanted=st.integers(-1, 2),
    refill_candidates=brokers,
    refill=timers,
    rebalancing=st.booleans(),
    home=st.none() | st.integers(0, 5),
    turn=st.none() | times,
    turn_pending=st.booleans(),
    next_release=st.none() | times,
    canary_due=st.none() | times,
    canary_since=st.none() | times,
    canary_patience=st.floats(min_value=0.0, max_value=5.0),
    leaving=leaves,
    recover_targets=brokers,
    recover=timers,
)
canary = st.builds(
    View,
    canary_due=st.none() | times,
    canary_since=st.none() | times,
    canary_patience=st.floats(min_value=0.0, max_value=5.0),
)
# One kind of pending work at a time (each alone must get its deadline), then all at once.
views = st.one_of(dialing, refilling, probing, rebalancing, canary, leaving, recovering, everything)


@PROPERTY
@given(views, times)
def test_no_wait_without_a_deadline_while_work_is_pending(view: View[int], now: float) -> None:
    step = decide(view, now)
    if step.action is None:
        if step.wake_at is None:
            assert not pending(view, now) or _backing_off_without_candidates(view), view
        else:
            assert step.wake_at > now, (view, step)  # a deadline already over would spin


def _backing_off_without_candidates(view: View[int]) -> bool:
    # A refill whose back-off is over with nobody to stand by: only a topology change (which
    # wakes the loop) can give it work.
    refill = view.refill
    return view.standbys_wanted > 0 and view.refill_candidates == () and refill.due is not None


def test_decide_is_pure() -> None:
    view: View[int] = View(
        rebalancing=True, home=4, turn=11.5, turn_pending=True, next_release=10.5
    )
    assert decide(view, NOW) == decide(view, NOW) == Step(wake_at=10.5)
    # At 10.5 the release is in the home the view was built with: it is no deadline any more.
    assert decide(view, 10.5) == Step(wake_at=11.5)
    assert decide(view, 11.5) == Step(Rebalance(4))
