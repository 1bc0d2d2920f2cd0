"""FakeConnector / FakeSession: scripted brokers for unit tests."""

from __future__ import annotations

import threading

import pytest
from failover_client.uri import BrokerAddress

from failover_client import (
    AuthenticationFailed,
    BrokerUnavailable,
    ProtocolViolation,
    SendRejected,
    TLSFailure,
)
from failover_client._events import Closed, Connected
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

A = BrokerAddress("stomp", "a", 61613)


class Listener:
    def __init__(self) -> None:
        self.messages: list[Received] = []
        self.lost: list[BaseException] = []

    def on_message(self, session, message):
        self.messages.append(message)

    def on_lost(self, session, cause):
        self.lost.append(cause)


def test_accepts_by_default_and_records_attempts_with_clock_time():
    clock = FakeClock(3.0)
    connector = FakeConnector(clock=clock)
    session = connector.connect(A, timeout=1.0, listener=Listener())
    assert session.address == A
    assert connector.attempts == [("a:61613", 3.0)]
    assert connector.session("a:61613") is session
    assert connector.live_sessions() == [session]


@pytest.mark.parametrize(
    ("behaviour", "error"),
    [
        ("refuse", BrokerUnavailable),
        ("auth-fail", AuthenticationFailed),
        ("tls-fail", TLSFailure),
        ("protocol-error", ProtocolViolation),
    ],
)
def test_failing_behaviours_raise_mapped_errors_naming_the_broker(behaviour, error):
    connector = FakeConnector()
    connector.behave(A, behaviour)
    with pytest.raises(error, match=r"stomp://a:61613"):
        connector.connect(A, timeout=1.0, listener=Listener())


def test_steps_are_consumed_in_order_and_the_last_repeats():
    connector = FakeConnector()
    connector.behave("a:61613", "refuse", "accept")
    with pytest.raises(BrokerUnavailable):
        connector.connect(A, timeout=1.0, listener=Listener())
    connector.connect(A, timeout=1.0, listener=Listener())
    connector.connect(A, timeout=1.0, listener=Listener())
    assert connector.attempted() == ["a:61613"] * 3


def test_unknown_behaviour_and_empty_script_are_refused():
    connector = FakeConnector()
    with pytest.raises(ValueError, match="unknown behaviour 'sulk'"):
        connector.behave(A, "sulk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        connector.behave(A)


def test_hang_lasts_the_connect_timeout_in_virtual_time():
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    connector.behave(A, "hang")
    with pytest.raises(BrokerUnavailable, match="did not finish within 2s"):
        connector.connect(A, timeout=2.0, listener=Listener())
    assert clock.monotonic() == 2.0


def test_released_hang_accepts():
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "hang")
    result = []
    thread = threading.Thread(
        target=lambda: result.append(connector.connect(A, timeout=2.0, listener=Listener()))
    )
    thread.start()
    assert clock.wait_for_waiters(1, timed=True)
    connector.release_hangs()
    thread.join(5)
    assert result[0].alive


def test_session_records_sends_and_confirms_on_command():
    connector = FakeConnector(auto_confirm=False)
    session = connector.connect(A, timeout=1.0, listener=Listener())
    outcomes: list[BaseException | None] = []
    session.send("/q", b"1", {"failover-message-id": "m1"}, outcomes.append)
    session.send("/q", b"2", {"failover-message-id": "m2"}, outcomes.append)
    session.send("/q", b"3", {}, None)
    assert [m.state for m in session.sent] == ["unconfirmed", "unconfirmed", "untracked"]
    assert session.message_ids() == ["m1", "m2", None]
    assert session.confirm(1) == 1
    assert session.reject(1, "quota") == 1
    assert outcomes[0] is None
    assert isinstance(outcomes[1], SendRejected)
    assert outcomes[1].message_id == "m2"
    assert session.unconfirmed() == []


def test_auto_confirm_confirms_inside_send():
    session = FakeConnector().connect(A, timeout=1.0, listener=Listener())
    outcomes: list[BaseException | None] = []
    session.send("/q", b"1", {}, outcomes.append)
    assert outcomes == [None]
    assert session.sent[0].state == "confirmed"


def test_kill_reports_loss_once_and_later_calls_fail():
    listener = Listener()
    session = FakeConnector().connect(A, timeout=1.0, listener=listener)
    session.kill()
    session.kill()
    assert len(listener.lost) == 1
    assert isinstance(listener.lost[0], BrokerUnavailable)
    with pytest.raises(BrokerUnavailable, match="closed"):
        session.send("/q", b"x", {}, None)
    assert repr(session) == "<FakeSession stomp://a:61613 dead sent=0>"


def test_deliver_needs_a_subscription_and_reaches_the_listener():
    listener = Listener()
    session = FakeConnector().connect(A, timeout=1.0, listener=listener)
    with pytest.raises(KeyError, match="no subscription 's1'"):
        session.deliver("s1", b"x")
    session.subscribe(SubscriptionSpec("s1", "/queue/in"))
    received = session.deliver("s1", b"x", message_id="ID:1", redelivered=True)
    assert listener.messages == [received]
    assert (received.destination, received.ack_id, received.redelivered) == (
        "/queue/in",
        "a:61613/1",
        True,
    )
    session.ack(received)
    session.nack(received)
    session.unsubscribe("s1")
    assert (session.acks, session.nacks, session.unsubscribed) == ([received], [received], ["s1"])


def test_close_is_idempotent_and_marks_closed():
    session = FakeConnector().connect(A, timeout=1.0, listener=Listener())
    session.close()
    session.close()
    assert session.closed
    assert not session.alive


def test_event_recorder_waits_and_filters():
    recorder = EventRecorder()
    recorder(Closed())
    recorder(Connected("b", 1, 0.0))
    assert recorder.of_type(Connected) == [Connected("b", 1, 0.0)]
    assert recorder.wait_for(Closed) == Closed()
    with pytest.raises(AssertionError, match="no Connected #2"):
        recorder.wait_for(Connected, 2, timeout=0.01)
