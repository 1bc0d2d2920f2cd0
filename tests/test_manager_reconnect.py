"""The reconnect loop: order, delays, giving up, fatal errors, close, repr."""

from __future__ import annotations

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions, parse
from test_manager_support import A, B, C, assert_threads_gone, in_thread, make, running

from failover_client import (
    AllBrokersFailed,
    AuthenticationFailed,
    BrokerUnavailable,
    ConfigurationError,
    ConnectionClosed,
    NotConnected,
    TLSFailure,
)
from failover_client._events import (
    Closed,
    Connected,
    Disconnected,
    FailedOver,
    GaveUp,
    ReconnectAttempt,
    ReconnectWarning,
    TopologyChanged,
)
from failover_client.engine._connection import FailoverConnection
from failover_client.testing import EventRecorder, FakeClock, FakeConnector


def test_connects_to_first_broker_in_plan_order():
    rig = make((A, B, C))
    rig.connector.behave(A, "refuse")
    with running(rig):
        assert rig.conn.state == "connected"
        assert rig.conn.broker == "stomp://b:61613"
        assert rig.connector.attempted() == ["a:61613", "b:61613"]
        connected = rig.events.wait_for(Connected)
        assert connected == Connected("stomp://b:61613", attempt=1, elapsed=0.0)
        assert rig.events.of_type(ReconnectAttempt) == [
            ReconnectAttempt("stomp://a:61613", 1, 0.0),
            ReconnectAttempt("stomp://b:61613", 1, 0.0),
        ]


def test_startup_passes_follow_the_schedule_and_give_up_with_every_cause():
    rig = make((A, B, C), startup_max_reconnect_attempts=3, initial_reconnect_delay=0.25)
    for broker in (A, B, C):
        rig.connector.behave(broker, "refuse")
    rig.connector.behave(C, "hang")
    with running(rig, connect=False):
        with pytest.raises(AllBrokersFailed) as info:
            rig.conn.connect()
        # Classic startup: an immediate pass, then 0.25 s, then 0.5 s; the hang on c costs the
        # connect timeout (2 s) every pass.
        assert rig.connector.attempts == [
            ("a:61613", 0.0),
            ("b:61613", 0.0),
            ("c:61613", 0.0),
            ("a:61613", 2.25),
            ("b:61613", 2.25),
            ("c:61613", 2.25),
            ("a:61613", 4.75),
            ("b:61613", 4.75),
            ("c:61613", 4.75),
        ]
        error = info.value
        assert sorted(error.causes) == [
            "stomp://a:61613",
            "stomp://b:61613",
            "stomp://c:61613",
        ]
        assert all(isinstance(e, BrokerUnavailable) for e in error.causes.values())
        assert "handshake did not finish within 2s" in str(error.causes["stomp://c:61613"])
        gave_up = rig.events.wait_for(GaveUp)
        assert gave_up.error is error
        assert [b for b, _ in gave_up.causes] == [
            "stomp://a:61613",
            "stomp://b:61613",
            "stomp://c:61613",
        ]
        assert rig.conn.state == "failed"
        with pytest.raises(AllBrokersFailed, match="gave up") as later:
            rig.conn.send("/queue/q", b"x")
        assert later.value.causes == error.causes
        assert later.value.__cause__ is error


def test_reconnect_warning_follows_the_schedule():
    rig = make((A,), startup_max_reconnect_attempts=4, warn_after_reconnect_attempts=2)
    rig.connector.behave(A, "refuse")
    with running(rig, connect=False):
        with pytest.raises(AllBrokersFailed):
            rig.conn.connect()
        rig.events.wait_for(GaveUp)
        # Classic warns after the first failed pass and after every 2nd one.
        assert [w.attempt for w in rig.events.of_type(ReconnectWarning)] == [1, 2, 4]
        warning = rig.events.of_type(ReconnectWarning)[0]
        assert [b for b, _ in warning.causes] == ["stomp://a:61613"]


