"""``close()`` cancels a connect under way instead of waiting for its timeout (fake clock)."""

from __future__ import annotations

import threading

import pytest
from failover_client.uri import BrokerAddress
from test_manager_support import A, B, in_thread, make, running

from failover_client import ConnectionClosed
from failover_client._errors import BrokerUnavailable, ConnectCancelled
from failover_client._events import Connected, StandbyConnected
from failover_client.adapter import Cancel, SessionListener
from failover_client.engine._dial import Interrupted
from failover_client.testing import FakeClock, FakeConnector, FakeSession


def _advance_to_the_reconnect_delay(clock: FakeClock) -> float:
    """Let the reconnect loop's back-off pass; returns the clock time afterwards."""
    assert clock.wait_for_waiters(1, timed=True)
    due = clock.deadlines()[0]
    clock.advance(due - clock.monotonic())
    return clock.monotonic()


class _Listener:
    def on_message(self, session: object, message: object) -> None:
        """Unused."""

    def on_lost(self, session: object, cause: BaseException) -> None:
        """Unused."""


# --- FailoverConnection.close() ----------------------------------------------------------------


@pytest.mark.parametrize(("behaviour", "waiters"), [("block", []), ("hang", [30.0])])
def test_close_during_a_blocked_startup_connect_returns_without_the_clock_moving(
    behaviour: str, waiters: list[float]
) -> None:
    rig = make((A,), autojump=False, connect_timeout=30.0)
    rig.connector.behave(A, behaviour)  # type: ignore[arg-type]
    with running(rig, connect=False):
        connecting = in_thread(rig, rig.conn.connect)
        assert rig.connector.wait_for_attempts(1)
        # connect() waits for the first outcome; the handshake waits for a release or cancel.
        assert rig.clock.wait_for_waiters(2)
        assert rig.clock.deadlines() == waiters
        closing = in_thread(rig, rig.conn.close)
        assert closing.done.wait(5)
        assert closing.error is None
        assert connecting.done.wait(5)
        assert isinstance(connecting.error, ConnectionClosed)
        assert not rig.conn._loop.thread.is_alive()
        assert rig.clock.monotonic() == 0.0
        assert rig.connector.cancelled == ["a:61613"]
        assert rig.connector.attempted() == ["a:61613"]
        assert rig.connector.sessions == []
        # A cancelled connect says nothing about the broker: it is not counted as a failure.
        state = rig.conn.pool.state("a:61613")
        assert (state.failures, state.last_error) == (0, None)
        assert rig.conn.state == "closed"


def test_close_during_a_blocked_failover_connect_returns_at_once() -> None:
    rig = make((A, B), autojump=False, connect_timeout=30.0)
    rig.connector.behave(B, "block")
    with running(rig):
        assert rig.conn.broker == "stomp://a:61613"
        rig.connector.session(A).kill()
        now = rig.clock.monotonic()  # b is another broker: tried at once, without a back-off
        # a failed last, so the plan tries b first, and b blocks.
        assert rig.connector.wait_for_attempts(2)
        assert rig.connector.attempted() == ["a:61613", "b:61613"]
        rig.conn.close()
        assert not rig.conn._loop.thread.is_alive()
        assert rig.connector.cancelled == ["b:61613"]
        assert rig.clock.monotonic() == now


def test_close_during_a_blocked_standby_connect_returns_at_once() -> None:
    rig = make((A, B), autojump=False, backup=True)
    rig.connector.behave(B, "block")
    with running(rig):
        assert rig.connector.wait_until(lambda: rig.connector.attempted() == ["a:61613", "b:61613"])
        assert rig.clock.wait_for_waiters(1)
        rig.conn.close()
        assert not rig.conn._loop.thread.is_alive()
        assert rig.connector.cancelled == ["b:61613"]
        assert rig.events.of_type(StandbyConnected) == []
        assert rig.clock.monotonic() == 0.0


