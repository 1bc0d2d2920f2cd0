"""The pull API: ``receive(timeout)`` and iteration, on the same bounded buffer as handlers."""

from __future__ import annotations

import queue
import threading

import pytest
from test_manager_support import A, in_thread, make, running

from failover_client import ConfigurationError
from failover_client._events import MessagesReleased


def test_receive_returns_none_on_timeout_and_messages_in_order() -> None:
    rig = make((A,))
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", id="p1", ack="client")
        start = rig.clock.monotonic()
        assert subscription.receive(timeout=2) is None
        assert rig.clock.monotonic() == start + 2  # waited its timeout, on the clock
        session = rig.connector.session(A)
        session.deliver("p1", b"one")
        session.deliver("p1", b"two")
        first, second = subscription.receive(0), subscription.receive(0)
        assert first is not None
        assert second is not None
        assert (first.body, second.body) == (b"one", b"two")
        assert session.acks == []  # client mode: the application acknowledges
        second.ack()  # cumulative on the wire: settles both
        assert subscription.in_flight == 0
        assert first.settled


def test_auto_pull_acknowledges_a_message_when_the_next_is_asked() -> None:
    rig = make((A,))
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", id="p1", prefetch=2)
        session = rig.connector.session(A)
        for number in range(5):
            session.deliver("p1", b"%d" % number)
        assert session.unsettled("p1") == 2
        assert session.waiting("p1") == 3
        got = []
        for _ in range(4):
            message = subscription.receive(5)
            assert message is not None
            got.append(message.body)
            # Everything before the one in hand is acknowledged; that one is not yet.
            assert [m.body for m in session.acks] == got[:-1]
            assert session.unsettled("p1") <= 2
        last = subscription.receive(5)
        assert last is not None
        last.ack()  # acknowledged at once; the next receive does not ack it again
        assert subscription.receive(0) is None
        assert [m.body for m in session.acks] == [b"%d" % n for n in range(5)]
        assert subscription.handled == 5


def test_iteration_ends_when_unsubscribed_and_the_message_in_hand_is_released() -> None:
    rig = make((A,))
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", id="p1")
        session = rig.connector.session(A)
        for number in range(4):
            session.deliver("p1", b"%d" % number)
        seen = []
        for message in subscription:
            seen.append(message.body)
            if len(seen) == 2:
                subscription.unsubscribe()
        assert seen == [b"0", b"1"]
        assert [m.body for m in session.acks] == [b"0"]
        # The one in hand and the two never taken go back to the broker, unacknowledged.
        assert sorted(m.body for m in session.releases) == [b"1", b"2", b"3"]
        assert session.unsubscribed == ["p1"]
        event = rig.events.wait_for(MessagesReleased, count=2)
        assert event.reason == "unsubscribe"
        assert sum(e.count for e in rig.events.of_type(MessagesReleased)) == 3


def test_iteration_ends_when_the_connection_closes() -> None:
    rig = make((A,))
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", id="p1")
        got: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        gate = threading.Event()

        def consume() -> str:
            for message in subscription:
                got.put(message.body)
                gate.wait(5)  # still busy with it when the connection closes
            return "ended"

        consuming = in_thread(rig, consume)
        rig.connector.session(A).deliver("p1", b"x")
        assert got.get(timeout=5) == b"x"
        rig.conn.close()
        gate.set()
        assert consuming.done.wait(5)
        assert consuming.value == "ended"
        session = rig.connector.session(A)
        assert [m.body for m in session.releases] == [b"x"]  # in hand at close: released
        assert session.acks == []


def test_receive_is_for_pull_subscriptions_and_checks_its_timeout() -> None:
    rig = make((A,))
    with running(rig):
        pushed = rig.conn.subscribe("/queue/in", print, id="s1")
        with pytest.raises(ConfigurationError, match="has a handler"):
            pushed.receive(1)
        pulled = rig.conn.subscribe("/queue/in", id="p1")
        with pytest.raises(ConfigurationError, match="timeout"):
            pulled.receive(-1)


def test_iteration_ends_when_a_broker_refuses_the_subscription() -> None:
    rig = make((A,), auto_confirm=False)
    with running(rig):
        subscription = rig.conn.subscribe("/queue/bad", id="p1")
        iterating = in_thread(rig, lambda: list(subscription))
        rig.connector.session(A).refuse_subscription("p1", "no such queue")
        assert iterating.done.wait(5)
        assert iterating.value == []
        assert subscription.error is not None
