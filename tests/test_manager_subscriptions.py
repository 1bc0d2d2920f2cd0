"""Subscriptions: restore after fail-over, handlers, acks routed to the delivering session."""

from __future__ import annotations

import queue
import threading

import pytest
from test_manager_support import A, B, in_thread, make, running

from failover_client import (
    ConfigurationError,
    ConnectionClosed,
    Disconnected,
    SubscriptionFailed,
    SubscriptionRefused,
)
from failover_client._events import AckDropped, FailedOver, HandlerError
from failover_client.adapter import SubscriptionSpec
from failover_client.engine._subscriptions import Message


def collector() -> tuple[queue.SimpleQueue[Message], object]:
    inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
    return inbox, inbox.put


def test_subscription_made_before_connect_is_active_on_connect():
    rig = make((A,))
    inbox, handler = collector()
    subscription = rig.conn.subscribe(
        "/queue/in", handler, ack="client", id="orders", headers={"selector": "x = 1"}
    )
    with running(rig):
        spec = rig.connector.session(A).subscriptions["orders"]
        assert spec == SubscriptionSpec(
            "orders", "/queue/in", "client", None, (("selector", "x = 1"),)
        )
        rig.connector.session(A).deliver(
            "orders", b"hi", headers={"failover-message-id": "p-1"}, message_id="ID:1"
        )
        message = inbox.get(timeout=5)
        assert (message.body, message.destination, message.message_id) == (
            b"hi",
            "/queue/in",
            "p-1",
        )
        assert message.subscription is subscription
        assert message.redelivered is False


def test_subscriptions_are_restored_with_the_same_ids_after_failover():
    rig = make((A, B))
    _, handler = collector()
    with running(rig):
        rig.conn.subscribe("/queue/one", handler, id="s1")
        rig.conn.subscribe("/topic/two", handler, durable_name="nightly")
        assert list(rig.connector.session(A).subscriptions) == ["s1", "sub-1"]
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)
        restored = rig.connector.session(B).subscriptions
        assert restored == {
            # A user's auto callback subscription is client on the wire (acked once handled,
            # cumulatively, by the engine).
            "s1": SubscriptionSpec("s1", "/queue/one", "client", engine_acks=True),
            "sub-1": SubscriptionSpec(
                "sub-1", "/topic/two", "client", durable_name="nightly", engine_acks=True
            ),
        }


def test_unsubscribed_subscription_is_not_restored():
    rig = make((A, B))
    _, handler = collector()
    with running(rig):
        subscription = rig.conn.subscribe("/queue/one", handler, id="s1")
        subscription.unsubscribe()
        assert rig.connector.session(A).unsubscribed == ["s1"]
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)
        assert rig.connector.session(B).subscriptions == {}


def test_duplicate_subscription_id_is_refused():
    rig = make((A,))
    _, handler = collector()
    rig.conn.subscribe("/queue/one", handler, id="s1")
    with running(rig), pytest.raises(ConfigurationError, match="'s1' is already in use"):
        rig.conn.subscribe("/queue/two", handler, id="s1")


def test_ack_of_a_message_from_a_dead_session_is_dropped_and_reported():
    rig = make((A, B))
    inbox, handler = collector()
    with running(rig):
        rig.conn.subscribe("/queue/in", handler, ack="client-individual", id="s1")
        rig.connector.session(A).deliver("s1", b"old", message_id="ID:1")
        old = inbox.get(timeout=5)
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)
        old.ack()
        dropped = rig.events.wait_for(AckDropped)
        assert dropped == AckDropped("s1", "ID:1", "stomp://a:61613", nack=False)
        assert rig.connector.session(A).acks == []
        assert rig.connector.session(B).acks == []
        assert rig.conn.stats()["acks_dropped"] == 1
        # The broker redelivers; the new message acks on the live session.
        rig.connector.session(B).deliver("s1", b"old", message_id="ID:1", redelivered=True)
        again = inbox.get(timeout=5)
        assert again.redelivered is True
        again.ack()
        assert [m.message_id for m in rig.connector.session(B).acks] == ["ID:1"]


def test_nack_goes_to_the_delivering_session_and_settles_once():
    rig = make((A,))
    inbox, handler = collector()
    with running(rig):
        rig.conn.subscribe("/queue/in", handler, ack="client", id="s1")
        rig.connector.session(A).deliver("s1", b"x")
        message = inbox.get(timeout=5)
        message.nack()
        message.ack()  # already settled: ignored
        assert len(rig.connector.session(A).nacks) == 1
        assert rig.connector.session(A).acks == []


