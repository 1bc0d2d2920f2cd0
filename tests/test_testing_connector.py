"""FakeConnector / FakeSession: scripted brokers for unit tests."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from failover_client.uri import BrokerAddress

from failover_client import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConnectCancelled,
    ProtocolViolation,
    SendRejected,
    TLSFailure,
)
from failover_client._events import Closed, Connected
from failover_client.adapter import AdvertisedBrokers, Cancel, Received, SubscriptionSpec
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

A = BrokerAddress("stomp", "a", 61613)


class Listener:
    """Records what a session reports, and in what order (``log``)."""

    def __init__(self) -> None:
        self.messages: list[Received] = []
        self.lost: list[BaseException] = []
        self.brokers: list[AdvertisedBrokers] = []
        self.log: list[str] = []

    def on_message(self, session, message):
        self.messages.append(message)

    def on_lost(self, session, cause):
        self.lost.append(cause)
        self.log.append("lost")

    def on_brokers(self, session, advertised):
        self.brokers.append(advertised)


def confirmations(listener: Listener, name: str, outcomes: list[BaseException | None]):
    """An on_confirm callback that logs ``name`` into the listener's order log."""

    def on_confirm(error: BaseException | None) -> None:
        outcomes.append(error)
        listener.log.append(name)

    return on_confirm


def test_accepts_by_default_and_records_attempts_with_clock_time():
    clock = FakeClock(3.0)
    connector = FakeConnector(clock=clock)
    session = connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
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
        connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())


def test_steps_are_consumed_in_order_and_the_last_repeats():
    connector = FakeConnector()
    connector.behave("a:61613", "refuse", "accept")
    with pytest.raises(BrokerUnavailable):
        connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
    connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
    connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
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
        connector.connect(A, timeout=2.0, listener=Listener(), cancel=Cancel())
    assert clock.monotonic() == 2.0


def test_released_hang_accepts():
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "hang")
    result = []
    thread = threading.Thread(
        target=lambda: result.append(
            connector.connect(A, timeout=2.0, listener=Listener(), cancel=Cancel())
        )
    )
    thread.start()
    assert clock.wait_for_waiters(1, timed=True)
    connector.release_hangs()
    thread.join(5)
    assert result[0].alive


def test_session_records_sends_and_confirms_on_command():
    connector = FakeConnector(auto_confirm=False)
    session = connector.connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
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
    session = FakeConnector().connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
    outcomes: list[BaseException | None] = []
    session.send("/q", b"1", {}, outcomes.append)
    assert outcomes == [None]
    assert session.sent[0].state == "confirmed"


def test_kill_reports_loss_once_and_later_calls_fail():
    listener = Listener()
    session = FakeConnector().connect(A, timeout=1.0, listener=listener, cancel=Cancel())
    session.kill()
    session.kill()
    assert len(listener.lost) == 1
    assert isinstance(listener.lost[0], BrokerUnavailable)
    with pytest.raises(BrokerUnavailable, match="closed"):
        session.send("/q", b"x", {}, None)
    assert repr(session) == "<FakeSession stomp://a:61613 dead sent=0>"


def test_deliver_needs_a_subscription_and_reaches_the_listener():
    listener = Listener()
    session = FakeConnector().connect(A, timeout=1.0, listener=listener, cancel=Cancel())
    with pytest.raises(KeyError, match="no subscription 's1'"):
        session.deliver("s1", b"x")
    session.subscribe(SubscriptionSpec("s1", "/queue/in"), None)
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
    session = FakeConnector().connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
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


def test_kill_fails_outstanding_confirmations_before_reporting_the_loss():
    listener = Listener()
    session = FakeConnector(auto_confirm=False).connect(
        A, timeout=1.0, listener=listener, cancel=Cancel()
    )
    outcomes: list[BaseException | None] = []
    session.send("/q", b"1", {"failover-message-id": "m1"}, confirmations(listener, "m1", outcomes))
    session.send("/q", b"2", {"failover-message-id": "m2"}, confirmations(listener, "m2", outcomes))
    session.confirm(1)
    session.kill()
    session.kill()
    assert listener.log == ["m1", "m2", "lost"]
    assert outcomes[0] is None
    assert isinstance(outcomes[1], BrokerUnavailable)
    assert "lost before the broker confirmed" in str(outcomes[1])
    assert [m.state for m in session.sent] == ["confirmed", "failed"]
    assert session.confirm() == 0


