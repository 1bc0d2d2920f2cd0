"""A connection's lifetime: dropped unclosed (finalizer) and inherited by a forked child.

The real ``fork()`` runs against a real broker in ``integration/test_failover_fork.py``; here the
child is simulated by the pid the guard sees, which is all the guard looks at.
"""

from __future__ import annotations

import gc
import os
import threading
import warnings

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import ConfigurationError
from failover_client.engine import _lifetime
from failover_client.engine._connection import FailoverConnection
from failover_client.testing import FakeClock, FakeConnector
from failover_client.testing._clock import SAFETY_TIMEOUT

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)


def connected(connector: FakeConnector, clock: FakeClock) -> FailoverConnection:
    conn = FailoverConnection(
        (A, B), options=FailoverOptions(randomize=False), connector=connector, clock=clock
    )
    conn.connect()
    return conn


def threads_of(conn: FailoverConnection) -> list[threading.Thread]:
    return [t for t in (conn._loop.thread, conn._dispatcher.thread) if t is not None]


def join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(SAFETY_TIMEOUT)  # a safety net: each ends as soon as its connection closed
    assert not [t for t in threads if t.is_alive()]


# --- dropped without close() --------------------------------------------------------------------


def drop(count: int, connector: FakeConnector, clock: FakeClock) -> list[threading.Thread]:
    """Connect ``count`` connections, drop them unclosed, collect; their threads."""
    threads: list[threading.Thread] = []
    for _ in range(count):
        conn = connected(connector, clock)
        threads += threads_of(conn)
        del conn
    gc.collect()
    # The finalizer closes on a thread of its own (it may run on any thread; see _lifetime).
    join_all([t for t in threading.enumerate() if t.name.endswith("-finalize")])
    return threads


def test_dropped_connections_are_closed_by_their_finalizer_with_a_resource_warning() -> None:
    baseline = set(threading.enumerate())
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    with pytest.warns(ResourceWarning, match="unclosed FailoverConnection") as caught:
        threads = drop(10, connector, clock)
    assert len([w for w in caught if w.category is ResourceWarning]) == 10
    join_all(threads)
    assert connector.live_sessions() == []
    assert all(s.closed for s in connector.sessions)
    assert set(threading.enumerate()) <= baseline


def test_a_dropped_connection_that_is_reconnecting_stops_reconnecting() -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    held = [connected(connector, clock)]
    threads = threads_of(held[0])
    connector.behave(A, "refuse")
    connector.behave(B, "refuse")
    connector.session(A).kill()
    assert connector.wait_for_attempts(3)  # the loop is retrying both brokers
    with pytest.warns(ResourceWarning, match="unclosed FailoverConnection"):
        forget(held)
    join_all(threads)  # the reconnect loop ended: no attempt after this


def forget(held: list[FailoverConnection]) -> None:
    """Drop the only reference and collect."""
    held.clear()
    gc.collect()


def test_a_closed_or_never_connected_connection_goes_without_a_warning() -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    closed = connected(connector, clock)
    closed.close()
    idle = FailoverConnection((A,), connector=connector, clock=clock)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del closed, idle
        gc.collect()
    assert [w for w in caught if w.category is ResourceWarning] == []


# --- fork() ---------------------------------------------------------------------------------------


def test_every_call_in_a_forked_child_raises_and_close_touches_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conn = connected(connector, clock)
    parent = os.getpid()
    conn.send("/queue/q", b"before")
    session = connector.session(A)
    monkeypatch.setattr(_lifetime, "current_pid", lambda: parent + 1)
    calls = [
        lambda: conn.send("/queue/q", b"x"),
        lambda: conn.send("/queue/q", b"x", confirm=False),
        lambda: conn.send_async("/queue/q", b"x"),
        conn.flush,
        lambda: conn.subscribe("/queue/q", lambda m: None),
        conn.connect,
        conn.__enter__,
        conn.stats,
        lambda: conn.state,
        lambda: conn.broker,
        lambda: conn.add_listener(print),
        lambda: conn.remove_listener(print),
        lambda: conn.update_brokers([B], source="test"),
        lambda: conn.request_rebalance(source="test"),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError) as caught:
            call()
        assert f"this connection was made in process {parent}" in str(caught.value)
        assert "after fork()" in str(caught.value)
    conn.close()  # cleanup code in a child must not end the parent's session
    monkeypatch.undo()
    # Back in the parent: its session is untouched and still works.
    assert not session.closed
    assert [m.body for m in session.sent] == [b"before"]
    assert "made in process" not in repr(conn)
    conn.send("/queue/q", b"after")
    assert [m.body for m in session.sent] == [b"before", b"after"]
    conn.close()
    assert session.closed


def test_repr_in_a_forked_child_takes_no_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(autojump=True)
    conn = connected(FakeConnector(clock=clock), clock)
    parent = os.getpid()
    with conn._state.cond:  # held by a thread that a child would not have
        monkeypatch.setattr(_lifetime, "current_pid", lambda: parent + 1)
        assert repr(conn) == f"<FailoverConnection made in process {parent}, unusable here>"
        monkeypatch.undo()
    conn.close()


def test_the_finalizer_in_a_forked_child_closes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conn = connected(connector, clock)
    parts, guard = conn._parts, conn._guard
    monkeypatch.setattr(_lifetime, "current_pid", lambda: guard.pid + 1)
    _lifetime.finalize_dropped(parts, guard, "test")
    monkeypatch.undo()
    assert connector.live_sessions() == [connector.session(A)]
    conn.close()


def test_a_message_or_subscription_kept_across_fork_cannot_ack_or_unsubscribe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conn = connected(connector, clock)
    got: list[object] = []
    arrived = threading.Event()

    def handler(message: object) -> None:
        got.append(message)
        arrived.set()

    subscription = conn.subscribe("/queue/q", handler, ack="client-individual")
    session = connector.session(A)
    session.confirm_subscriptions()
    session.deliver(subscription.id, b"kept")
    assert arrived.wait(SAFETY_TIMEOUT)
    message = got[0]
    parent = os.getpid()
    monkeypatch.setattr(_lifetime, "current_pid", lambda: parent + 1)
    for call in (message.ack, message.nack, subscription.unsubscribe):  # type: ignore[attr-defined]
        with pytest.raises(ConfigurationError, match=f"made in process {parent}"):
            call()
    monkeypatch.undo()
    assert session.acks == []
    assert session.nacks == []
    assert session.unsubscribed == []
    message.ack()  # type: ignore[attr-defined]
    assert len(session.acks) == 1
    conn.close()


def test_the_process_id_the_guard_reads_follows_a_real_fork() -> None:
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports what the guard would read there, and ends at once
        os.write(write_end, str(_lifetime.current_pid()).encode())
        os._exit(0)
    os.close(write_end)
    try:
        seen = int(os.read(read_end, 64))
    finally:
        os.close(read_end)
        os.waitpid(child, 0)
    assert seen == child
    assert _lifetime.current_pid() == os.getpid() != child