def test_broker_attempt_unit_counts_single_tries():
    rig = make(
        (A, B),
        attempt_unit="broker",
        startup_max_reconnect_attempts=2,
        reconnect_delay=1.0,
        backoff_multiplier=1.0,
        max_reconnect_delay=1.0,
    )
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")
    with running(rig, connect=False):
        with pytest.raises(AllBrokersFailed, match=r"4 reconnect attempt\(s\) \(broker\)"):
            rig.conn.connect()
        # Artemis: initialConnectAttempts=2 rounds over 2 brokers, one try per delay.
        assert rig.connector.attempts == [
            ("a:61613", 0.0),
            ("b:61613", 1.0),
            ("a:61613", 2.0),
            ("b:61613", 3.0),
        ]
        rig.events.wait_for(GaveUp)
        assert [e.attempt for e in rig.events.of_type(ReconnectAttempt)] == [1, 2, 3, 4]


def test_authentication_failure_stops_the_loop_after_the_pass():
    rig = make((A, B, C))
    rig.connector.behave(A, "auth-fail")
    rig.connector.behave(B, "refuse")
    rig.connector.behave(C, "refuse")
    with running(rig, connect=False):
        with pytest.raises(AuthenticationFailed, match="credentials refused"):
            rig.conn.connect()
        # The rest of the pass was still tried, then no second pass.
        assert rig.connector.attempted() == ["a:61613", "b:61613", "c:61613"]
        gave_up = rig.events.wait_for(GaveUp)
        assert isinstance(gave_up.error, AuthenticationFailed)
        assert [b for b, _ in gave_up.causes] == [
            "stomp://a:61613",
            "stomp://b:61613",
            "stomp://c:61613",
        ]


def test_authentication_failure_of_one_broker_does_not_stop_another():
    rig = make((A, B))
    rig.connector.behave(A, "auth-fail")
    with running(rig):
        assert rig.conn.broker == "stomp://b:61613"


def test_tls_failure_stops_the_loop():
    rig = make((A,))
    rig.connector.behave(A, "tls-fail")
    with running(rig, connect=False):
        with pytest.raises(TLSFailure):
            rig.conn.connect()
        assert rig.connector.attempted() == ["a:61613"]


def test_auth_failure_after_a_loss_gives_up_and_fails_waiting_sends():
    rig = make((A,), auto_confirm=False)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"1")
        rig.connector.behave(A, "auth-fail")
        rig.connector.session(A).kill()
        gave_up = rig.events.wait_for(GaveUp)
        assert isinstance(gave_up.error, AuthenticationFailed)
        failure = future.exception(5)
        assert isinstance(failure, AllBrokersFailed)
        assert failure.__cause__ is gave_up.error
        assert failure.causes == {"stomp://a:61613": gave_up.error}
        assert str(failure) == (
            "the reconnect loop gave up on AuthenticationFailed: stomp://a:61613: "
            "AuthenticationFailed: stomp://a:61613: credentials refused"
        )
        assert rig.conn.state == "failed"


def test_failover_after_loss_uses_runtime_delay_and_reports_events():
    rig = make((A, B))
    with running(rig):
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        failed_over = rig.events.wait_for(FailedOver)
        # The lost broker counts as a failure and goes to the end of the plan, so b is tried
        # first, and at once: initialReconnectDelay is for retrying the broker just lost.
        assert failed_over == FailedOver("stomp://a:61613", "stomp://b:61613", 0.0)
        assert rig.connector.attempts[1:] == [("b:61613", 0.0)]
        disconnected = rig.events.wait_for(Disconnected)
        assert disconnected.broker == "stomp://a:61613"
        assert isinstance(disconnected.cause, BrokerUnavailable)
        assert rig.conn.stats()["failovers"] == 1


def test_quarantined_broker_is_tried_after_the_live_ones():
    rig = make((A, B, C))
    rig.connector.behave(A, "refuse", "accept")
    with running(rig):
        assert rig.conn.broker == "stomp://b:61613"
        rig.connector.session(B).kill()
        rig.events.wait_for(FailedOver)
        # a refused and b was just lost: both are quarantined, so the live c goes first.
        assert rig.conn.broker == "stomp://c:61613"
        assert rig.connector.attempted() == ["a:61613", "b:61613", "c:61613"]


