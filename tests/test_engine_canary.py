"""The canary (``canary_interval``) and ``connection.health()``, on the fake connector.

The fake broker does not route: a test plays the broker's part by delivering the canaries a
session sent back to its canary subscription (:func:`echo`), or by not doing so (a deaf session).
"""

from __future__ import annotations

import threading

from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import (
    FailedOver,
    FailoverConnection,
    Health,
    Message,
    PriorityRestored,
    SessionDeaf,
    SubscriptionHealth,
)
from failover_client.engine._canary import CANARY_PREFIX
from failover_client.testing import EventRecorder, FakeClock, FakeConnector, FakeSession
from failover_client.testing._clock import SAFETY_TIMEOUT

A, B = (BrokerAddress("stomp", name, 61613) for name in "ab")


def canary_id(session: FakeSession) -> str | None:
    return next((s for s in session.subscriptions if s.startswith(CANARY_PREFIX)), None)


def canaries(session: FakeSession) -> list[bytes]:
    """The canaries ``session`` sent, in order."""
    spec = session.subscriptions.get(canary_id(session) or "")
    return [m.body for m in session.sent if spec is not None and m.destination == spec.destination]


def echo(session: FakeSession, already: int) -> int:
    """Deliver the canaries sent after the first ``already`` back; returns how many in all."""
    sent = canaries(session)
    subscription = canary_id(session)
    assert subscription is not None
    for body in sent[already:]:
        session.deliver(subscription, body)
    return len(sent)


def connection(
    connector: FakeConnector, clock: FakeClock, events: EventRecorder, **options: object
) -> FailoverConnection:
    return FailoverConnection(
        (A, B),
        options=FailoverOptions(
            randomize=False, initial_reconnect_delay=0, reconnect_delay=0, **options
        ),
        connector=connector,
        clock=clock,
        listeners=[events],
    )


def test_a_session_that_hears_its_canary_stays_and_health_shows_the_round_trip() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    conn = connection(connector, clock, events, canary_interval=1.0, canary_misses=2)
    try:
        conn.connect()
        session = connector.session(A)
        assert connector.wait_until(lambda: len(canaries(session)) == 1)
        spec = session.subscriptions[canary_id(session) or ""]
        assert spec.destination.startswith("/temp-queue/" + CANARY_PREFIX)  # the fake's private
        assert spec.ack == "auto"
        echoed = 0
        for n in range(2, 6):  # four more intervals, each canary back at once
            echoed = echo(session, echoed)
            clock.advance(1.0)
            assert connector.wait_until(lambda n=n: len(canaries(session)) == n)
        assert conn.broker == str(A)
        assert not events.of_type(SessionDeaf)
        # The canary is no send of the application's: not counted, not confirmed, not tracked.
        assert conn.stats()["sent"] == 0
        assert all(m.on_confirm is None for m in session.sent)
        health = conn.health()
        assert health.ready
        assert health.canary_round_trip == 0.0  # echoed at the instant it was sent
        assert health.canary_age == 1.0
    finally:
        conn.close()


def test_a_session_whose_canary_stops_coming_back_is_deaf_and_fails_over() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    conn = connection(connector, clock, events, canary_interval=1.0, canary_misses=2)
    try:
        conn.connect()
        a = connector.session(A)
        assert connector.wait_until(lambda: len(canaries(a)) == 1)
        echo(a, 0)
        clock.advance(1.0)
        assert connector.wait_until(lambda: len(canaries(a)) == 2)
        assert not events.of_type(SessionDeaf)  # heard 1 s ago
        # From here on nothing comes back: deaf once the session heard nothing for 2 x 1 s
        # (canary 1 came back at 0), however recently canary 2 went out.
        clock.advance(1.0)
        deaf = events.wait_for(SessionDeaf)
        assert (deaf.broker, deaf.silent_for) == (str(A), 2.0)
        moved = events.wait_for(FailedOver)
        assert (moved.from_broker, moved.to_broker) == (str(A), str(B))
        assert connector.wait_until(lambda: a.closed)  # its socket was still up: closed
        b = connector.session(B)
        assert connector.wait_until(lambda: len(canaries(b)) == 1)  # B gets its own canary
        assert canary_id(b) != canary_id(a)
    finally:
        conn.close()


