"""Moves that strand nothing: make-before-break moves, drains of the broker left, recoveries.

Each test moves a connection from b (backup) to a (priority) on the fake connector with a
clock that only moves when told, so the order of operations is observed step by step.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_manager_support import A, B, C, Rig, make, running

from failover_client._events import (
    Disconnected,
    DrainFinished,
    DrainStarted,
    FailedOver,
    MessagesReleased,
    PriorityRestored,
)
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.engine._leaving import DRAIN_PRIORITY, drains
from failover_client.engine._slot import hand_back
from failover_client.engine._subscriptions import Message


def _spec(destination: str, durable: str | None = None) -> SubscriptionSpec:
    return SubscriptionSpec(id="s", destination=destination, durable_name=durable)


def test_queues_are_drained_topics_and_durable_subscriptions_are_not() -> None:
    for queue in ("/queue/in", "/amq/queue/in", "queue://in", "in"):
        assert drains(_spec(queue)), queue
    for other in ("/topic/t", "topic://t", "/exchange/x/k", "/temp-queue/r", "/amq/topic/t"):
        assert not drains(_spec(other)), other
    assert not drains(_spec("/queue/in", durable="d"))


def _backup_rig(**options: Any) -> Rig:
    """A connection with priority backup that starts on b because a refuses."""
    rig = make((A, B), autojump=False, priority_backup=True, **options)
    rig.connector.behave(A, "refuse")
    return rig


def _move_home(rig: Rig) -> None:
    """Let a answer and run the probe that moves the connection there."""
    assert rig.clock.wait_for_waiters(1, timed=True)
    rig.connector.behave(A, "accept")
    rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())


def test_new_subscriptions_are_confirmed_before_the_old_session_stops() -> None:
    rig = _backup_rig(auto_confirm=False)
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1", ack="client-individual")
    rig.connector.behave(B, "accept")
    with running(rig, connect=False):
        rig.conn.connect()
        old = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: old.unconfirmed_subscriptions() == ["s1"])
        old.confirm_subscriptions()
        _move_home(rig)
        new = None
        assert rig.connector.wait_until(
            lambda: any(s.address == A and s.subscriptions for s in rig.connector.sessions)
        )
        new = rig.connector.session(A)
        # a subscribed, unconfirmed: sends still held, b still the connection's, untouched
        assert rig.conn.state == "switching"
        assert not rig.events.of_type(PriorityRestored)
        assert old.alive
        assert list(old.subscriptions) == ["s1"]
        assert not old.unsubscribed
        new.confirm_subscriptions()
        rig.events.wait_for(PriorityRestored)
        assert rig.conn.broker == "stomp://a:61613"
        # b is leaving, not closed: its queue subscription drains
        assert old.alive
        assert list(old.subscriptions) == ["s1"]
        assert rig.events.wait_for(DrainStarted) == DrainStarted("stomp://b:61613", ("s1",), "move")


def test_the_leaving_session_delivers_and_its_acks_go_back_to_it() -> None:
    rig = _backup_rig()
    got: list[Message] = []
    handled = threading.Event()

    def handler(message: Message) -> None:
        got.append(message)
        handled.set()

    rig.conn.subscribe("/queue/in", handler, id="s1", ack="client-individual")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        old, new = rig.connector.session(B), rig.connector.session(A)
        old.deliver("s1", b"left behind")
        assert handled.wait(5)  # the dispatch thread runs the handler
        got[0].ack()
        assert [m.body for m in old.acks] == [b"left behind"]
        assert new.acks == []
        # New sends go to a only.
        rig.conn.send_async("/queue/out", b"new").result(5)
        assert [m.body for m in new.sent] == [b"new"]
        assert old.sent == []


def test_a_send_unconfirmed_on_the_old_broker_is_neither_lost_nor_sent_twice() -> None:
    rig = _backup_rig(auto_confirm=False)
    with running(rig):
        old = rig.connector.session(B)
        future = rig.conn.send_async("/queue/out", b"before")
        assert rig.connector.wait_until(lambda: len(old.sent) == 1)
        _move_home(rig)
        # The move waits for b's confirmation before a takes the sends.
        assert rig.connector.wait_until(lambda: rig.conn.state == "switching")
        old.confirm()
        future.result(5)
        rig.events.wait_for(PriorityRestored)
        new = rig.connector.session(A)
        assert new.sent == []  # confirmed on b: not replayed


def test_the_leaving_session_closes_once_quiet() -> None:
    rig = _backup_rig(drain_quiet=1.0, drain_timeout=30.0)
    got: list[Message] = []
    rig.conn.subscribe("/queue/in", got.append, id="s1", ack="client-individual")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        old = rig.connector.session(B)
        start = rig.clock.monotonic()
        assert rig.clock.wait_for_deadline(start + 1.0)
        rig.clock.advance(0.5)
        old.deliver("s1", b"1")  # the quiet period starts again
        rig.clock.advance(0.5)  # the first quiet deadline finds the delivery: not quiet
        assert rig.clock.wait_for_deadline(start + 1.5)
        assert not old.closed
        rig.clock.advance(0.5)
        finished = rig.events.wait_for(DrainFinished)
        assert finished.complete
        assert finished.delivered == 1
        assert finished.broker == "stomp://b:61613"
        assert old.closed
        assert [m.body for m in got] == [b"1"]


def test_a_drain_that_never_goes_quiet_ends_at_its_deadline() -> None:
    rig = _backup_rig(drain_quiet=1.0, drain_timeout=3.0)
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1", ack="client-individual")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        old = rig.connector.session(B)
        start = rig.clock.monotonic()
        assert rig.clock.wait_for_deadline(start + 1.0)
        for step in range(6):  # a delivery every 0.5 s: never quiet for 1 s
            rig.clock.advance(0.5)
            old.deliver("s1", str(step).encode())
        assert rig.clock.monotonic() == pytest.approx(start + 3.0)
        rig.clock.advance(0.5)
        finished = rig.events.wait_for(DrainFinished)
        assert not finished.complete
        assert finished.delivered == 6
        assert old.closed


def test_without_drain_on_move_the_old_session_closes_at_once_releasing_the_unhandled() -> None:
    rig = _backup_rig(drain_on_move=False)
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1", ack="client-individual")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(PriorityRestored)
        old = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: old.closed)
        assert not rig.events.of_type(DrainStarted)


def test_released_messages_of_a_session_that_stops_are_reported() -> None:
    rig = _backup_rig(drain_on_move=False)
    gate_open = threading.Event()
    busy = threading.Event()

    def slow(message: Message) -> None:
        busy.set()
        gate_open.wait(5)  # released below by the test: a handler busy while the move ends

    rig.conn.subscribe("/queue/in", slow, id="s1", ack="client-individual")
    with running(rig):
        old = rig.connector.session(B)
        old.deliver("s1", b"busy")
        old.deliver("s1", b"waiting")
        assert busy.wait(5)  # the first handler runs (the dispatch thread took it)
        _move_home(rig)
        # Events wait behind the busy handler: the UNSUBSCRIBE shows the move was made.
        assert rig.connector.wait_until(lambda: old.unsubscribed == ["s1"])
        gate_open.set()
        released = rig.events.wait_for(MessagesReleased)
        assert released == MessagesReleased("s1", "stomp://b:61613", 1, "move")
        assert [m.body for m in old.releases] == [b"waiting"]
        assert rig.connector.wait_until(lambda: old.closed)


def test_topic_subscriptions_stop_at_once_on_the_leaving_session() -> None:
    rig = _backup_rig()
    rig.conn.subscribe("/topic/news", lambda m: None, id="t")
    rig.conn.subscribe("/queue/in", lambda m: None, id="q")
    with running(rig):
        _move_home(rig)
        started = rig.events.wait_for(DrainStarted)
        assert started.subscriptions == ("q",)
        assert rig.connector.session(B).unsubscribed == ["t"]


def test_a_leaving_session_that_dies_is_no_failover() -> None:
    rig = _backup_rig()
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        rig.connector.session(B).kill()
        finished = rig.events.wait_for(DrainFinished)
        assert not finished.complete
        assert rig.conn.broker == "stomp://a:61613"
        assert rig.conn.state == "connected"
        assert not rig.events.of_type(Disconnected)


def test_a_broker_left_by_a_failure_is_drained_once_it_answers() -> None:
    # a and b share the first tier (no priority return between them), c is the backup.
    rig = make(
        (A, B, C),
        autojump=False,
        priority_backup=True,
        priority_uris=("a:61613", "b:61613"),
        drain_quiet=1.0,
    )
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1", ack="client-individual")
    with running(rig):
        assert rig.conn.broker == "stomp://a:61613"
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(Disconnected)
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(0.01)  # the reconnect run's first delay: b answers
        rig.events.wait_for(FailedOver)
        assert rig.conn.broker == "stomp://b:61613"
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.connector.behave(A, "accept")
        rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())
        # (c, a member the connection did not start on, is drained too: see the next test.)
        started = _of(rig, DrainStarted, "stomp://a:61613")
        assert started == DrainStarted("stomp://a:61613", ("s1",), "recovered")
        drain = [s for s in rig.connector.sessions if s.address == A][-1]
        assert dict(drain.subscriptions["s1"].headers)["activemq.priority"] == DRAIN_PRIORITY
        assert rig.conn.broker == "stomp://b:61613"
        rig.clock.advance(1.0)
        assert _of(rig, DrainFinished, "stomp://a:61613").complete
        assert drain.closed


def _of(rig: Rig, kind: type[Any], broker: str) -> Any:
    """The first event of ``kind`` about ``broker`` (waiting for it)."""
    for count in range(1, 10):
        event = rig.events.wait_for(kind, count)
        if event.broker == broker:
            return event
    raise AssertionError(f"no {kind.__name__} for {broker}: {rig.events.events}")


def test_a_new_connection_drains_the_members_it_did_not_start_on() -> None:
    # An earlier process of the application may have left messages on b and c (killed while
    # it drained them, or before it came back for them): a new connection takes them.
    rig = make((A, B, C), autojump=False, drain_on_start=True, drain_quiet=1.0)
    got: list[bytes] = []
    handled = threading.Event()

    def handler(message: Message) -> None:
        got.append(message.body)
        handled.set()

    rig.conn.subscribe("/queue/in", handler, id="s1", ack="auto")
    with running(rig):
        assert rig.conn.broker == "stomp://a:61613"
        assert not rig.events.of_type(DrainStarted)
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())
        for broker in ("stomp://b:61613", "stomp://c:61613"):
            assert _of(rig, DrainStarted, broker).reason == "recovered"
        drain = [s for s in rig.connector.sessions if s.address == B][-1]
        drain.deliver("s1", b"left on b")
        assert handled.wait(5)  # the dispatch thread runs the handler
        assert got == [b"left on b"]
        assert rig.conn.broker == "stomp://a:61613"
        rig.clock.advance(1.0)
        assert _of(rig, DrainFinished, "stomp://b:61613").delivered == 1
        assert _of(rig, DrainFinished, "stomp://c:61613").delivered == 0


def test_by_default_a_new_connection_drains_no_other_member() -> None:
    # Under priority backup too: on a network of brokers with live producers, a drain at
    # start would take live traffic until it is quiet (drain_on_start turns it on).
    rig = make((A, B, C), autojump=False, priority_backup=True, drain_quiet=1.0)
    rig.conn.subscribe("/queue/in", lambda message: None, id="s1", ack="auto")
    with running(rig):
        assert rig.conn.broker == "stomp://a:61613"
        for _ in range(3):
            if rig.clock.wait_for_waiters(1, timed=True) and rig.clock.deadlines():
                rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())
        assert not rig.events.of_type(DrainStarted)
        assert {s.address for s in rig.connector.sessions} == {A}


def test_handing_back_without_an_adapter_release_writes_nothing() -> None:
    class NoRelease:
        address = A

        def release(self, message: Received) -> None:
            raise NotImplementedError("not built")

    class Recording(NoRelease):
        def __init__(self) -> None:
            self.released: list[Received] = []

        def release(self, message: Received) -> None:
            self.released.append(message)

    message = Received("s1", "/queue/in", b"x")
    hand_back(NoRelease(), message)  # type: ignore[arg-type]  # only release is called
    recording = Recording()
    hand_back(recording, message)  # type: ignore[arg-type]
    assert recording.released == [message]


def test_a_drain_that_found_messages_is_followed_by_another_until_one_finds_none() -> None:
    rig = _backup_rig(drain_quiet=1.0)
    rig.conn.subscribe("/queue/in", lambda m: None, id="s1", ack="client-individual")
    with running(rig):
        _move_home(rig)
        rig.events.wait_for(DrainStarted)
        first = rig.connector.session(B)
        first.deliver("s1", b"forwarded")
        rig.clock.advance(1.0)  # quiet for 1 s after the delivery
        assert rig.events.wait_for(DrainFinished).delivered == 1
        assert first.closed
        # b is drained again after the recovery back-off, by a new session
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(rig.clock.deadlines()[0] - rig.clock.monotonic())
        again = rig.events.wait_for(DrainStarted, 2)
        assert again == DrainStarted("stomp://b:61613", ("s1",), "recovered")
        second = [s for s in rig.connector.sessions if s.address == B][-1]
        assert second is not first
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(1.0)
        assert rig.events.wait_for(DrainFinished, 2).delivered == 0
        assert second.closed
        # It found nothing: no further drain is due.
        assert rig.clock.wait_for_waiters(1)
        assert rig.clock.deadlines() == []
