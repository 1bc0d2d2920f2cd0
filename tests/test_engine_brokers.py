"""Broker lists a broker sends on the data connection: merged into the pool, redirects followed."""

from __future__ import annotations

from failover_client.uri import BrokerAddress
from test_manager_support import A, B, C, make, running

from failover_client._events import Connected, FailedOver, TopologyChanged
from failover_client.adapter import AdvertisedBrokers
from failover_client.engine._placement import redirected

D = BrokerAddress("stomp", "d", 61613)
E = BrokerAddress("stomp", "e", 61613)


def _keys(addresses: list[BrokerAddress]) -> list[str]:
    return [a.key for a in addresses]


def _report(rig_session: object, advertised: AdvertisedBrokers) -> None:
    listener = rig_session.listener  # type: ignore[attr-defined]
    listener.on_brokers(rig_session, advertised)


# --- merging -------------------------------------------------------------------------------


def test_a_list_from_the_current_session_is_merged_and_announced():
    rig = make((A, B))
    with running(rig):
        session = rig.connector.session(A)
        _report(session, AdvertisedBrokers((D, E), source="amqp-open"))
        changed = rig.events.wait_for(TopologyChanged)
        assert changed == TopologyChanged(("stomp://d:61613", "stomp://e:61613"), (), "amqp-open")
        assert {s.key: (s.seed, s.source) for s in rig.conn.pool.states()} == {
            "a:61613": (True, "uri"),
            "b:61613": (True, "uri"),
            "d:61613": (False, "amqp-open"),
            "e:61613": (False, "amqp-open"),
        }
        # The same source's next list replaces its discoveries; seeds stay.
        _report(session, AdvertisedBrokers((E,), source="amqp-open"))
        second = rig.events.wait_for(TopologyChanged, count=2)
        assert second == TopologyChanged((), ("stomp://d:61613",), "amqp-open")
        assert sorted(s.key for s in rig.conn.pool.states()) == ["a:61613", "b:61613", "e:61613"]


def test_the_merge_follows_the_server_list_action():
    rig = make((A, B), server_list_action="add")
    with running(rig):
        session = rig.connector.session(A)
        _report(session, AdvertisedBrokers((D,), source="amqp-open"))
        _report(session, AdvertisedBrokers((E,), source="amqp-open"))
        rig.events.wait_for(TopologyChanged, count=2)
        assert sorted(s.key for s in rig.conn.pool.states()) == [
            "a:61613",
            "b:61613",
            "d:61613",
            "e:61613",
        ]


def test_an_ignored_list_changes_nothing():
    rig = make((A, B), server_list_action="ignore")
    with running(rig):
        _report(rig.connector.session(A), AdvertisedBrokers((D,), source="amqp-open"))
        rig.conn.update_brokers((E,), source="barrier", action="add")
        # Events are delivered in order: the barrier's event is the only one.
        assert rig.events.wait_for(TopologyChanged).source == "barrier"
        assert rig.events.of_type(TopologyChanged) == [
            TopologyChanged(("stomp://e:61613",), (), "barrier")
        ]
        assert "d:61613" not in rig.conn.pool


def test_a_report_from_a_dead_session_is_ignored():
    rig = make((A, B))
    with running(rig):
        old = rig.connector.session(A)
        rig.connector.behave(A, "refuse")
        old.kill()
        rig.events.wait_for(FailedOver)
        _report(old, AdvertisedBrokers((D,), source="amqp-open", redirect=True))
        _report(rig.connector.session(B), AdvertisedBrokers((E,), source="amqp-open"))
        assert rig.events.wait_for(TopologyChanged).added == ("stomp://e:61613",)
        assert len(rig.events.of_type(TopologyChanged)) == 1
        assert "d:61613" not in rig.conn.pool
        # Nor is its redirect followed.
        assert _keys(rig.conn._planner.dial_plan()) == _keys(rig.conn._planner.plan())


