"""Priority backup, tiers and standby (backup) sessions."""

from __future__ import annotations

from collections.abc import Sequence

from failover_client.uri import FailoverOptions
from test_manager_support import A, B, C, make, running

from failover_client._events import (
    Connected,
    DrainFinished,
    DrainStarted,
    FailedOver,
    PriorityRestored,
    StandbyConnected,
    StandbyLost,
)
from failover_client.engine._placement import better_brokers, plan, tiers_for


class Reverse:
    """A policy that plans in reverse list order (deterministic, and visibly not the input)."""

    def plan(self, candidates: Sequence[str], /) -> list[str]:
        return list(reversed(candidates))


# --- pure decisions ---------------------------------------------------------------------------


def test_tiers_without_priority_backup_are_flat():
    assert tiers_for((A, B), FailoverOptions()) == {"a:61613": 0, "b:61613": 0}


def test_priority_backup_prefers_the_first_member_by_default():
    options = FailoverOptions(priority_backup=True)
    assert tiers_for((A, B, C), options) == {"a:61613": 0, "b:61613": 1, "c:61613": 1}


def test_priority_uris_name_the_preferred_tier_and_overrides_win():
    options = FailoverOptions(priority_backup=True, priority_uris=("b:61613", "c:61613"))
    assert tiers_for((A, B, C), options) == {"a:61613": 1, "b:61613": 0, "c:61613": 0}
    assert tiers_for((A, B, C), options, {"a:61613": 2}) == {
        "a:61613": 2,
        "b:61613": 0,
        "c:61613": 0,
    }


def test_override_keys_name_brokers_without_case_as_pool_keys_do():
    # A hand-written key in another case or IPv6 spelling still names the member.
    tiers = tiers_for((A, B), FailoverOptions(), {"A:61613": 2, "[0:0::1]:61613": 1})
    assert tiers == {"a:61613": 2, "b:61613": 0, "[::1]:61613": 1}


def test_plan_balances_inside_each_tier_best_tier_first():
    assert plan([[A, B], [C]], Reverse()) == [B, A, C]


def test_plan_lists_each_broker_once_even_if_the_policy_repeats():
    class Repeating:
        def plan(self, candidates: Sequence[str], /) -> list[str]:
            return [candidates[0]] * len(candidates)

    assert plan([[A, B, C]], Repeating()) == [A, B, C]


def test_better_brokers_are_those_of_a_strictly_better_tier():
    tiers = {"a:61613": 0, "b:61613": 1, "c:61613": 1}
    assert better_brokers(B, [[A], [B, C]], tiers) == [A]
    assert better_brokers(A, [[A], [B, C]], tiers) == []


# --- priority backup --------------------------------------------------------------------------


def test_priority_backup_moves_back_when_the_preferred_broker_answers():
    rig = make((A, B), autojump=False, priority_backup=True)
    rig.connector.behave(A, "refuse")
    _ = rig.conn.subscribe("/queue/in", lambda m: None, id="s1")
    with running(rig):
        assert rig.conn.broker == "stomp://b:61613"
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [0.01]  # the runtime schedule's first delay
        rig.clock.advance(0.01)  # a is still down: the next probe backs off
        assert rig.connector.wait_for_attempts(3)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [0.03]
        rig.connector.behave(A, "accept")
        rig.clock.advance(0.02)
        restored = rig.events.wait_for(PriorityRestored)
        assert restored == PriorityRestored("stomp://b:61613", "stomp://a:61613")
        assert rig.conn.broker == "stomp://a:61613"
        assert rig.conn.state == "connected"
        # Make-before-break: b drains its queue subscription until quiet, then closes.
        assert rig.events.wait_for(DrainStarted).broker == "stomp://b:61613"
        assert not rig.connector.session(B).closed
        assert list(rig.connector.session(A).subscriptions) == ["s1"]
        assert rig.events.wait_for(Connected, 2).broker == "stomp://a:61613"
        # On the best tier nothing is probed any more: only the drain's quiet period is due.
        assert rig.clock.wait_for_deadline(1.03)
        rig.clock.advance(1.0)
        assert rig.events.wait_for(DrainFinished).complete
        assert rig.connector.session(B).closed
        assert rig.clock.wait_for_waiters(1)
        assert rig.clock.deadlines() == []


