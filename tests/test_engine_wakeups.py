"""The reconnect loop never loses a wake-up: time that passes during a pass is not a lost deadline.

The loop once read the clock several times per pass (``home()``, then ``next_release()``): a
quarantine that ended between two reads made the first say "stay" and the second find nothing
to wait for, so the loop waited with no deadline and the client stayed off its home. Here the
clock moves to the end of the quarantine exactly between the loop's first and second read.
"""

from __future__ import annotations

import random
import threading

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import FailoverConnection, Rebalanced
from failover_client.engine._pool import BrokerState
from failover_client.engine._rebalance import Rebalancer
from failover_client.testing import ClockStalled, EventRecorder, FakeClock, FakeConnector

A, B = (BrokerAddress("stomp", name, 61613) for name in "ab")


class JumpingClock(FakeClock):
    """A FakeClock that, once armed, moves to ``target`` right after the armed thread's next
    reading of the time (outside the clock's own waits)."""

    def __init__(self) -> None:
        super().__init__()
        self._armed: tuple[threading.Thread, float] | None = None
        self._inside = threading.local()

    def arm(self, thread: threading.Thread, target: float) -> None:
        self._armed = (thread, target)

    def monotonic(self) -> float:
        now = super().monotonic()
        armed = self._armed
        mine = armed is not None and armed[0] is threading.current_thread()
        if armed is not None and mine and not getattr(self._inside, "waiting", False):
            self._armed = None
            self.advance(max(0.0, armed[1] - now))
        return now

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        self._inside.waiting = True
        try:
            return super().wait(event, timeout)
        finally:
            self._inside.waiting = False


def client_at_home_on(broker: BrokerAddress) -> str:
    for n in range(100):
        rebalancer = Rebalancer(f"client-{n}", 1.0, random.Random(0))
        if rebalancer.home([[BrokerState(address=b, seed=True) for b in (A, B)]]) == broker:
            return f"client-{n}"
    raise AssertionError("no client id makes A its home")


def test_a_quarantine_that_ends_during_a_pass_still_brings_the_client_home() -> None:
    clock = JumpingClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "refuse", "accept")  # A is down at first, then back for good
    events = EventRecorder()
    conn = FailoverConnection(
        (A, B),
        options=FailoverOptions(
            rebalance=True,
            initial_reconnect_delay=0,
            reconnect_delay=0,
            rebalance_drain_window=0.0,  # a client whose home is back moves at once
        ),
        connector=connector,
        clock=clock,
        client_id=client_at_home_on(A),
        rng=random.Random(1),
        listeners=[events],
    )
    try:
        conn.connect()
        assert conn.broker == str(B)  # A refused: quarantined, the client waits on B
        release = conn.pool.state(A.key).quarantined_until
        assert release is not None
        # The loop waits for A's release; wake it just before, and let the release pass
        # right after its first reading of the time.
        assert clock.wait_for_deadline(release)
        clock.advance(release - clock.monotonic() - 0.25)
        clock.arm(conn._loop.thread, release)
        conn._state.wake.set()
        moved = events.wait_for(Rebalanced)
        assert (moved.from_broker, moved.to_broker) == (str(B), str(A))
    finally:
        conn.close()


def test_a_connection_on_a_clock_nobody_moves_fails_fast_with_what_to_pass() -> None:
    clock = FakeClock(stall_timeout=0.1)  # no autojump, and the test never advances it
    connector = FakeConnector(clock=clock)
    connector.behave(A, "refuse", "accept")
    conn = FailoverConnection(
        (A,),
        options=FailoverOptions(initial_reconnect_delay=0, reconnect_delay=5.0),
        connector=connector,
        clock=clock,
    )
    try:
        # The loop waits 5 virtual seconds before its second attempt; connect() would wait
        # for it forever.
        with pytest.raises(ClockStalled, match=r"failover-client-loop-\d+ waits .*autojump=True"):
            conn.connect()
    finally:
        conn.close()