def test_canaries_go_to_the_canary_not_to_handlers_or_the_dispatch_thread() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    handled: list[Message] = []
    done = threading.Event()

    def handler(message: Message) -> None:
        handled.append(message)
        done.set()

    conn = connection(connector, clock, events, canary_interval=1.0)
    try:
        conn.subscribe("/queue/work", handler, id="work")
        conn.connect()
        session = connector.session(A)
        assert connector.wait_until(lambda: len(canaries(session)) == 1)
        echo(session, 0)
        session.deliver("work", b"job")
        assert done.wait(SAFETY_TIMEOUT)
        assert [m.body for m in handled] == [b"job"]
        assert conn.stats()["unroutable"] == 0
    finally:
        conn.close()


def test_a_broker_that_refuses_the_canary_destination_runs_the_session_without_one() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock, auto_confirm=False)
    events = EventRecorder()
    conn = connection(connector, clock, events, canary_interval=1.0)
    try:
        conn.connect()
        session = connector.session(A)
        assert connector.wait_until(lambda: canary_id(session) is not None)
        session.refuse_subscription(canary_id(session) or "", "no temporary destinations here")
        clock.advance(10.0)
        assert clock.wait_for_waiters(1)
        assert canaries(session) == []
        assert conn.broker == str(A)
        assert not events.of_type(SessionDeaf)
    finally:
        conn.close()


def test_a_canary_subscription_never_confirmed_makes_the_session_deaf() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock, auto_confirm=False)
    events = EventRecorder()
    conn = connection(connector, clock, events, canary_interval=1.0, canary_misses=3)
    try:
        conn.connect()
        session = connector.session(A)
        assert connector.wait_until(lambda: canary_id(session) is not None)
        clock.advance(3.0)
        deaf = events.wait_for(SessionDeaf)
        assert deaf.silent_for == 3.0
    finally:
        conn.close()


def test_the_canary_is_off_by_default() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    conn = connection(connector, clock, events)
    try:
        conn.connect()
        clock.advance(600.0)
        assert clock.wait_for_waiters(1)
        session = connector.session(A)
        assert canary_id(session) is None
        assert session.sent == []
        health = conn.health()
        assert (health.canary_round_trip, health.canary_age) == (None, None)
    finally:
        conn.close()


def test_health_is_ready_once_connected_and_every_subscription_confirmed() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock, auto_confirm=False)
    events = EventRecorder()
    conn = connection(connector, clock, events, confirm_window=8)
    try:
        assert not conn.health().ready  # not connected yet
        assert conn.health().state == "new"
        delivered = threading.Event()
        conn.subscribe("/queue/a", lambda m: delivered.set(), id="a")
        conn.connect()
        session = connector.session(A)
        health = conn.health()
        assert health.state == "connected"
        assert health.broker == str(A)
        assert health.subscriptions == (SubscriptionHealth("a", "/queue/a", False, None, 0),)
        assert not health.ready
        assert not health  # usable as a probe's truth value
        assert str(health).startswith("not-ready state=connected")
        session.confirm_subscriptions()
        clock.advance(2.0)
        session.deliver("a", b"x")
        assert delivered.wait(SAFETY_TIMEOUT)
        assert conn.health().subscriptions[0].last_delivery_age == 0
        clock.advance(1.5)
        conn.send_async("/queue/out", b"y")
        health = conn.health()
        assert isinstance(health, Health)
        assert health.ready
        assert health.subscriptions[0].active
        assert health.subscriptions[0].last_delivery_age == 1.5
        assert (health.unconfirmed_sends, health.confirm_window) == (1, 8)
        assert str(health) == (
            f"ready state=connected broker={A} subscriptions=1/1 unconfirmed=1/8"
        )
        session.kill()
        assert connector.wait_until(lambda: not conn.health().ready)
    finally:
        conn.close()


def test_a_priority_move_starts_the_canary_on_the_new_session() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "refuse")
    events = EventRecorder()
    conn = connection(
        connector, clock, events, canary_interval=100.0, priority_backup=True, reconnect_jitter=0.0
    )
    try:
        conn.connect()
        b = connector.session(B)
        assert connector.wait_until(lambda: len(canaries(b)) == 1)
        echo(b, 0)
        connector.behave(A, "accept")
        assert clock.wait_for_waiters(1, timed=True)
        clock.advance(min(clock.deadlines()) - clock.monotonic())  # the probe's turn
        events.wait_for(PriorityRestored)
        a = connector.session(A)
        assert connector.wait_until(lambda: len(canaries(a)) == 1)  # at once, not in 100 s
        assert canary_id(a) != canary_id(b)
        b_id = canary_id(b)
        assert b_id is not None
        b.deliver(b_id, b"1")  # a late canary of the session left: ignored, no harm
        assert conn.health().canary_round_trip is None  # none back on this session yet
        assert not events.of_type(SessionDeaf)
    finally:
        conn.close()