def test_auto_ack_messages_are_acknowledged_once_whether_the_handler_acks_or_not():
    rig = make((A,))
    inbox, handler = collector()

    def acking(message: Message) -> None:
        message.ack()  # settles it early; the engine does not ack it again
        handler(message)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.conn.subscribe("/queue/two", acking, id="s2")
        session = rig.connector.session(A)
        session.deliver("s1", b"x")
        session.deliver("s2", b"y")
        inbox.get(timeout=5).ack()  # ignored: already acknowledged (or about to be)
        inbox.get(timeout=5)
        assert rig.connector.wait_until(lambda: len(session.acks) == 2)
        assert sorted(m.body for m in session.acks) == [b"x", b"y"]


def test_a_handler_that_raises_is_reported_and_later_messages_still_arrive():
    rig = make((A,))
    seen: list[bytes] = []
    done = threading.Event()

    def handler(message: Message) -> None:
        if message.body == b"bad":
            raise ValueError("cannot parse")
        seen.append(message.body)
        done.set()

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.connector.session(A).deliver("s1", b"bad", message_id="ID:9")
        rig.connector.session(A).deliver("s1", b"good")
        assert done.wait(5)
        assert seen == [b"good"]
        error = rig.events.wait_for(HandlerError)
        assert (error.subscription_id, error.message_id) == ("s1", "ID:9")
        assert isinstance(error.error, ValueError)
        assert rig.conn.stats()["handler_errors"] == 1


def test_handlers_run_on_a_worker_of_their_subscription():
    rig = make((A,))
    threads: queue.SimpleQueue[str] = queue.SimpleQueue()
    with running(rig):
        rig.conn.subscribe("/queue/in", lambda m: threads.put(threading.current_thread().name))
        rig.connector.session(A).deliver("sub-1", b"x")
        name = threads.get(timeout=5)
        assert name.startswith("failover-client-")
        assert name.endswith("-handler-sub-1")


def test_handler_may_close_the_connection():
    rig = make((A,))
    closed = threading.Event()

    def handler(message: Message) -> None:
        rig.conn.close()
        closed.set()

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.connector.session(A).deliver("s1", b"x")
        assert closed.wait(5)
        assert rig.conn.state == "closed"


def test_message_for_an_unknown_subscription_is_counted():
    rig = make((A,))
    inbox, handler = collector()
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1")
        session = rig.connector.session(A)
        # The broker still delivers a message that crossed the unsubscribe on the wire.
        session.subscriptions["s1"] = subscription.spec
        subscription.unsubscribe()
        session.subscriptions["s1"] = subscription.spec
        session.deliver("s1", b"late")
        rig.conn.subscribe("/queue/in", handler, id="s2")
        session.deliver("s2", b"next")
        assert inbox.get(timeout=5).body == b"next"
        assert rig.conn.stats()["unroutable"] == 1


# --- confirmation and refusal ------------------------------------------------------------------


def test_wait_active_returns_once_the_broker_confirmed_the_subscription():
    rig = make((A,), auto_confirm=False, autojump=False)
    _, handler = collector()
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1")
        session = rig.connector.session(A)
        assert session.unconfirmed_subscriptions() == ["s1"]
        waited = in_thread(rig, lambda: subscription.wait_active(5))
        assert not waited.done.wait(0.05)  # real time; nothing confirmed it yet
        assert session.confirm_subscriptions() == ["s1"]
        assert waited.done.wait(5)
        assert waited.error is None


def test_a_subscription_refused_by_name_fails_alone_and_is_never_restored():
    rig = make((A, B))
    rig.connector.refused_destinations = frozenset({"/queue/forbidden"})
    _, handler = collector()
    with running(rig):
        good = rig.conn.subscribe("/queue/in", handler, id="good")
        bad = rig.conn.subscribe("/queue/forbidden", handler, id="bad")
        with pytest.raises(SubscriptionRefused, match="destination /queue/forbidden refused"):
            bad.wait_active(5)
        event = rig.events.wait_for(SubscriptionFailed)
        assert (event.subscription_id, event.destination, event.losses) == (
            "bad",
            "/queue/forbidden",
            0,
        )
        assert event.error is bad.error
        good.wait_active(5)
        assert rig.events.of_type(Disconnected) == []  # no fail-over for a named refusal
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)
        good.wait_active(5)
        assert list(rig.connector.session(B).subscriptions) == ["good"]


def test_wait_active_names_what_ended_the_wait():
    rig = make((A,), auto_confirm=False)
    _, handler = collector()
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", handler, id="s1")
        # The fake clock jumps to the deadline: no broker answered in time.
        with pytest.raises(TimeoutError, match="'s1' not confirmed by a broker within 2"):
            subscription.wait_active(2)
        subscription.unsubscribe()
        with pytest.raises(ConfigurationError, match="'s1' was unsubscribed"):
            subscription.wait_active(2)
        other = rig.conn.subscribe("/queue/in", handler, id="s2")
    with pytest.raises(ConnectionClosed):
        other.wait_active(2)
