"""Redirects: a hop to the broker named, at once, never a failure; bounded so none loops.

The connector here makes scripted brokers refuse the handshake with a redirect, as an AMQP
broker (an Artemis connection router, a Qpid router) does with ``amqp:connection:redirect``:
it names the target through ``on_brokers`` and the connect fails.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import AllBrokersFailed, BrokerUnavailable, Connected, FailoverConnection
from failover_client.adapter import AdvertisedBrokers, Cancel, SessionListener
from failover_client.engine._placement import MAX_REDIRECT_HOPS, REDIRECT_WINDOW, Redirects
from failover_client.testing import FakeClock, FakeConnector, FakeSession

A = BrokerAddress("amqp", "a", 5672)
B = BrokerAddress("amqp", "b", 5672)
C = BrokerAddress("amqp", "c", 5672)
SAFETY = 30.0  # real seconds, only against a hung test


class RedirectingConnector(FakeConnector):
    """Brokers in ``redirects`` refuse every open, naming another broker."""

    def __init__(self, redirects: dict[str, BrokerAddress], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.redirects = redirects

    def connect(
        self, address: BrokerAddress, *, timeout: float, listener: SessionListener, cancel: Cancel
    ) -> FakeSession:
        target = self.redirects.get(address.key)
        if target is None:
            return super().connect(address, timeout=timeout, listener=listener, cancel=cancel)
        with self._lock:
            self.attempts.append((address.key, self._clock.monotonic()))
        advertised = AdvertisedBrokers((target,), source="amqp-redirect", redirect=True)
        listener.on_brokers(None, advertised)  # type: ignore[arg-type]  # no session yet
        raise BrokerUnavailable(f"redirected to {target}", broker=str(address))


def connection(connector: FakeConnector, clock: FakeClock, **options: Any) -> FailoverConnection:
    return FailoverConnection(
        (A, C),
        options=FailoverOptions(
            randomize=False, initial_reconnect_delay=0, reconnect_delay=0, **options
        ),
        connector=connector,
        clock=clock,
    )


def test_a_redirect_is_followed_at_once_before_the_rest_of_the_plan() -> None:
    clock = FakeClock()
    connector = RedirectingConnector({A.key: B}, clock=clock)
    conn = connection(connector, clock)
    try:
        conn.connect()
        assert conn.broker == str(B)
        assert [key for key, _ in connector.attempts] == [A.key, B.key]  # C never tried
    finally:
        conn.close()


def test_two_brokers_that_redirect_to_each_other_cannot_bounce_a_client_forever() -> None:
    clock = FakeClock()
    connector = RedirectingConnector({A.key: B, B.key: A}, clock=clock)
    connector.behave(C, "refuse")
    conn = connection(connector, clock, startup_max_reconnect_attempts=1)
    try:
        with pytest.raises(AllBrokersFailed):
            conn.connect()
    finally:
        conn.close()
    tried = [key for key, _ in connector.attempts]
    # The first pass: A, then MAX_REDIRECT_HOPS hops between B and A, then C; the second pass
    # follows no more redirects (the row is full): A, C.
    assert tried[: 2 + MAX_REDIRECT_HOPS] == [A.key] + [B.key, A.key] * 2 + [B.key, C.key]
    assert len(tried) <= 2 * (2 + MAX_REDIRECT_HOPS)


def test_the_row_of_redirects_starts_again_after_a_quiet_window() -> None:
    clock = FakeClock()
    redirects = Redirects(clock)
    assert all(redirects.offer(B) for _ in range(MAX_REDIRECT_HOPS))
    assert not redirects.offer(B)
    assert redirects.take() == B
    assert redirects.take() is None  # used up
    clock.advance(REDIRECT_WINDOW + 1)
    assert redirects.offer(C)
    assert redirects.take() == C


def test_brokers_that_accept_then_redirect_to_each_other_cost_the_schedules_delays() -> None:
    # As two AMQP routers do that answer each open with an open and at once a close with
    # amqp:connection:redirect naming the other: every handshake completes, so once the row
    # of redirects is full, each session's end must count as a failed attempt (the schedule
    # goes on, its delays growing) instead of a success to start over from.
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    other = {A.key: B, B.key: A}
    until = 60.0  # virtual seconds of bouncing, then the brokers stop redirecting

    def bounce(event: object) -> None:  # on the dispatch thread, after each Connected
        if isinstance(event, Connected) and clock.monotonic() < until:
            session = connector.sessions[-1]
            session.advertise([other[session.address.key]], source="amqp-redirect", redirect=True)
            session.kill()

    conn = FailoverConnection(
        (A, B),
        # No jitter: the figures below are the schedule's exact delays.
        options=FailoverOptions(
            randomize=False,
            initial_reconnect_delay=0.1,
            max_reconnect_delay=10.0,
            reconnect_jitter=0.0,
        ),
        connector=connector,
        clock=clock,
        listeners=[bounce],
    )
    try:
        conn.connect()
        assert connector.wait_until(lambda: clock.monotonic() >= until, timeout=SAFETY)
    finally:
        conn.close()
    times = [at for _, at in connector.attempts if at < until]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # The row: MAX_REDIRECT_HOPS redirects followed at once (at most a new run's first
    # delay after the lost session); then the schedule goes on, doubling from 0.1 s up to
    # 10 s. Without the bound: one open every 0.1 s, 600 in the minute.
    assert len(times) <= MAX_REDIRECT_HOPS + 1 + 10
    assert max(gaps) == pytest.approx(10.0)
    assert max(gaps[:MAX_REDIRECT_HOPS]) <= 0.1 + 1e-9