def test_kill_still_reports_the_loss_when_a_callback_raises_and_then_raises_it():
    listener = Listener()
    session = FakeConnector(auto_confirm=False).connect(
        A, timeout=1.0, listener=listener, cancel=Cancel()
    )
    outcomes: list[BaseException | None] = []

    def broken(error: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    session.send("/q", b"1", {}, broken)
    session.send("/q", b"2", {}, confirmations(listener, "m2", outcomes))
    with pytest.raises(RuntimeError, match="callback bug"):
        session.kill()
    assert listener.log == ["m2", "lost"]


def test_close_fails_outstanding_confirmations_without_a_loss_and_never_raises():
    listener = Listener()
    session = FakeConnector(auto_confirm=False).connect(
        A, timeout=1.0, listener=listener, cancel=Cancel()
    )
    outcomes: list[BaseException | None] = []

    def broken(error: BaseException | None) -> None:
        raise RuntimeError("callback bug")

    session.send("/q", b"1", {}, broken)
    session.send("/q", b"2", {}, confirmations(listener, "m2", outcomes))
    session.close()
    session.close()
    session.kill()
    assert listener.log == ["m2"]
    assert listener.lost == []
    assert isinstance(outcomes[0], BrokerUnavailable)
    assert "closed before the broker confirmed" in str(outcomes[0])
    assert repr(session) == "<FakeSession stomp://a:61613 closed sent=2>"


@pytest.mark.parametrize("end", ["kill", "close"])
def test_every_operation_after_the_end_raises_broker_unavailable(end):
    session = FakeConnector().connect(A, timeout=1.0, listener=Listener(), cancel=Cancel())
    session.subscribe(SubscriptionSpec("s1", "/queue/in"), None)
    received = session.deliver("s1", b"x")
    getattr(session, end)()
    calls = [
        lambda: session.send("/q", b"x", {}, None),
        lambda: session.subscribe(SubscriptionSpec("s2", "/queue/in"), None),
        lambda: session.unsubscribe("s1"),
        lambda: session.ack(received),
        lambda: session.nack(received),
        lambda: session.advertise([A]),
    ]
    for call in calls:
        with pytest.raises(BrokerUnavailable):
            call()


def test_advertise_reports_brokers_to_the_listener():
    listener = Listener()
    session = FakeConnector().connect(A, timeout=1.0, listener=listener, cancel=Cancel())
    b = BrokerAddress("amqp", "b", 5672)
    sent = session.advertise([b, A], source="amqp-open")
    redirect = session.advertise([b], redirect=True)
    assert listener.brokers == [
        AdvertisedBrokers((b, A), source="amqp-open"),
        AdvertisedBrokers((b,), source="fake", redirect=True),
    ]
    assert listener.brokers == [sent, redirect]


def test_a_cancelled_token_ends_the_connect_before_it_starts():
    connector = FakeConnector()
    token = Cancel()
    token.cancel()
    with pytest.raises(ConnectCancelled, match="before it started"):
        connector.connect(A, timeout=1.0, listener=Listener(), cancel=token)
    assert connector.cancelled == ["a:61613"]
    assert connector.sessions == []


def test_cancelling_a_hanging_connect_ends_it_without_time_passing():
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "hang")
    token = Cancel()
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            connector.connect(A, timeout=30.0, listener=Listener(), cancel=token)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=connect)
    thread.start()
    assert clock.wait_for_waiters(1, timed=True)
    token.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert [type(e) for e in errors] == [ConnectCancelled]
    assert clock.monotonic() == 0.0
    assert repr(token) == "Cancel(cancelled=True, callbacks=0)"


def test_importing_the_testing_package_does_not_import_pytest():
    code = (
        "import sys, failover_client.testing; "
        "print('pytest' in sys.modules, '_pytest' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]
