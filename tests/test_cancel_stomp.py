"""A cancelled STOMP connect: every step ends at once with ConnectCancelled and cleans up.

Driven through the scripted transport of ``test_stomp_adapter_session`` (no sockets, no
sleeps). The token is cancelled from inside the script, at the step under test, so each case
is deterministic; the real cross-thread case runs in ``integration/test_failover_close.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_stomp_adapter_session import ADDRESS, CONNECTED, Harness, ScriptedTransport

from failover_client._errors import AuthenticationFailed, BrokerUnavailable, ConnectCancelled
from failover_client.adapter import Cancel
from failover_client.stomp import StompSession


class CancellableTransport(ScriptedTransport):
    """The scripted transport plus ``interrupt``; ``during_start`` runs inside ``start``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.interrupted = 0
        self.during_start: Any = None

    def interrupt(self) -> None:
        self.interrupted += 1

    def start(self) -> None:
        if self.during_start is not None:
            self.during_start()
        if self.interrupted:
            # What BoundTransport.attempt_connection raises once interrupt() woke it.
            raise ConnectionAbortedError("connect cancelled")
        super().start()


class CancelHarness(Harness):
    def __init__(self) -> None:
        super().__init__()
        self.token = Cancel()
        self.during_start: Any = None

    def _factory(self, *args: Any, **kwargs: Any) -> ScriptedTransport:
        transport = CancellableTransport(*args, **kwargs)
        transport.during_start = self.during_start
        if self.script is not None:
            transport.on_connect = self.script
        self.transports.append(transport)
        return transport

    def open(self, timeout: float = 30.0) -> StompSession:
        return self.connector.connect(
            ADDRESS, timeout=timeout, listener=self.listener, cancel=self.token
        )


def test_cancel_while_waiting_for_connected_ends_at_once_and_cleans_up() -> None:
    h = CancelHarness()
    h.script = lambda t: h.token.cancel()  # a hung broker; close() arrives meanwhile
    with pytest.raises(ConnectCancelled) as info:
        h.open(timeout=30.0)
    assert str(info.value) == "stomp://b1:61613: connect cancelled during the STOMP handshake"
    assert isinstance(info.value, BrokerUnavailable)
    assert h.clock.now == 0.0  # the 30 s were never waited
    t = h.transport
    assert t.connect_frame.cmd == "CONNECT"
    assert t.interrupted == 1
    assert (t.aborted, t.closed_unstarted) == (1, 1)
    assert h.listener.lost == []
    assert repr(h.token) == "Cancel(cancelled=True, callbacks=0)"


def test_cancel_during_the_tcp_connect_is_connect_cancelled_from_the_transport_error() -> None:
    h = CancelHarness()
    h.during_start = h.token.cancel
    with pytest.raises(ConnectCancelled) as info:
        h.open()
    assert str(info.value) == "stomp://b1:61613: connect cancelled during TCP connect"
    assert isinstance(info.value.__cause__, ConnectionAbortedError)
    t = h.transport
    assert t.interrupted == 1
    assert t.connect_frame is None  # CONNECT was never written
    assert t.closed_unstarted == 1


def test_a_token_cancelled_before_connect_opens_nothing() -> None:
    h = CancelHarness()
    h.token.cancel()
    with pytest.raises(ConnectCancelled, match="connect cancelled before it started"):
        h.open()
    assert h.transports == []


def test_an_error_from_the_broker_before_the_cancel_keeps_its_own_cause() -> None:
    def script(t: ScriptedTransport) -> None:
        t.play("error", {"message": "User name [app] or password is invalid."})
        h.token.cancel()

    h = CancelHarness()
    h.script = script
    with pytest.raises(AuthenticationFailed):
        h.open()


def test_cancel_after_the_handshake_leaves_the_session_alone() -> None:
    h = CancelHarness()
    h.script = lambda t: t.play("connected", CONNECTED)
    session = h.open()
    assert repr(h.token) == "Cancel(cancelled=False, callbacks=0)"  # callback removed
    h.token.cancel()
    assert session.is_open
    assert h.transport.interrupted == 0
    assert h.transport.aborted == 0
    session.close()


def test_a_token_never_cancelled_leaves_the_deadline_in_charge() -> None:
    h = CancelHarness()
    h.script = lambda t: None
    with pytest.raises(BrokerUnavailable, match=r"no CONNECTED frame within 1\.5 s") as info:
        h.open(timeout=1.5)
    assert not isinstance(info.value, ConnectCancelled)
    assert h.clock.now == 1.5
    assert repr(h.token) == "Cancel(cancelled=False, callbacks=0)"  # callback removed
