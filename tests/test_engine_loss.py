"""Losing or closing a session while sends await confirmation, through the public API.

The fake fails every outstanding confirmation with BrokerUnavailable before it reports the loss,
as the real adapters do, so these tests drive the engine's loss-while-sending paths: replay on
the next broker with the same message ids, exactly one outcome per caller, ConnectionClosed on
close, and verdicts from a session the message already left ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import (
    BrokerUnavailable,
    ConnectionClosed,
    FailedOver,
    FailoverConnection,
    SendRejected,
)
from failover_client.testing import EventRecorder, FakeClock, FakeConnector, FakeSession

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
SAFETY = 5.0  # real seconds, only against a hung test


@dataclass
class Rig:
    conn: FailoverConnection
    connector: FakeConnector
    events: EventRecorder


@contextmanager
def connected() -> Iterator[Rig]:
    """A connection on broker a (b is next), with confirmations left to the test."""
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock, auto_confirm=False)
    events = EventRecorder()
    conn = FailoverConnection(
        (A, B),
        options=FailoverOptions(randomize=False),
        connector=connector,
        clock=clock,
        client_id="c",
        listeners=[events],
    )
    conn.connect()
    try:
        yield Rig(conn, connector, events)
    finally:
        conn.close()


class Outcomes:
    """Counts how often each future completes (a second completion would be a bug)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[int, int] = {}

    def watch(self, futures: list[Future[None]]) -> None:
        for number, future in enumerate(futures):
            future.add_done_callback(lambda _, n=number: self._done(n))

    def _done(self, number: int) -> None:
        with self.lock:
            self.calls[number] = self.calls.get(number, 0) + 1


def fail_over(rig: Rig, *, replayed: int) -> FakeSession:
    """Kill a's session and return b's once ``replayed`` messages were re-sent to it."""
    rig.connector.behave(A, "refuse")
    rig.connector.session(A).kill()
    assert rig.connector.wait_until(
        lambda: any(s.address == B and len(s.sent) >= replayed for s in rig.connector.sessions),
        SAFETY,
    )
    return rig.connector.session(B)


def test_sends_outstanding_at_a_loss_are_replayed_with_their_ids_and_complete_once():
    with connected() as rig:
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(3)]
        outcomes = Outcomes()
        outcomes.watch(futures)
        session_a = rig.connector.session(A)
        ids = session_a.message_ids()
        assert len(set(ids)) == 3

        session_b = fail_over(rig, replayed=3)

        # The loss failed a's confirmations; the engine kept the messages for b instead of
        # handing that failure to the callers.
        assert [m.state for m in session_a.sent] == ["failed"] * 3
        assert not any(f.done() for f in futures)
        assert session_b.message_ids() == ids
        assert [m.body for m in session_b.sent] == [b"m0", b"m1", b"m2"]
        assert session_b.confirm() == 3
        assert [f.result(SAFETY) for f in futures] == [None] * 3
        assert outcomes.calls == {0: 1, 1: 1, 2: 1}
        assert rig.events.wait_for(FailedOver).to_broker == "stomp://b:61613"
        stats = rig.conn.stats()
        assert (stats["confirmed"], stats["replayed"], stats["in_flight"]) == (3, 3, 0)


def test_a_blocked_send_returns_once_the_replay_is_confirmed_and_a_rejection_reaches_it():
    with connected() as rig:
        errors: list[BaseException] = []
        done = threading.Event()

        def send() -> None:
            try:
                rig.conn.send("/queue/q", b"x")
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        sender = threading.Thread(target=send)
        sender.start()
        assert rig.connector.wait_until(lambda: len(rig.connector.session(A).sent) == 1, SAFETY)
        session_b = fail_over(rig, replayed=1)
        assert not done.is_set()
        session_b.reject(1, "quota exceeded")
        sender.join(SAFETY)
        assert not sender.is_alive()
        assert [type(e) for e in errors] == [SendRejected]
        assert "quota exceeded" in str(errors[0])


def test_close_with_sends_outstanding_fails_them_with_connection_closed():
    with connected() as rig:
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(2)]
        outcomes = Outcomes()
        outcomes.watch(futures)
        session_a = rig.connector.session(A)
        rig.conn.close()
        for future in futures:
            with pytest.raises(ConnectionClosed):
                future.result(SAFETY)
        assert outcomes.calls == {0: 1, 1: 1}
        assert session_a.closed
        assert [m.state for m in session_a.sent] == ["failed", "failed"]
        assert len(rig.connector.sessions) == 1  # nothing was replayed anywhere
        with pytest.raises(ConnectionClosed):
            rig.conn.send_async("/queue/q", b"late")


@pytest.mark.parametrize(
    "verdict",
    [
        SendRejected("rejected too late", message_id="x"),
        BrokerUnavailable("lost too late", broker="stomp://a:61613"),
    ],
    ids=["rejected", "lost"],
)
def test_a_verdict_from_the_session_the_message_left_is_ignored(verdict):
    with connected() as rig:
        future = rig.conn.send_async("/queue/q", b"x")
        outcomes = Outcomes()
        outcomes.watch([future])
        (left,) = rig.connector.session(A).sent
        session_b = fail_over(rig, replayed=1)
        assert left.on_confirm is not None
        left.on_confirm(verdict)  # a's verdict arrives after the message moved to b
        assert not future.done()
        session_b.confirm()
        assert future.result(SAFETY) is None
        assert outcomes.calls == {0: 1}
        assert rig.conn.stats()["rejected"] == 0
