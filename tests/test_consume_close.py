"""Stopping consumption: ``close()`` bounded, ``close(drain=...)`` and ``drain()``.

Nothing acknowledged unhandled, nothing lost: what is not handled by the deadline goes back to
the broker (released, or returned when its session ends), and the acknowledgements are held
while handlers drain, so the broker's window stays full and it sends nothing new meanwhile.
"""

from __future__ import annotations

import logging
import threading

import pytest
from test_manager_support import A, B, in_thread, make, running

from failover_client import ConfigurationError
from failover_client._events import FailedOver, MessagesReleased, SubscriptionFailed
from failover_client.engine._subscriptions import Message


def _worker(name: str) -> threading.Thread:
    return next(t for t in threading.enumerate() if t.name.endswith(f"-handler-{name}"))


def test_close_returns_after_a_second_while_a_handler_never_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = make((A,))
    started, gate = threading.Event(), threading.Event()

    def stuck(message: Message) -> None:
        started.set()
        gate.wait(30)  # "never" returns: the test opens it after close() returned

    with running(rig):
        rig.conn.subscribe("/queue/in", stuck, id="s1")
        session = rig.connector.session(A)
        for number in range(3):
            session.deliver("s1", b"%d" % number)
        assert started.wait(5)
        worker = _worker("s1")
        start = rig.clock.monotonic()
        with caplog.at_level(logging.WARNING, logger="failover_client"):
            closing = in_thread(rig, rig.conn.close)
            # The handler runs on the clock's time: close() waits 1 s of it, then goes on.
            assert rig.clock.wait_for_deadline(start + 1.0)
            assert not closing.done.is_set()
            rig.clock.advance(1.0)
            assert closing.done.wait(5)
        assert closing.error is None
        assert rig.conn.state == "closed"
        assert session.closed
        assert "handler of subscription s1" in caplog.text
        # The two never taken went back; the running one is neither acked nor released.
        assert sorted(m.body for m in session.releases) == [b"1", b"2"]
        assert session.acks == []
        assert session.nacks == []
        released = rig.events.wait_for(MessagesReleased)
        assert released == MessagesReleased("s1", "stomp://a:61613", 2, "close")
        gate.set()
        worker.join(5)
        assert not worker.is_alive()
        assert session.acks == []  # its late ack is dropped: the session is closed


def test_close_with_drain_handles_the_buffer_with_acks_held_then_writes_them() -> None:
    rig = make((A,))
    gate = threading.Event()
    acks_seen: list[int] = []

    def handler(message: Message) -> None:
        gate.wait(5)
        acks_seen.append(len(rig.connector.session(A).acks))

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        session = rig.connector.session(A)
        for number in range(5):
            session.deliver("s1", b"%d" % number)
        start = rig.clock.monotonic()
        closing = in_thread(rig, lambda: rig.conn.close(drain=10))
        assert rig.clock.wait_for_deadline(start + 10)
        gate.set()
        assert closing.done.wait(5)
        assert acks_seen == [0, 0, 0, 0, 0]  # none written while draining
        # Then one cumulative acknowledgement (``client`` mode) for the five.
        assert [m.body for m in session.acks] == [b"4"]
        assert session.releases == []
        assert rig.events.of_type(MessagesReleased) == []


def test_close_with_drain_stops_at_its_deadline_and_hands_back_the_rest() -> None:
    rig = make((A,), autojump=False)
    handled: list[bytes] = []

    def handler(message: Message) -> None:
        rig.clock.sleep(1.0)  # a handler taking one second of the clock's time
        handled.append(message.body)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=10)
        session = rig.connector.session(A)
        start = rig.clock.monotonic()
        for number in range(10):
            session.deliver("s1", b"%d" % number)
        assert rig.clock.wait_for_deadline(start + 1.0)  # the first handler runs
        closing = in_thread(rig, lambda: rig.conn.close(drain=2.5))
        assert rig.clock.wait_for_deadline(start + 2.5)
        for step in (1.0, 1.0):
            rig.clock.advance(step)
            assert rig.clock.wait_for_deadline(rig.clock.monotonic() + 1.0)  # the next runs
        rig.clock.advance(0.5)  # the drain's deadline: the third handler is still running
        assert closing.done.wait(5)
        assert handled == [b"0", b"1"]
        # Only what was handled: "1" acknowledges "0" with it (``client`` mode).
        assert [m.body for m in session.acks] == [b"1"]
        assert sorted(m.body for m in session.releases) == [b"%d" % n for n in range(3, 10)]
        assert rig.events.wait_for(MessagesReleased).count == 7
        rig.clock.advance(0.5)  # the third handler ends; its ack goes nowhere
        _worker("s1").join(5)
        assert [m.body for m in session.acks] == [b"1"]