def test_priority_switch_drains_pending_confirmations_first():
    rig = make((A, B), autojump=False, auto_confirm=False, priority_backup=True)
    rig.connector.behave(A, "refuse")
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        rig.connector.behave(A, "accept")
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(0.01)
        assert rig.connector.wait_for_sessions(2)
        assert rig.clock.wait_for_waiters(1, timed=True)  # draining, up to connect_timeout
        assert rig.conn.state == "switching"
        rig.connector.session(B).confirm()
        rig.events.wait_for(PriorityRestored)
        assert future.result(5) is None
        assert rig.connector.session(A).sent == []  # confirmed on b: nothing to replay


def test_priority_switch_replays_what_the_old_broker_did_not_confirm_in_time():
    rig = make((A, B), autojump=False, auto_confirm=False, priority_backup=True)
    rig.connector.behave(A, "refuse")
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        rig.connector.behave(A, "accept")
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(0.01)
        assert rig.connector.wait_for_sessions(2)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [2.01]
        rig.clock.advance(2.0)
        rig.events.wait_for(PriorityRestored)
        session_a = rig.connector.session(A)
        assert session_a.message_ids() == ["c-1"]
        session_a.confirm()
        assert future.result(5) is None
        assert rig.conn.stats()["replayed"] == 1


def test_tiers_order_the_plan_and_priority_backup_probes_the_better_tier():
    rig = make(
        (A, B, C),
        autojump=False,
        priority_backup=True,
        priority_uris=("a:61613", "b:61613"),
    )
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")
    with running(rig):
        assert rig.conn.broker == "stomp://c:61613"
        assert rig.connector.attempted() == ["a:61613", "b:61613", "c:61613"]
        rig.connector.behave(B, "accept")
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(0.01)
        assert rig.events.wait_for(PriorityRestored).to_broker == "stomp://b:61613"
        # b is on the best tier already: a is not probed any more.
        assert rig.connector.attempted() == ["a:61613", "b:61613", "c:61613", "a:61613", "b:61613"]


def test_tiers_without_priority_backup_only_order_the_plan():
    rig = make((A, B, C), autojump=False)
    rig.conn = type(rig.conn)(
        (A, B, C),
        options=FailoverOptions(randomize=False),
        connector=rig.connector,
        clock=rig.clock,
        listeners=[rig.events],
        tiers={"a:61613": 1, "b:61613": 1, "c:61613": 0},
    )
    with running(rig):
        assert rig.conn.broker == "stomp://c:61613"
        assert rig.clock.wait_for_waiters(1)
        assert rig.clock.deadlines() == []


# --- standbys ---------------------------------------------------------------------------------


def test_standby_is_promoted_on_failover_without_a_connect():
    rig = make((A, B, C), backup=True, backup_pool_size=1)
    with running(rig):
        assert rig.events.wait_for(StandbyConnected) == StandbyConnected("stomp://b:61613")
        standby = rig.connector.session(B)
        assert rig.conn.stats()["standbys"] == 1
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        assert rig.events.wait_for(FailedOver) == FailedOver(
            "stomp://a:61613", "stomp://b:61613", 0.0
        )
        assert rig.events.wait_for(Connected, 2) == Connected("stomp://b:61613", 0, 0.0)
        assert rig.connector.session(B) is standby
        # A new standby replaces the promoted one: a was just lost, so it goes to the end of
        # the plan and c, tried first, answers.
        assert rig.events.wait_for(StandbyConnected, 2) == StandbyConnected("stomp://c:61613")
        assert rig.connector.attempted() == ["a:61613", "b:61613", "c:61613"]


def test_dead_standby_is_dropped_quietly_and_replaced():
    rig = make((A, B), backup=True, backup_pool_size=1)
    with running(rig):
        rig.events.wait_for(StandbyConnected)
        first = rig.connector.session(B)
        first.kill()
        lost = rig.events.wait_for(StandbyLost)
        assert lost.broker == "stomp://b:61613"
        rig.events.wait_for(StandbyConnected, 2)
        assert rig.connector.session(B) is not first
        assert rig.conn.state == "connected"
        assert rig.conn.broker == "stomp://a:61613"


def test_standby_refill_backs_off_when_no_other_broker_answers():
    rig = make((A, B), autojump=False, backup=True, backup_pool_size=1)
    rig.connector.behave(B, "refuse")
    with running(rig):
        assert rig.connector.wait_for_attempts(2)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [0.01]
        rig.connector.behave(B, "accept")
        rig.clock.advance(0.01)
        assert rig.events.wait_for(StandbyConnected).broker == "stomp://b:61613"


def test_close_closes_standbys():
    rig = make((A, B), backup=True, backup_pool_size=1)
    with running(rig):
        rig.events.wait_for(StandbyConnected)
    assert rig.connector.session(B).closed
