"""After a loss, the first attempt goes at once when it tries another broker (fake clock).

The style's initial reconnect delay (Classic's and Qpid's ``initialReconnectDelay``) is there
to spare the broker that just failed; it still applies when the attempt would retry that
broker, and the run's later delays do not change.
"""

from __future__ import annotations

import random

from test_manager_support import A, B, C, make, running

from failover_client._events import FailedOver
from failover_client.engine._schedule import ReconnectSchedule


def _classic(**changes: object) -> ReconnectSchedule:
    return ReconnectSchedule(rng=random.Random(1)).replace(**changes)


def _delays(schedule: ReconnectSchedule, *, startup: bool, elsewhere: bool) -> list[float | None]:
    run = schedule.start(startup=startup)
    return [run.next_delay(elsewhere=elsewhere) for _ in range(4)]


def test_the_schedule_skips_only_the_first_delay_after_a_loss_and_only_elsewhere() -> None:
    classic = _classic()
    assert _delays(classic, startup=False, elsewhere=False) == [0.01, 0.02, 0.04, 0.08]
    assert _delays(classic, startup=False, elsewhere=True) == [0.0, 0.02, 0.04, 0.08]
    # A startup run starts at once anyway; its back-off is the same either way.
    assert _delays(classic, startup=True, elsewhere=True) == [0.0, 0.01, 0.02, 0.04]
    qpid = _classic(style="qpid", initial_delay=0.5, delay=0.01)
    assert _delays(qpid, startup=False, elsewhere=False) == [0.5, 0.01, 0.02, 0.04]
    assert _delays(qpid, startup=False, elsewhere=True) == [0.0, 0.01, 0.02, 0.04]


def test_a_run_that_may_not_start_still_gives_up_elsewhere() -> None:
    run = _classic(max_attempts=0).start(startup=False)
    assert run.next_delay(elsewhere=True) is None
    assert run.attempts == 0


def test_a_loss_with_another_live_broker_fails_over_without_the_initial_delay() -> None:
    rig = make((A, B), autojump=False, initial_reconnect_delay=20.0)
    with running(rig):
        rig.connector.session(A).kill()
        failed_over = rig.events.wait_for(FailedOver)
        assert failed_over == FailedOver("stomp://a:61613", "stomp://b:61613", 0.0)
        assert rig.clock.monotonic() == 0.0  # the virtual clock never had to move
        assert rig.connector.attempts[1:] == [("b:61613", 0.0)]


def test_a_loss_of_the_only_broker_waits_the_initial_delay_before_retrying_it() -> None:
    rig = make((A,), autojump=False, initial_reconnect_delay=20.0)
    with running(rig):
        rig.connector.session(A).kill()
        assert rig.clock.wait_for_waiters(1, timed=True)  # the loop's back-off
        assert rig.clock.deadlines() == [20.0]
        rig.clock.advance(20.0)
        rig.events.wait_for(FailedOver)
        assert rig.connector.attempts[1:] == [("a:61613", 20.0)]


def test_a_loss_when_every_other_broker_is_quarantined_keeps_the_initial_delay() -> None:
    rig = make((A, B, C), autojump=False, initial_reconnect_delay=20.0)
    rig.connector.behave(A, "refuse", "refuse", "accept")
    rig.connector.behave(B, "refuse", "refuse", "accept")
    with running(rig):
        assert rig.conn.broker == "stomp://c:61613"  # a and b refused: both quarantined
        rig.connector.session(C).kill()
        # Every broker is quarantined now: the next pass may start with c again.
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [20.0]