def test_a_lost_broker_is_tried_last_even_when_it_comes_back_at_once():
    rig = make((A, B))
    with running(rig):
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)
        # a would accept again, but a hung broker also "accepts" (TCP backlog): trying it
        # first would cost a connect timeout, so the plan after a loss is [b, a].
        assert rig.connector.attempted() == ["a:61613", "b:61613"]
        assert rig.conn.broker == "stomp://b:61613"


def test_close_interrupts_the_backoff_wait_at_once():
    rig = make((A,), autojump=False, initial_reconnect_delay=20.0)
    rig.connector.behave(A, "refuse")
    with running(rig, connect=False):
        outcome = in_thread(rig, rig.conn.connect)
        assert rig.connector.wait_for_attempts(1)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [20.0]
        rig.conn.close()
        assert outcome.done.wait(5)
        assert isinstance(outcome.error, ConnectionClosed)
        assert rig.connector.attempted() == ["a:61613"]
        assert rig.clock.monotonic() == 0.0
        assert_threads_gone(rig.conn)
        rig.events.wait_for(Closed)


def test_close_ends_every_thread_and_later_calls_raise():
    rig = make((A, B))
    with running(rig):
        rig.conn.send("/queue/q", b"x")
    assert rig.conn.state == "closed"
    assert rig.connector.session(A).closed
    with pytest.raises(ConnectionClosed, match="closed"):
        rig.conn.send("/queue/q", b"x")
    with pytest.raises(ConnectionClosed):
        rig.conn.send_async("/queue/q", b"x")
    with pytest.raises(ConnectionClosed):
        rig.conn.connect()
    rig.conn.close()  # idempotent


def test_send_before_connect_raises_not_connected():
    rig = make((A,))
    with running(rig, connect=False):
        with pytest.raises(NotConnected, match="connect"):
            rig.conn.send("/queue/q", b"x")
        with pytest.raises(NotConnected):
            rig.conn.send_async("/queue/q", b"x")
        with pytest.raises(NotConnected):
            rig.conn.flush()
        assert rig.connector.attempted() == []


def test_context_manager_connects_and_closes():
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    with FailoverConnection(
        (A,), options=FailoverOptions(), connector=connector, clock=clock
    ) as conn:
        assert conn.state == "connected"
    assert conn.state == "closed"
    assert_threads_gone(conn)


def test_repr_shows_live_state_without_secrets():
    secret = BrokerAddress("stomp", "a", 61613, user="app", password="s3cr3t")
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    conn = FailoverConnection(
        (secret, B),
        options=FailoverOptions(randomize=False),
        connector=connector,
        clock=clock,
        client_id="c",
        listeners=[events],
    )
    assert repr(conn) == (
        "<FailoverConnection new broker=None sent=0 confirmed=0 in_flight=0 replayed=0"
        " failovers=0 standbys=0 subscriptions=0>"
    )
    conn.connect()
    try:
        conn.send("/queue/q", b"x")
        assert repr(conn) == (
            "<FailoverConnection connected broker=stomp://app:***@a:61613 sent=1 confirmed=1"
            " in_flight=0 replayed=0 failovers=0 standbys=0 subscriptions=0>"
        )
        connector.behave(secret, "auth-fail")
        connector.behave(B, "refuse")
        connector.session(secret).kill()
        gave_up = events.wait_for(GaveUp)
    finally:
        conn.close()
    texts = [repr(conn), repr(conn.pool), str(gave_up.error), repr(gave_up)]
    texts += [repr(e) for e in events.events]
    assert all("s3cr3t" not in text for text in texts)
    assert "app:***@a:61613" in str(gave_up.error)


