"""Bounded consumption: the prefetch window, handler workers, handler errors, PrefetchExceeded.

The fake broker keeps each subscription's window as a real one does (what it offers beyond
``prefetch`` unsettled messages waits "on the broker"), so these tests show what the client
holds whatever the handler's speed.
"""

from __future__ import annotations

import queue
import threading

from test_manager_support import A, B, make, running

from failover_client._events import AckDropped, FailedOver, HandlerError, PrefetchExceeded
from failover_client.adapter import Received
from failover_client.engine._subscriptions import Message


def test_a_slow_handler_leaves_the_backlog_on_the_broker() -> None:
    rig = make((A,))
    gate = threading.Event()
    seen_in_flight: list[int] = []
    handled: list[bytes] = []

    def slow(message: Message) -> None:
        gate.wait(5)  # the test opens it once it looked at the window
        seen_in_flight.append(message.subscription.in_flight)
        handled.append(message.body)

    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", slow, id="s1", prefetch=5)
        session = rig.connector.session(A)
        assert session.subscriptions["s1"].ack == "client"
        assert session.subscriptions["s1"].prefetch == 5
        for number in range(50):
            session.deliver("s1", b"%d" % number)
        assert session.unsettled("s1") == 5
        assert session.waiting("s1") == 45  # still on the broker
        assert subscription.in_flight == 5
        assert subscription.last_delivery_at == rig.clock.monotonic()
        gate.set()
        # Acknowledged cumulatively (``client`` mode): the last ack settles every message.
        assert rig.connector.wait_until(lambda: session.acks and session.acks[-1].body == b"49")
        assert session.unsettled("s1") == 0
        assert session.waiting("s1") == 0
        assert handled == [b"%d" % n for n in range(50)]  # in order, every one
        assert len(session.acks) < 50  # in batches
        assert session.most_unsettled == 5
        assert max(seen_in_flight) <= 5
        assert subscription.handled == 50
        assert rig.connector.wait_until(lambda: subscription.in_flight == 0)


def test_the_connection_default_prefetch_comes_from_the_options() -> None:
    rig = make((A,), consumer_prefetch=7, consumer_prefetch_bytes=4096)
    with running(rig):
        rig.conn.subscribe("/queue/in", print, id="s1", ack="client")
        rig.conn.subscribe("/queue/in", print, id="s2", prefetch=3, prefetch_bytes=0)
        specs = rig.connector.session(A).subscriptions
        assert (specs["s1"].ack, specs["s1"].prefetch, specs["s1"].prefetch_bytes) == (
            "client",
            7,
            4096,
        )
        assert (specs["s2"].prefetch, specs["s2"].prefetch_bytes) == (3, 0)


def test_the_spec_says_whether_the_engine_or_the_application_acknowledges() -> None:
    rig = make((A,))
    with running(rig):
        rig.conn.subscribe("/queue/in", print, id="callback")
        rig.conn.subscribe("/queue/in", id="pull")
        rig.conn.subscribe("/queue/in", print, id="client", ack="client")
        rig.conn.subscribe("/queue/in", id="individual", ack="client-individual")
        specs = rig.connector.session(A).subscriptions
        assert {name: (spec.ack, spec.engine_acks) for name, spec in specs.items()} == {
            "callback": ("client", True),
            "pull": ("client-individual", True),
            "client": ("client", False),
            "individual": ("client-individual", False),
        }


def test_a_slow_subscription_does_not_delay_another() -> None:
    rig = make((A,))
    gate = threading.Event()
    fast: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    slow_started = threading.Event()

    def slow(message: Message) -> None:
        slow_started.set()
        # Through the clock, so virtual time moves on while it blocks (the fast subscription's
        # acknowledgement waits for its buffer to stay empty a moment). Ends: the test sets it.
        rig.clock.wait(gate, None)

    with running(rig):
        rig.conn.subscribe("/queue/slow", slow, id="slow")
        rig.conn.subscribe("/queue/fast", lambda m: fast.put(m.body), id="fast")
        session = rig.connector.session(A)
        session.deliver("slow", b"s1")
        session.deliver("slow", b"s2")
        assert slow_started.wait(5)
        for number in range(3):
            session.deliver("fast", b"f%d" % number)
        # Handled while the slow handler still blocks.
        assert [fast.get(timeout=5) for _ in range(3)] == [b"f0", b"f1", b"f2"]
        assert not gate.is_set()
        # Acknowledged (cumulatively) once nothing more came, while "slow" still blocks.
        assert rig.connector.wait_until(lambda: session.unsettled("fast") == 0)
        assert session.acks[-1].body == b"f2"
        assert session.unsettled("slow") == 2
        gate.set()
        assert rig.connector.wait_until(lambda: session.unsettled("slow") == 0)
        assert session.acks[-1].body == b"s2"


