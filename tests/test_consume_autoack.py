"""Acknowledgements of ``auto`` callback subscriptions, in batches (``engine._autoack``).

An ``auto`` callback subscription is ``client`` mode on the wire: one acknowledgement settles
every earlier message of its session. The engine writes one per half prefetch window (at most
``ACK_BATCH_MAX`` messages), or once
the buffer stayed empty for ``ACK_LINGER``, or at a stop; before a rejection, a release or an
UNSUBSCRIBE on the session, and before a session being left closes, it writes the one it holds.
Every test records the order of the frames on the fake broker and checks that no message is
acknowledged before its handler ran.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import cast

from test_engine_leaving import _backup_rig, _move_home
from test_manager_support import A, B, make, running

from failover_client._events import DrainFinished, DrainStarted, HandlerError
from failover_client.adapter import Received
from failover_client.engine._autoack import ACK_BATCH_MAX, ACK_LINGER, AutoAcks, ack_batch
from failover_client.engine._subscriptions import Message
from failover_client.testing import FakeSession


def _record(session: FakeSession, handled: set[bytes]) -> list[tuple[str, bytes]]:
    """The frames ``session`` gets, in order; an ack of a message not handled yet fails."""
    frames: list[tuple[str, bytes]] = []
    ack, nack, release, unsubscribe = (
        session.ack,
        session.nack,
        session.release,
        session.unsubscribe,
    )

    def acking(received: Received) -> None:
        assert received.body in handled, f"{received.body!r} acknowledged before its handler"
        frames.append(("ack", received.body))
        ack(received)

    def nacking(received: Received) -> None:
        frames.append(("nack", received.body))
        nack(received)

    def releasing(received: Received) -> None:
        frames.append(("release", received.body))
        release(received)

    def unsubscribing(subscription_id: str) -> None:
        frames.append(("unsubscribe", subscription_id.encode()))
        unsubscribe(subscription_id)

    session.ack = acking  # type: ignore[method-assign]
    session.nack = nacking  # type: ignore[method-assign]
    session.release = releasing  # type: ignore[method-assign]
    session.unsubscribe = unsubscribing  # type: ignore[method-assign]
    return frames


def test_one_acknowledgement_per_half_window() -> None:
    rig = make((A,))
    gate = threading.Event()
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        gate.wait(5)  # the test offers every message first
        handled.add(message.body)

    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=10)
        session = rig.connector.session(A)
        assert session.subscriptions["s1"].ack == "client"
        frames = _record(session, handled)
        for number in range(30):
            session.deliver("s1", b"%d" % number)
        assert session.unsettled("s1") == 10
        gate.set()
        assert rig.connector.wait_until(lambda: session.waiting("s1") == 0)
        assert rig.connector.wait_until(lambda: session.unsettled("s1") == 0)
        # Each ack opens half the window; the broker refills it while the rest is handled.
        assert frames == [("ack", b"%d" % n) for n in (4, 9, 14, 19, 24, 29)]
        assert session.most_unsettled == 10
        assert rig.connector.wait_until(lambda: subscription.in_flight == 0)
        assert subscription.handled == 30


def test_a_large_window_is_acknowledged_every_hundred_messages() -> None:
    # ActiveMQ stalls a fast consumer whose cumulative ACKs cover 500 messages (_autoack).
    assert [ack_batch(n) for n in (1, 2, 10, 200, 201, 1000, 20_000)] == [
        1,
        1,
        5,
        100,
        100,
        100,
        100,
    ]
    rig = make((A,))
    gate = threading.Event()
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        gate.wait(5)  # the test offers every message first
        handled.add(message.body)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=1000)
        session = rig.connector.session(A)
        frames = _record(session, handled)
        for number in range(400):
            session.deliver("s1", b"%d" % number)
        gate.set()
        assert rig.connector.wait_until(lambda: session.unsettled("s1") == 0)
        assert frames == [("ack", b"%d" % n) for n in range(ACK_BATCH_MAX - 1, 400, ACK_BATCH_MAX)]


def test_an_empty_buffer_does_not_write_an_acknowledgement_before_the_half_window() -> None:
    rig = make((A,), autojump=False)
    handled: set[bytes] = set()

    with running(rig):
        rig.conn.subscribe("/queue/in", lambda m: handled.add(m.body), id="s1", prefetch=10)
        session = rig.connector.session(A)
        frames = _record(session, handled)
        for number in range(3):
            session.deliver("s1", b"%d" % number)
        # Handled faster than the broker sends: the buffer is empty for a moment, and the
        # worker waits for more (up to ACK_LINGER) instead of writing an ACK for three.
        assert rig.clock.wait_for_deadline(ACK_LINGER)
        assert handled == {b"0", b"1", b"2"}
        assert frames == []
        for number in range(3, 7):
            session.deliver("s1", b"%d" % number)
        # Half the window (5) handled: one ACK, with no time gone by.
        assert rig.connector.wait_until(lambda: frames == [("ack", b"4")])
        assert rig.connector.wait_until(lambda: len(handled) == 7)
        assert session.unsettled("s1") == 2


def test_handled_messages_are_acknowledged_once_the_buffer_stays_empty() -> None:
    rig = make((A,), autojump=False)
    handled: set[bytes] = set()

    with running(rig):
        subscription = rig.conn.subscribe(
            "/queue/in", lambda m: handled.add(m.body), id="s1", prefetch=10
        )
        session = rig.connector.session(A)
        frames = _record(session, handled)
        for number in range(3):
            session.deliver("s1", b"%d" % number)
        assert rig.clock.wait_for_deadline(ACK_LINGER)
        assert frames == []
        # Fewer than half the window, but nothing more came: not left unacknowledged.
        rig.clock.advance(ACK_LINGER)
        assert rig.connector.wait_until(lambda: session.unsettled("s1") == 0)
        assert frames == [("ack", b"2")]
        assert rig.connector.wait_until(lambda: subscription.in_flight == 0)
        session.deliver("s1", b"later")
        assert rig.clock.wait_for_deadline(2 * ACK_LINGER)
        rig.clock.advance(ACK_LINGER)
        assert rig.connector.wait_until(lambda: session.unsettled("s1") == 0)
        assert frames == [("ack", b"2"), ("ack", b"later")]


def test_a_rejection_comes_after_the_acknowledgement_of_the_handled_ones_before_it() -> None:
    rig = make((A,))
    gate = threading.Event()
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        gate.wait(5)
        if message.body == b"bad":
            raise ValueError("cannot parse")
        if message.body == b"refused":
            message.nack()  # the application rejects it itself: the same order
            return
        handled.add(message.body)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=20)
        session = rig.connector.session(A)
        frames = _record(session, handled)
        for body in (b"bad", b"ok1", b"ok2", b"bad", b"ok4", b"refused", b"ok6"):
            session.deliver("s1", body)
        gate.set()
        assert rig.events.wait_for(HandlerError, count=2)
        assert rig.connector.wait_until(lambda: session.unsettled("s1") == 0)
        # A rejection is cumulative in ``client`` mode: the handled ones are acknowledged
        # first, so each rejection covers its own message alone.
        assert frames == [
            ("nack", b"bad"),
            ("ack", b"ok2"),
            ("nack", b"bad"),
            ("ack", b"ok4"),
            ("nack", b"refused"),
            ("ack", b"ok6"),
        ]


def test_an_unsubscribe_from_the_handler_acknowledges_before_it_releases() -> None:
    rig = make((A,))
    gate = threading.Event()
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        gate.wait(5)
        handled.add(message.body)
        if message.body == b"stop":
            message.subscription.unsubscribe()

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=20)
        session = rig.connector.session(A)
        frames = _record(session, handled)
        for body in (b"a", b"stop", b"c", b"d"):
            session.deliver("s1", body)
        gate.set()
        assert rig.connector.wait_until(lambda: session.unsubscribed == ["s1"])
        # A release may be cumulative too (RabbitMQ): "stop", still running when it asked
        # for the unsubscribe, is acknowledged before "c" and "d" go back.
        assert frames == [
            ("ack", b"stop"),
            ("release", b"c"),
            ("release", b"d"),
            ("unsubscribe", b"s1"),
        ]


def test_close_with_drain_writes_the_held_acknowledgement_before_the_releases() -> None:
    rig = make((A,), autojump=False)
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        rig.clock.sleep(1.0)  # one second of the clock's time each
        handled.add(message.body)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1", prefetch=20)
        session = rig.connector.session(A)
        frames = _record(session, handled)
        start = rig.clock.monotonic()
        for number in range(6):
            session.deliver("s1", b"%d" % number)
        assert rig.clock.wait_for_deadline(start + 1.0)
        closing = rig.conn.close
        thread = threading.Thread(target=lambda: closing(drain=2.5))
        thread.start()
        assert rig.clock.wait_for_deadline(start + 2.5)
        for _ in range(2):
            rig.clock.advance(1.0)
            assert rig.clock.wait_for_deadline(rig.clock.monotonic() + 1.0)
        rig.clock.advance(0.5)  # the deadline: "2" still runs
        thread.join(5)
        assert not thread.is_alive()
        # "0" and "1" handled, held, then one cumulative ack before the releases.
        assert frames == [("ack", b"1"), *(("release", b"%d" % n) for n in range(3, 6))]
        rig.clock.advance(0.5)


def test_a_leaving_session_writes_the_held_acknowledgement_before_its_unsubscribe() -> None:
    rig = _backup_rig()
    gate = threading.Event()
    blocked = threading.Event()
    handled: set[bytes] = set()

    def handler(message: Message) -> None:
        if message.body == b"2":
            blocked.set()
            gate.wait(5)  # opened by the test once the move was made
        handled.add(message.body)

    rig.conn.subscribe("/topic/news", handler, id="t", prefetch=20)
    with running(rig):
        old = rig.connector.session(B)
        frames = _record(old, handled)
        for number in range(4):
            old.deliver("t", b"%d" % number)
        assert blocked.wait(5)
        _move_home(rig)
        # A topic stops at once on the session left: "1" (with "0") acknowledged first.
        assert rig.connector.wait_until(lambda: old.unsubscribed == ["t"])
        assert frames == [("ack", b"1"), ("unsubscribe", b"t")]
        gate.set()
        assert rig.connector.wait_until(lambda: old.closed)
        # "2" was running: acknowledged once handled; "3" handed back.
        assert frames[2:] == [("ack", b"2"), ("release", b"3")]


def test_a_drained_session_has_everything_acknowledged_before_it_closes() -> None:
    rig = _backup_rig(drain_quiet=1.0)
    handled: set[bytes] = set()
    rig.conn.subscribe("/queue/in", lambda m: handled.add(m.body), id="q", prefetch=20)
    with running(rig):
        old = rig.connector.session(B)
        frames = _record(old, handled)
        unsettled_at_close: list[int] = []
        close = old.close

        def closing() -> None:
            unsettled_at_close.append(old.unsettled("q"))
            close()

        old.close = closing  # type: ignore[method-assign]
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        assert rig.clock.wait_for_deadline(rig.clock.monotonic() + 1.0)
        for number in range(3):
            old.deliver("q", b"%d" % number)
        assert rig.connector.wait_until(lambda: len(handled) == 3)
        rig.clock.advance(1.0)  # quiet for 1 s after the deliveries: the drain ends
        rig.events.wait_for(DrainFinished)
        assert rig.connector.wait_until(lambda: old.closed)
        assert unsettled_at_close == [0]
        assert frames[-1:] == [("ack", b"2")]


def _message(subscription_id: str, session: object, prefetch: int) -> Message:
    subscription = SimpleNamespace(id=subscription_id, prefetch=prefetch)
    return cast(Message, SimpleNamespace(subscription=subscription, session=session))


def test_auto_acks_batches_per_subscription_and_session() -> None:
    acks = AutoAcks()
    one, two = object(), object()
    first = [_message("s", one, 6) for _ in range(3)]
    assert acks.handled(first[0], more=True) is None
    assert acks.handled(_message("s", two, 6), more=True) is None  # another session's count
    assert acks.handled(first[1], more=True) is None
    assert acks.handled(first[2], more=True) is first[2]  # half of 6
    last = _message("s", one, 6)
    assert acks.handled(last, more=True) is None
    assert acks.take_for("s", one) is last
    assert acks.take_for("s", one) is None
    assert [m.session for m in acks.take("s")] == [two]
    assert acks.take("s") == []
    alone = _message("t", one, 1)
    assert acks.handled(alone, more=True) is alone  # a window of 1: every message
