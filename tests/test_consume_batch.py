"""A handler worker takes what is buffered in batches (``Inbox.take_batch``).

One lock takes up to ``TAKE_MAX`` messages; they are handled one by one, in order, and the
ones a stop finds not started go back to the front of the buffer, so they are handed back in
order like the buffered ones, never acknowledged unhandled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import cast

import pytest
from test_manager_support import A, B, Rig, in_thread, make, running

from failover_client._events import DrainStarted, HandlerError, MessagesReleased
from failover_client.engine._consumers import TAKE_MAX
from failover_client.engine._inbox import Inbox
from failover_client.engine._subscriptions import Message, Subscription
from failover_client.testing import FakeClock


def _stopped(inbox: Inbox) -> bool:
    """Wait (5 s at most) until ``inbox`` stops taking: woken by each change it reports."""
    changed = threading.Event()
    report = inbox._changed

    def spy() -> None:
        report()
        changed.set()

    inbox._changed = spy
    while inbox.taking:
        if not changed.wait(5):
            return False
        changed.clear()
    return True


class _Gates:
    """A handler that records each body and blocks on the bodies given until let go."""

    def __init__(self, *bodies: bytes, also: Callable[[Message], None] | None = None) -> None:
        self.started = {body: threading.Event() for body in bodies}
        self.gates = {body: threading.Event() for body in bodies}
        self.handled: list[bytes] = []
        self.also = also

    def __call__(self, message: Message) -> None:
        body = message.body
        self.handled.append(body)
        if body in self.gates:
            self.started[body].set()
            assert self.gates[body].wait(5)
        if self.also is not None:
            self.also(message)


def _one_batch(rig: Rig, handler: _Gates, count: int, **options: object) -> Subscription:
    """Subscribe ``handler`` (blocking on b"0"), deliver b"0" and, while it runs, b"1" to
    ``count - 1``: the worker takes those in batches once b"0" is let go."""
    subscription = rig.conn.subscribe("/queue/in", handler, id="s1", **options)  # type: ignore[arg-type]
    session = rig.connector.session(A)
    session.deliver("s1", b"0")
    assert handler.started[b"0"].wait(5)
    for number in range(1, count):
        session.deliver("s1", b"%d" % number)
    return subscription


def _close(rig: Rig, subscription: Subscription) -> None:
    rig.conn.close()


def _unsubscribe(rig: Rig, subscription: Subscription) -> None:
    subscription.unsubscribe()


@pytest.mark.parametrize("stop", [_close, _unsubscribe], ids=["close", "unsubscribe"])
def test_a_stop_during_a_batch_hands_back_what_was_not_started_in_order(
    stop: Callable[[Rig, Subscription], None],
) -> None:
    rig = make((A,))
    handler = _Gates(b"0", b"1")
    with running(rig):
        subscription = _one_batch(rig, handler, 10, prefetch=20)
        session = rig.connector.session(A)
        handler.gates[b"0"].set()
        assert handler.started[b"1"].wait(5)
        inbox = subscription.inbox
        # "1" runs; "2" to "9" were taken with it in one batch and count as buffered.
        assert (inbox.running, inbox.buffered, len(inbox._batch)) == (1, 8, 8)
        stopping = in_thread(rig, lambda: stop(rig, subscription))
        assert _stopped(inbox)
        assert (inbox.running, inbox.buffered, len(inbox._batch)) == (1, 8, 0)
        handler.gates[b"1"].set()
        assert stopping.done.wait(5)
        assert stopping.error is None
        assert handler.handled == [b"0", b"1"]
        assert [m.body for m in session.acks] == [b"1"]  # cumulative: "0" and "1"
        assert session.nacks == []
        assert [m.body for m in session.releases] == [b"%d" % n for n in range(2, 10)]
        assert rig.events.wait_for(MessagesReleased).count == 8


def test_its_own_unsubscribe_mid_batch_hands_back_the_rest_in_order_after_its_ack() -> None:
    rig = make((A,))
    box: list[Subscription] = []

    def unsubscribe_on_one(message: Message) -> None:
        if message.body == b"1":
            box[0].unsubscribe()  # from its own handler: the rest is handed back after

    handler = _Gates(b"0", also=unsubscribe_on_one)
    with running(rig):
        box.append(_one_batch(rig, handler, 10, prefetch=20))
        session = rig.connector.session(A)
        handler.gates[b"0"].set()
        assert rig.connector.wait_until(lambda: len(session.releases) == 8)
        assert handler.handled == [b"0", b"1"]
        assert [m.body for m in session.acks] == [b"1"]
        assert [m.body for m in session.releases] == [b"%d" % n for n in range(2, 10)]
        assert session.unsubscribed == ["s1"]


def test_messages_keep_their_order_across_batches_and_acks_their_windows() -> None:
    rig = make((A,))
    left: list[int] = []  # per message handled, how many of its batch were not started yet

    def record(message: Message) -> None:
        left.append(len(box[0].inbox._batch))

    box: list[Subscription] = []
    handler = _Gates(b"0", also=record)
    with running(rig):
        box.append(_one_batch(rig, handler, 200, prefetch=500))
        session = rig.connector.session(A)
        handler.gates[b"0"].set()
        assert rig.connector.wait_until(lambda: len(session.acks) == 2)
        assert handler.handled == [b"%d" % n for n in range(200)]
        # "0" alone, then the 199 buffered meanwhile in batches of at most TAKE_MAX.
        sizes = [1] + [TAKE_MAX] * (199 // TAKE_MAX) + [199 % TAKE_MAX]
        assert left == [n for size in sizes for n in reversed(range(size))]
        # One cumulative ACK per 100 handled (half the window, at most 100), none per batch.
        assert [m.body for m in session.acks] == [b"99", b"199"]
        inbox = box[0].inbox
        assert (inbox.handled, inbox.running, inbox.buffered, inbox.in_flight) == (200, 0, 0, 0)


def test_a_handler_raising_mid_batch_rejects_that_message_and_the_batch_goes_on() -> None:
    rig = make((A,))

    def fail_on_three(message: Message) -> None:
        if message.body == b"3":
            raise ValueError("three")

    handler = _Gates(b"0", also=fail_on_three)
    with running(rig):
        subscription = _one_batch(rig, handler, 6, prefetch=20)
        session = rig.connector.session(A)
        handler.gates[b"0"].set()
        # "2" is acknowledged before "3" is rejected (a NACK is cumulative in client mode),
        # "5" once the buffer stayed empty.
        assert rig.connector.wait_until(lambda: len(session.acks) == 2)
        assert handler.handled == [b"0", b"1", b"2", b"3", b"4", b"5"]
        assert [m.body for m in session.nacks] == [b"3"]
        assert [m.body for m in session.acks] == [b"2", b"5"]
        error = rig.events.wait_for(HandlerError)
        assert str(error.error) == "three"
        inbox = subscription.inbox
        assert (inbox.handled, inbox.running, inbox.buffered, inbox.in_flight) == (6, 0, 0, 0)


def test_a_session_being_left_is_not_held_by_the_next_sessions_handler_in_its_batch() -> None:
    # Priority backup: on b while a refuses, then back to a, draining b meanwhile (both
    # sessions deliver to the subscription).
    rig = make((A, B), autojump=False, priority_backup=True, drain_quiet=30.0)
    rig.connector.behave(A, "refuse")
    sessions: dict[bytes, object] = {}
    held: list[bool] = []
    checked = threading.Event()

    def check(message: Message) -> None:
        sessions.setdefault(message.body[:1], message.session)
        if message.body == b"a1":  # b's messages before it in the batch were handled
            held.append(box[0].inbox.holds(sessions[b"b"]))
            checked.set()

    box: list[Subscription] = []
    handler = _Gates(b"b0", also=check)
    box.append(rig.conn.subscribe("/queue/in", handler, id="s1"))
    with running(rig):
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.connector.behave(A, "accept")
        rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())
        rig.events.wait_for(DrainStarted)
        old, new = rig.connector.session(B), rig.connector.session(A)
        old.deliver("s1", b"b0")
        assert handler.started[b"b0"].wait(5)
        old.deliver("s1", b"b1")
        old.deliver("s1", b"b2")
        new.deliver("s1", b"a1")
        handler.gates[b"b0"].set()
        assert checked.wait(5)
        assert handler.handled == [b"b0", b"b1", b"b2", b"a1"]
        assert held == [False]  # b's run was finished before a's message started


# --- the inbox's side -------------------------------------------------------------------------


def _inbox() -> tuple[Inbox, list[int]]:
    changes: list[int] = []
    return Inbox(FakeClock(), 10, lambda: changes.append(1)), changes


class _Stub:
    """What the inbox reads of a message: its session (hashed by identity, as a Message)."""

    def __init__(self, session: object, number: int) -> None:
        self.session = session
        self.number = number


def _message(session: object, number: int) -> Message:
    return cast(Message, _Stub(session, number))


def _numbers(messages: list[Message]) -> list[int]:
    return [cast(_Stub, m).number for m in messages]


def test_a_stop_puts_the_batch_back_at_the_front_in_order() -> None:
    inbox, changes = _inbox()
    a = object()
    for number in range(6):
        inbox.put(_message(a, number))
    assert inbox.take_batch(None, 4)
    assert changes == []  # nothing a stop waits for changed
    first = inbox.next_taken()
    assert first is not None
    assert _numbers([first]) == [0]
    assert (inbox.running, inbox.buffered) == (1, 5)
    inbox.stop()
    assert inbox.next_taken() is None
    assert (inbox.running, inbox.buffered) == (1, 5)
    inbox.finish_all([first])
    assert (inbox.running, inbox.handled, inbox.holds(a)) == (0, 1, True)
    # 1-3 (the batch) before 4-5 (still buffered): the order they came in.
    assert _numbers(inbox.close()) == [1, 2, 3, 4, 5]
    assert not inbox.holds(a)


def test_what_waits_of_a_session_leaves_out_its_handled_ones_not_finished() -> None:
    inbox, _ = _inbox()
    a, b = object(), object()
    for number, session in enumerate((a, a, a, b)):
        inbox.put(_message(session, number))
    assert inbox.take_batch(None, TAKE_MAX)
    assert inbox.buffered == 4
    assert not inbox.idle()
    run = [inbox.next_taken(), inbox.next_taken()]
    assert inbox.more_from(a, unfinished=1)  # the third "a" waits
    third = inbox.next_taken()
    assert not inbox.more_from(a, unfinished=2)  # "b" is next, not "a"
    assert not inbox.idle()
    inbox.finish_all([m for m in (*run, third) if m is not None])
    assert not inbox.holds(a)
    assert inbox.holds(b)
    assert inbox.next_taken() is not None
    assert inbox.idle()
    assert inbox.next_taken() is None
