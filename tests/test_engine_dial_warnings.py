"""The reconnect warning names the cause, and a dead group does not flood the log with it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import AllBrokersFailed, BrokerUnavailable, FailoverConnection
from failover_client._events import ReconnectWarning
from failover_client.adapter import Cancel, SessionListener
from failover_client.engine._dial import describe
from failover_client.testing import EventRecorder, FakeClock, FakeConnector, FakeSession

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)


def refused() -> BrokerUnavailable:
    """As an adapter raises it: ``raise BrokerUnavailable(...) from`` the socket's error."""
    error = BrokerUnavailable("cannot connect", broker=str(A))
    error.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return error


class ResolvingConnector(FakeConnector):
    """``a`` cannot be reached (refused, from the socket's error); ``b``'s name does not
    resolve."""

    def connect(
        self, address: BrokerAddress, *, timeout: float, listener: SessionListener, cancel: Cancel
    ) -> FakeSession:
        with self._lock:
            self.attempts.append((address.key, self._clock.monotonic()))
        if address == A:
            raise refused()
        raise BrokerUnavailable("cannot resolve host b", broker=str(address))


def test_the_line_names_the_error_and_its_causes() -> None:
    assert describe(str(A), refused()) == (
        "stomp://a:61613: cannot connect (BrokerUnavailable), caused by "
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )
    # A message without the broker gets it; one already naming it keeps it once.
    assert describe("stomp://b:61613", TimeoutError("handshake timed out")) == (
        "stomp://b:61613: handshake timed out (TimeoutError)"
    )


def test_repeated_reconnect_warnings_are_rate_limited_and_name_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(autojump=True)
    events = EventRecorder()
    options: dict[str, Any] = {
        "randomize": False,
        "initial_reconnect_delay": 0.1,
        "reconnect_delay": 0.1,
        "use_exponential_backoff": False,
        "warn_after_reconnect_attempts": 1,
        "startup_max_reconnect_attempts": 50,
    }
    conn = FailoverConnection(
        (A, B),
        options=FailoverOptions(**options),
        connector=ResolvingConnector(clock=clock),
        clock=clock,
        listeners=[events],
    )
    caplog.set_level(logging.WARNING, logger="failover_client")
    try:
        with pytest.raises(AllBrokersFailed):
            conn.connect()
    finally:
        conn.close()
    lines = [m for r in caplog.records if (m := r.getMessage()).startswith("reconnect attempt")]
    # 50 failed attempts in 5 virtual seconds: one line in the throttle's window, and every
    # attempt still an event (events are the record; the log is a view of them).
    assert len(lines) == 1
    assert lines[0] == (
        "reconnect attempt 1 failed: stomp://a:61613: cannot connect (BrokerUnavailable), "
        "caused by ConnectionRefusedError: [Errno 111] Connection refused; "
        "stomp://b:61613: cannot resolve host b (BrokerUnavailable)"
    )
    assert len(events.of_type(ReconnectWarning)) == 50


def test_a_pass_over_hundreds_of_brokers_costs_lines_of_bounded_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A pool of pushed brokers (up to topology.maxBrokers) that all fail: the warning and the
    # final error name a few of them and count the rest; the event and the error's causes
    # still carry every one.
    clock = FakeClock(autojump=True)
    events = EventRecorder()
    brokers = [BrokerAddress("stomp", f"b{i}", 61613) for i in range(300)]
    conn = FailoverConnection(
        brokers,
        options=FailoverOptions(
            randomize=False, warn_after_reconnect_attempts=1, startup_max_reconnect_attempts=2
        ),
        connector=ResolvingConnector(clock=clock),
        clock=clock,
        listeners=[events],
    )
    caplog.set_level(logging.WARNING, logger="failover_client")
    try:
        with pytest.raises(AllBrokersFailed) as failed:
            conn.connect()
    finally:
        conn.close()
    lines = [m for r in caplog.records if (m := r.getMessage()).startswith("reconnect attempt")]
    assert lines
    assert all(len(line) < 2_000 for line in lines)
    assert lines[0].endswith("and 292 more")
    assert len(failed.value.causes) == 300
    assert len(str(failed.value)) < 2_000
    assert str(failed.value).endswith("and 292 more")
    assert len(events.of_type(ReconnectWarning)[0].causes) == 300


class _Silent:
    """A topology source that names no broker (a discovery group nobody announces on)."""

    name = "silent"

    def start(self, sink: object) -> None:
        return None

    def stop(self) -> None:
        return None


def test_an_empty_pool_says_no_broker_is_known_yet(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(autojump=True)
    options = FailoverOptions(
        warn_after_reconnect_attempts=1, startup_max_reconnect_attempts=2, update_uris_url="x"
    )
    conn = FailoverConnection(
        (),
        options=options,
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology=[_Silent()],
        topology_factory=lambda *a, **k: [],
    )
    caplog.set_level(logging.WARNING, logger="failover_client")
    try:
        with pytest.raises(AllBrokersFailed):
            conn.connect()
    finally:
        conn.close()
    lines = [m for r in caplog.records if (m := r.getMessage()).startswith("reconnect attempt")]
    assert lines
    assert lines[0] == (
        "reconnect attempt 1 failed: no broker known yet (waiting for a topology source to name "
        "one)"
    )