def test_drain_unsubscribes_and_leaves_the_connection_open_for_sends() -> None:
    rig = make((A, B))
    gate = threading.Event()
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", lambda m: gate.wait(5), id="s1")
        session = rig.connector.session(A)
        for number in range(3):
            session.deliver("s1", b"%d" % number)
        start = rig.clock.monotonic()
        draining = in_thread(rig, lambda: rig.conn.drain(5))
        assert rig.clock.wait_for_deadline(start + 5)
        assert session.acks == []  # held while draining
        gate.set()
        assert draining.done.wait(5)
        assert draining.error is None
        assert [m.body for m in session.acks] == [b"2"]  # cumulative: the three
        assert session.unsubscribed == ["s1"]
        assert not subscription.active
        rig.conn.send("/queue/out", b"still sending")
        assert [m.body for m in session.sent] == [b"still sending"]
        # Not restored after a fail-over.
        rig.connector.behave(A, "refuse")
        session.kill()
        rig.events.wait_for(FailedOver)
        assert rig.connector.session(B).subscriptions == {}


def test_drain_and_close_check_their_seconds() -> None:
    rig = make((A,))
    with running(rig):
        with pytest.raises(ConfigurationError, match="timeout"):
            rig.conn.drain(-1)
        with pytest.raises(ConfigurationError, match="drain"):
            rig.conn.close(drain="soon")  # type: ignore[arg-type]
        assert rig.conn.state == "connected"


def test_close_ends_every_handler_worker_also_of_a_refused_subscription() -> None:
    rig = make((A,))
    rig.connector.refused_destinations = frozenset({"/queue/forbidden"})
    with running(rig):
        rig.conn.subscribe("/queue/in", print, id="ok")
        refused = rig.conn.subscribe("/queue/forbidden", print, id="refused")
        rig.events.wait_for(SubscriptionFailed)
        assert refused.error is not None
        workers = [_worker("ok"), _worker("refused")]
        rig.conn.close()
        for worker in workers:
            worker.join(5)
            assert not worker.is_alive()


def test_close_with_an_unbounded_drain_waits_for_the_buffer() -> None:
    rig = make((A,))
    gate = threading.Event()
    with running(rig):
        rig.conn.subscribe("/queue/in", lambda m: gate.wait(5), id="s1")
        session = rig.connector.session(A)
        for number in range(3):
            session.deliver("s1", b"%d" % number)
        closing = in_thread(rig, lambda: rig.conn.close(drain=None))  # type: ignore[arg-type]
        assert rig.clock.wait_for_waiters(1)
        assert not closing.done.is_set()
        gate.set()
        assert closing.done.wait(5)
        assert [m.body for m in session.acks] == [b"2"]  # cumulative: the three


def test_drain_from_a_handler_unsubscribes_its_subscription_after_its_ack() -> None:
    rig = make((A,))
    drained = threading.Event()

    def handler(message: Message) -> None:
        if message.body == b"drain":
            rig.conn.drain(5)
            drained.set()

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        session = rig.connector.session(A)
        acks_at_unsubscribe: list[int] = []
        unsubscribe = session.unsubscribe

        def recording(subscription_id: str) -> None:
            acks_at_unsubscribe.append(len(session.acks))
            unsubscribe(subscription_id)

        session.unsubscribe = recording  # type: ignore[method-assign]
        session.deliver("s1", b"drain")
        assert drained.wait(5)
        assert rig.connector.wait_until(lambda: session.unsubscribed == ["s1"])
        assert acks_at_unsubscribe == [1]
        assert [m.body for m in session.acks] == [b"drain"]
