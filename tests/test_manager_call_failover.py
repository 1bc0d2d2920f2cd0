"""Artemis callFailoverTimeout: a send waiting for a failover has a bound of its own.

``failover_timeout`` (callFailoverTimeout) bounds the waits while no broker is connected,
``timeout`` (callTimeout) those while connected; each stretch counts from when it began.
"""

from __future__ import annotations

from test_manager_support import A, B, in_thread, make, running

from failover_client import SendTimeout
from failover_client._events import FailedOver


def test_a_send_blocked_during_failover_follows_call_failover_timeout():
    rig = make(
        (A,), autojump=False, initial_reconnect_delay=20.0, timeout=30.0, failover_timeout=5.0
    )
    with running(rig):
        rig.connector.session(A).kill()
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        # The reconnect loop waits 20 s; the send 5 s (callFailoverTimeout), not 30 s.
        assert rig.clock.wait_for_waiters(2, timed=True)
        assert rig.clock.deadlines() == [5.0, 20.0]
        rig.clock.advance(5.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "not connected (reconnecting)" in str(blocked.error)
        assert "callFailoverTimeout=5000ms while failing over" in str(blocked.error)


def test_a_send_blocked_while_connected_follows_call_timeout():
    rig = make((A,), autojump=False, auto_confirm=False, timeout=2.0, failover_timeout=60.0)
    with running(rig):
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        assert rig.connector.wait_until(lambda: len(rig.connector.session(A).sent) == 1)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [2.0]
        rig.clock.advance(2.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "callTimeout=2000ms while connected" in str(blocked.error)
        assert rig.conn.stats()["in_flight"] == 0


def test_a_failover_longer_than_call_timeout_does_not_fail_the_send():
    rig = make(
        (A,), autojump=False, initial_reconnect_delay=20.0, timeout=1.0, failover_timeout=30.0
    )
    with running(rig):
        rig.connector.session(A).kill()
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        assert rig.clock.wait_for_waiters(2, timed=True)
        assert rig.clock.deadlines() == [20.0, 30.0]
        rig.clock.advance(20.0)
        assert blocked.done.wait(5)
        assert blocked.error is None
        assert rig.connector.sessions[-1].message_ids() == ["c-1"]


def test_each_phase_counts_from_its_start_across_a_failover_with_replay():
    rig = make(
        (A, B),
        autojump=False,
        auto_confirm=False,
        initial_reconnect_delay=3.0,
        timeout=2.0,
        failover_timeout=10.0,
    )
    with running(rig):
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        session_a = rig.connector.session(A)
        assert rig.connector.wait_until(lambda: len(session_a.sent) == 1)
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(1.5)  # 1.5 s of the 2 s callTimeout on A
        rig.connector.behave(A, "refuse")
        # B's first connect (at once: another broker than the one lost) is refused too, so the
        # failover waits out the back-off: its next step, 6 s (3 s doubled; the first delay
        # was skipped for another broker).
        rig.connector.behave(B, "refuse", "accept")
        session_a.kill()
        # The loss starts the failover phase: 10 s from now (1.5), beside the 6 s back-off.
        assert rig.clock.wait_for_deadline(11.5)
        assert rig.clock.wait_for_deadline(7.5)
        assert rig.clock.deadlines() == [7.5, 11.5]
        rig.clock.advance(6.0)
        rig.events.wait_for(FailedOver)
        session_b = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: len(session_b.sent) == 1)
        # Replayed on B: a fresh callTimeout from the moment B was in use.
        assert rig.clock.wait_for_deadline(9.5)
        assert rig.clock.deadlines() == [9.5]
        rig.clock.advance(1.5)
        assert session_b.confirm() == 1
        assert blocked.done.wait(5)
        assert blocked.error is None  # 9 s in all, more than one callTimeout, within each phase


def test_an_explicit_per_call_timeout_bounds_the_whole_call():
    rig = make(
        (A,), autojump=False, initial_reconnect_delay=20.0, timeout=30.0, failover_timeout=60.0
    )
    with running(rig):
        rig.connector.session(A).kill()
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x", timeout=4.0))
        assert rig.clock.wait_for_waiters(2, timed=True)
        assert rig.clock.deadlines() == [4.0, 20.0]
        rig.clock.advance(4.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "callFailoverTimeout" not in str(blocked.error)


def test_without_call_failover_timeout_one_deadline_covers_both_phases():
    rig = make((A,), autojump=False, initial_reconnect_delay=20.0, timeout=5.0)
    with running(rig):
        rig.connector.session(A).kill()
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        assert rig.clock.wait_for_waiters(2, timed=True)
        assert rig.clock.deadlines() == [5.0, 20.0]
        rig.clock.advance(5.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "failing over" not in str(blocked.error)