def test_a_connect_with_a_token_that_is_not_cancelled_is_unaffected() -> None:
    rig = make((A,), autojump=False)
    rig.connector.behave(A, "hang")
    with running(rig, connect=False):
        connecting = in_thread(rig, rig.conn.connect)
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.connector.release_hangs()
        assert connecting.done.wait(5)
        assert connecting.error is None
        assert rig.events.wait_for(Connected).broker == "stomp://a:61613"
        assert rig.connector.cancelled == []


# --- Dialer ---------------------------------------------------------------------------------


def test_a_handshake_that_wins_the_race_with_close_is_closed_and_not_used() -> None:
    rig = make((A,))
    dialer = rig.conn._dialer
    original = rig.connector.connect

    def racing(
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel,
    ) -> FakeSession:
        session = original(address, timeout=timeout, listener=listener, cancel=cancel)
        dialer.cancel()  # close() lands right after CONNECTED
        return session

    rig.connector.connect = racing  # type: ignore[method-assign]
    with pytest.raises(Interrupted):
        dialer.open(A)
    assert rig.connector.session(A).closed
    state = rig.conn.pool.state("a:61613")
    assert (state.failures, state.last_error) == (0, None)


def test_after_cancel_every_later_connect_is_cancelled_before_it_starts() -> None:
    rig = make((A, B))
    dialer = rig.conn._dialer
    dialer.cancel()
    dialer.cancel()  # idempotent
    with pytest.raises(Interrupted):
        dialer.open(A)
    with pytest.raises(Interrupted):
        dialer.open(B)
    assert rig.connector.cancelled == ["a:61613", "b:61613"]
    assert rig.connector.sessions == []


def test_a_real_failure_is_still_recorded_when_nothing_was_cancelled() -> None:
    rig = make((A,))
    rig.connector.behave(A, "refuse")
    with pytest.raises(BrokerUnavailable):
        rig.conn._dialer.open(A)
    state = rig.conn.pool.state("a:61613")
    assert (state.failures, state.last_error) == (
        1,
        "BrokerUnavailable: stomp://a:61613: connection refused",
    )


# --- FakeConnector --------------------------------------------------------------------------


def test_fake_connect_with_a_cancelled_token_raises_connect_cancelled() -> None:
    connector = FakeConnector()
    token = Cancel()
    token.cancel()
    with pytest.raises(ConnectCancelled) as info:
        connector.connect(A, timeout=2.0, listener=_Listener(), cancel=token)
    assert str(info.value) == "stomp://a:61613: connect cancelled before it started"
    assert isinstance(info.value, BrokerUnavailable)
    assert connector.cancelled == ["a:61613"]
    assert connector.attempted() == ["a:61613"]


@pytest.mark.parametrize("behaviour", ["hang", "block"])
def test_fake_hang_and_block_end_when_their_token_is_cancelled(behaviour: str) -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, behaviour)  # type: ignore[arg-type]
    token = Cancel()
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            connector.connect(A, timeout=2.0, listener=_Listener(), cancel=token)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=connect)
    thread.start()
    assert clock.wait_for_waiters(1)
    token.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert [str(e) for e in errors] == ["stomp://a:61613: connect cancelled during the handshake"]
    assert isinstance(errors[0], ConnectCancelled)
    assert clock.monotonic() == 0.0
    assert repr(token) == "Cancel(cancelled=True, callbacks=0)"


def test_fake_block_ignores_the_connect_timeout_until_released() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "block")
    token = Cancel()
    sessions: list[FakeSession] = []
    thread = threading.Thread(
        target=lambda: sessions.append(
            connector.connect(A, timeout=2.0, listener=_Listener(), cancel=token)
        )
    )
    thread.start()
    assert clock.wait_for_waiters(1)
    assert clock.deadlines() == []  # no timeout at all
    clock.advance(60.0)
    assert clock.waiters() == 1
    connector.release_hangs()
    thread.join(5)
    assert sessions[0].alive
    assert repr(token) == "Cancel(cancelled=False, callbacks=0)"  # its callback was removed