def test_a_report_after_close_is_ignored():
    rig = make((A, B))
    with running(rig):
        session = rig.connector.session(A)
    _report(session, AdvertisedBrokers((D,), source="amqp-open"))
    assert "d:61613" not in rig.conn.pool


# --- redirects -----------------------------------------------------------------------------


def test_a_redirect_is_tried_first_on_the_next_reconnect():
    rig = make((A, B, C))
    with running(rig):
        session = rig.connector.session(A)
        _report(session, AdvertisedBrokers((C, D), source="amqp-redirect", redirect=True))
        session.kill()
        failed_over = rig.events.wait_for(FailedOver)
        assert failed_over.to_broker == "stomp://c:61613"
        # Without the redirect the plan would have gone to b first.
        assert rig.connector.attempted() == ["a:61613", "c:61613"]
        assert "d:61613" in rig.conn.pool


def test_a_redirect_to_a_new_broker_is_merged_then_tried_first():
    rig = make((A, B))
    with running(rig):
        session = rig.connector.session(A)
        _report(session, AdvertisedBrokers((D,), source="amqp-redirect", redirect=True))
        session.kill()
        assert rig.events.wait_for(FailedOver).to_broker == "stomp://d:61613"
        assert rig.connector.attempted() == ["a:61613", "d:61613"]


def test_a_redirect_is_used_once():
    rig = make((A, B, C))
    with running(rig):
        _report(
            rig.connector.session(A),
            AdvertisedBrokers((C,), source="amqp-redirect", redirect=True),
        )
        first = rig.conn._planner.dial_plan()
        second = rig.conn._planner.dial_plan()
        assert first[0].key == "c:61613"
        assert second[0].key != "c:61613"
        assert sorted(_keys(first)) == sorted(_keys(second)) == ["a:61613", "b:61613", "c:61613"]


def test_a_failed_redirect_costs_one_try_and_the_plan_goes_on():
    rig = make((A, B, C))
    with running(rig):
        session = rig.connector.session(A)
        _report(session, AdvertisedBrokers((C,), source="amqp-redirect", redirect=True))
        rig.connector.behave(C, "refuse")
        session.kill()
        assert rig.events.wait_for(Connected, count=2).broker == "stomp://b:61613"
        assert rig.connector.attempted() == ["a:61613", "c:61613", "b:61613"]


def test_a_redirect_the_pool_does_not_take_is_not_followed():
    rig = make((A, B), server_list_action="ignore")
    with running(rig):
        _report(
            rig.connector.session(A),
            AdvertisedBrokers((D,), source="amqp-redirect", redirect=True),
        )
        assert "d:61613" not in rig.conn.pool
        assert _keys(rig.conn._planner.dial_plan()) == ["a:61613", "b:61613"]


def test_a_list_without_redirect_does_not_reorder():
    rig = make((A, B, C))
    with running(rig):
        _report(rig.connector.session(A), AdvertisedBrokers((C,), source="amqp-open"))
        assert _keys(rig.conn._planner.dial_plan()) == ["a:61613", "b:61613", "c:61613"]


# --- the pure decision ---------------------------------------------------------------------


def test_redirected_moves_the_target_to_the_head_and_keeps_the_rest_in_order():
    assert _keys(redirected([A, B, C, D], C)) == ["c:61613", "a:61613", "b:61613", "d:61613"]


def test_redirected_without_a_target_is_the_plan():
    plan = [A, B]
    result = redirected(plan, None)
    assert result == plan
    assert result is not plan


def test_redirected_never_adds_a_broker_the_plan_does_not_hold():
    assert _keys(redirected([A, B], D)) == ["a:61613", "b:61613"]


def test_redirected_matches_by_host_and_port_and_keeps_the_plans_entry():
    tls_c = BrokerAddress("stomp+ssl", "c", 61613)
    assert redirected([A, tls_c], C) == [tls_c, A]