def test_uri_string_is_parsed():
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conn = FailoverConnection(
        "failover:(stomp://x:61613,stomp://y:61613)?randomize=false",
        connector=connector,
        clock=clock,
    )
    with conn:
        assert conn.broker == "stomp://x:61613"
        assert conn.options.randomize is False


def test_members_of_mixed_protocols_need_an_explicit_connector():
    with pytest.raises(ConfigurationError, match="one of: stomp"):
        FailoverConnection((A, BrokerAddress("amqp", "b", 5672)))


def test_parsed_uri_and_option_overrides_are_accepted():
    clock = FakeClock(autojump=True)
    parsed = parse("failover:(stomp://x:61613,stomp://y:61613)?randomize=false")
    conn = FailoverConnection(
        parsed,
        options=parsed.options.replace(timeout=3.0),
        heartbeat=(0, 0),
        connector=FakeConnector(clock=clock),
        clock=clock,
    )
    assert conn.options.timeout == 3.0
    assert conn.options.heartbeat == (0, 0)
    with conn:
        assert conn.broker == "stomp://x:61613"


def test_the_default_connector_is_the_stomp_adapter_for_stomp_members():
    conn = FailoverConnection("failover:(stomp://x:61613)", login="app", passcode="s3cr3t")
    assert type(conn._connector).__name__ == "StompConnector"
    assert "s3cr3t" not in repr(conn)
    conn.close()


def test_a_member_list_must_hold_addresses():
    with pytest.raises(ConfigurationError, match="BrokerAddress values, got str"):
        FailoverConnection(["stomp://a:61613"])  # type: ignore[list-item]


def test_pushed_topology_changes_the_pool_and_is_reported():
    rig = make((A,))
    with running(rig):
        rig.conn.update_brokers([B, C], source="amqp-open", action="add")
        assert rig.events.wait_for(TopologyChanged) == TopologyChanged(
            ("stomp://b:61613", "stomp://c:61613"), (), "amqp-open"
        )
        rig.conn.update_brokers([B], source="amqp-open", action="replace")
        assert rig.events.wait_for(TopologyChanged, 2).removed == ("stomp://c:61613",)
        rig.conn.update_brokers([], source="amqp-open", action="ignore")
        assert [s.key for s in rig.conn.pool.states()] == ["a:61613", "b:61613"]
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        # The discovered broker takes part in the fail-over.
        assert rig.events.wait_for(FailedOver).to_broker == "stomp://b:61613"


def test_quarantine_never_outlasts_a_short_max_reconnect_delay():
    rig = make((A, B), max_reconnect_delay=0.5)
    rig.connector.behave(A, "refuse")
    with running(rig):
        assert rig.conn.pool.state("a:61613").quarantined_until == 0.5


def test_an_unmapped_adapter_error_counts_as_a_broker_failure():
    rig = make((A, B))
    original = rig.connector.connect

    def leaky(address, *, timeout, listener, cancel=None):
        if address.key == "a:61613":
            raise OSError("socket exploded")
        return original(address, timeout=timeout, listener=listener, cancel=cancel)

    rig.connector.connect = leaky  # type: ignore[method-assign]
    with running(rig):
        assert rig.conn.broker == "stomp://b:61613"
        assert rig.conn.pool.state("a:61613").last_error == (
            "BrokerUnavailable: stomp://a:61613: adapter error OSError"
        )


def test_close_during_a_hanging_handshake_cancels_it():
    rig = make((A,), autojump=False)
    rig.connector.behave(A, "hang")
    with running(rig, connect=False):
        connecting = in_thread(rig, rig.conn.connect)
        assert rig.clock.wait_for_waiters(1, timed=True)
        assert rig.clock.deadlines() == [2.0]  # the handshake's connect timeout
        rig.conn.close()  # returns without the clock moving: the handshake is cancelled
        assert connecting.done.wait(5)
        assert isinstance(connecting.error, ConnectionClosed)
        assert rig.clock.monotonic() == 0.0
        assert rig.connector.attempted() == ["a:61613"]
        assert rig.connector.cancelled == ["a:61613"]