def test_a_handler_that_raises_is_reported_its_message_rejected_and_the_rest_handled() -> None:
    rig = make((A,))
    handled: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def handler(message: Message) -> None:
        if message.body == b"bad":
            raise ValueError("cannot parse")
        handled.put(message.body)

    with running(rig):
        for sub_id, ack in (("auto", "auto"), ("individual", "client-individual")):
            rig.conn.subscribe(f"/queue/{sub_id}", handler, id=sub_id, ack=ack)  # type: ignore[arg-type]
        session = rig.connector.session(A)
        session.deliver("auto", b"bad", message_id="ID:1")
        session.deliver("auto", b"good")
        session.deliver("individual", b"bad", message_id="ID:2")
        error = rig.events.wait_for(HandlerError)
        assert isinstance(error.error, ValueError)
        assert {handled.get(timeout=5)} == {b"good"}
        assert rig.connector.wait_until(lambda: len(session.nacks) == 2)
        assert sorted(m.message_id or "" for m in session.nacks) == ["ID:1", "ID:2"]
        # An ``auto`` acknowledgement waits for ACK_LINGER of an empty buffer (``_autoack``):
        # it may come after the other subscription's rejection.
        assert rig.connector.wait_until(lambda: len(session.acks) >= 1)
        assert [m.body for m in session.acks] == [b"good"]  # the bad ones never acknowledged
        assert rig.events.wait_for(HandlerError, count=2)
        assert rig.conn.stats()["handler_errors"] == 2


def test_a_handler_that_settles_its_message_itself_is_not_settled_again() -> None:
    rig = make((A,))

    def handler(message: Message) -> None:
        message.nack()
        raise RuntimeError("after the nack")

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        session = rig.connector.session(A)
        session.deliver("s1", b"x")
        rig.events.wait_for(HandlerError)
        assert rig.connector.wait_until(lambda: len(session.nacks) == 1)
        assert session.acks == []


def test_a_broker_that_ignores_the_window_is_reported_once_and_nothing_is_dropped() -> None:
    rig = make((A,))
    rig.connector.flow_control = False
    gate = threading.Event()
    with running(rig):
        rig.conn.subscribe("/queue/in", lambda m: gate.wait(5), id="s1", prefetch=2)
        session = rig.connector.session(A)
        for number in range(6):
            session.deliver("s1", b"%d" % number)
        event = rig.events.wait_for(PrefetchExceeded)
        assert event == PrefetchExceeded("s1", "stomp://a:61613", 3, 2)
        gate.set()
        assert rig.connector.wait_until(lambda: len(session.acks) == 6)
        assert [m.body for m in session.acks] == [b"%d" % n for n in range(6)]
        assert len(rig.events.of_type(PrefetchExceeded)) == 1


def test_a_handler_may_unsubscribe_its_own_subscription_after_its_ack() -> None:
    rig = make((A,))
    gate = threading.Event()

    def handler(message: Message) -> None:
        gate.wait(5)  # the test buffers the rest first
        if message.body == b"stop":
            message.subscription.unsubscribe()

    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1")
        assert subscription.active
        session = rig.connector.session(A)
        acks_at_unsubscribe: list[int] = []
        unsubscribe = session.unsubscribe

        def recording(subscription_id: str) -> None:
            acks_at_unsubscribe.append(len(session.acks))
            unsubscribe(subscription_id)

        session.unsubscribe = recording  # type: ignore[method-assign]
        release = session.release
        acks_at_release: list[int] = []

        def releasing(received: Received) -> None:
            acks_at_release.append(len(session.acks))
            release(received)

        session.release = releasing  # type: ignore[method-assign]
        for body in (b"a", b"stop", b"c", b"d"):
            session.deliver("s1", body)
        gate.set()
        assert rig.connector.wait_until(lambda: session.unsubscribed == ["s1"])
        # "a" and "stop" acknowledged (cumulatively) before the releases and the UNSUBSCRIBE:
        # a release in ``client`` mode may be cumulative and would take "stop" with it.
        assert session.acks[-1].body == b"stop"
        assert acks_at_release == [len(session.acks)] * 2
        assert acks_at_unsubscribe == [len(session.acks)]
        assert [m.body for m in session.releases] == [b"c", b"d"]
        assert not subscription.active


def test_messages_of_a_session_that_died_are_still_handled_and_their_acks_dropped() -> None:
    rig = make((A, B))
    gate = threading.Event()
    handled: list[bytes] = []

    def handler(message: Message) -> None:
        # Blocks through the clock: a worker runs on the clock's time, and the fail-over
        # below needs virtual time to pass while it waits.
        rig.clock.wait(gate, None)
        handled.append(message.body)

    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1")
        old = rig.connector.session(A)
        old.deliver("s1", b"1")
        old.deliver("s1", b"2")
        rig.connector.behave(A, "refuse")
        old.kill()
        rig.events.wait_for(FailedOver)
        gate.set()
        # Acknowledged cumulatively: "2" stands for both, and its ack is dropped.
        dropped = rig.events.wait_for(AckDropped)
        assert (dropped.subscription_id, dropped.nack) == ("s1", False)
        assert rig.connector.wait_until(lambda: subscription.in_flight == 0)
        assert handled == [b"1", b"2"]
        # One acknowledgement for the two: "1" was held while "2" waited.
        assert [e.message_id for e in rig.events.of_type(AckDropped)] == [dropped.message_id]
        assert old.acks == []
        assert rig.connector.session(B).acks == []
