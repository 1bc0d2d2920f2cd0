"""Duplicates after a replay: _AMQ_DUPL_ID on every replayable send to a broker that may drop
copies by it, the DuplicatesPossible notice at connect, and the consumer-side Deduplicator."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from test_manager_support import A, B, make, running

from failover_client import Deduplicator, DuplicatesPossible
from failover_client._events import Connected, FailedOver
from failover_client.engine._dedup import drops_duplicates, may_drop_duplicates
from failover_client.testing import FakeConnector

ARTEMIS_STOMP = "ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine"
ARTEMIS_AMQP = "apache-activemq-artemis"
CLASSIC = "ActiveMQ/5.17.2"
RABBITMQ = "RabbitMQ/3.10.8"


def _connector(products: dict[str, str]) -> type[FakeConnector]:
    class Named(FakeConnector):
        def __init__(self, **kwargs: object) -> None:
            super().__init__(products=products, **kwargs)  # type: ignore[arg-type]

    return Named


# --- the header -------------------------------------------------------------------------------


def test_every_confirmed_send_carries_its_id_as_amq_dupl_id():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"1")
        rig.conn.send_async("/queue/q", b"2").result(5)
        rig.conn.send("/queue/q", b"3", message_id="order-7")
        sent = rig.connector.session(A).sent
        assert [m.headers["_AMQ_DUPL_ID"] for m in sent] == ["c-1", "c-2", "order-7"]
        assert all(m.headers["_AMQ_DUPL_ID"] == m.message_id for m in sent)


def test_a_replayed_copy_carries_the_same_amq_dupl_id_as_the_original():
    rig = make((A, B), auto_confirm=False)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        session_a = rig.connector.session(A)
        rig.connector.behave(A, "refuse")
        session_a.kill()
        rig.events.wait_for(FailedOver)
        session_b = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: len(session_b.sent) == 1)
        original, copy = session_a.sent[0], session_b.sent[0]
        assert original.headers["_AMQ_DUPL_ID"] == copy.headers["_AMQ_DUPL_ID"] == "c-1"
        session_b.confirm()
        assert future.result(5) is None


def test_dedup_off_sends_no_amq_dupl_id():
    rig = make((A,), dedup="off")
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        assert "_AMQ_DUPL_ID" not in rig.connector.session(A).sent[0].headers


def test_an_application_set_amq_dupl_id_is_kept():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"x", {"_AMQ_DUPL_ID": "row-9"})
        assert rig.connector.session(A).sent[0].headers["_AMQ_DUPL_ID"] == "row-9"


def test_fire_and_forget_never_replayed_carries_no_amq_dupl_id():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"x", confirm=False)
        assert rig.connector.wait_until(lambda: len(rig.connector.session(A).sent) == 1)
        assert "_AMQ_DUPL_ID" not in rig.connector.session(A).sent[0].headers


# --- per broker: the header only where it may drop copies -----------------------------------


@pytest.mark.parametrize(
    ("product", "carries"),
    [
        (ARTEMIS_STOMP, True),
        (ARTEMIS_AMQP, True),
        (None, True),  # unknown: kept
        (CLASSIC, False),
        ("ActiveMQ", False),  # Classic's AMQP open
        (RABBITMQ, False),
        ("RabbitMQ", False),  # RabbitMQ's AMQP open
    ],
)
def test_each_send_kind_carries_the_header_only_to_a_broker_that_may_drop_copies(product, carries):
    products = {} if product is None else {"a:61613": product}
    rig = make((A,), connector_type=_connector(products))
    with running(rig):
        rig.conn.send("/queue/q", b"1")
        rig.conn.send_async("/queue/q", b"2").result(5)
        rig.conn.send("/queue/q", b"3", confirm=False, message_id="ff-3")
        session = rig.connector.session(A)
        assert rig.connector.wait_until(lambda: len(session.sent) == 3)
        tagged = ["_AMQ_DUPL_ID" in m.headers for m in session.sent]
        assert tagged == [carries] * 3
        assert all(m.headers["failover-message-id"] == m.message_id for m in session.sent)
    assert may_drop_duplicates(product) is carries


def _replayed(first: str, second: str):
    """A send stranded on A (calling itself ``first``) and replayed on B (``second``):
    the original and the copy as each session received them."""
    products = {"a:61613": first, "b:61613": second}
    rig = make((A, B), auto_confirm=False, connector_type=_connector(products))
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        session_a = rig.connector.session(A)
        assert rig.connector.wait_until(lambda: len(session_a.sent) == 1)
        rig.connector.behave(A, "refuse")
        session_a.kill()
        rig.events.wait_for(FailedOver)
        session_b = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: len(session_b.sent) == 1)
        rig.conn.send_async("/queue/q", b"y")  # a new send, built for B
        assert rig.connector.wait_until(lambda: len(session_b.sent) == 2)
        session_b.confirm()
        assert future.result(5) is None
        return session_a.sent[0], session_b.sent[0], session_b.sent[1]


def test_a_replay_from_classic_to_artemis_carries_the_header():
    original, copy, later = _replayed(CLASSIC, ARTEMIS_STOMP)
    assert "_AMQ_DUPL_ID" not in original.headers
    assert copy.headers["_AMQ_DUPL_ID"] == copy.message_id == original.message_id
    assert later.headers["_AMQ_DUPL_ID"] == later.message_id


def test_a_replay_from_artemis_to_classic_carries_no_header():
    original, copy, later = _replayed(ARTEMIS_AMQP, CLASSIC)
    assert original.headers["_AMQ_DUPL_ID"] == original.message_id
    assert "_AMQ_DUPL_ID" not in copy.headers
    assert copy.message_id == original.message_id
    assert "_AMQ_DUPL_ID" not in later.headers


def test_a_replay_from_rabbitmq_to_an_unnamed_broker_carries_the_header():
    products = {"a:61613": RABBITMQ}
    rig = make((A, B), auto_confirm=False, connector_type=_connector(products))
    with running(rig):
        rig.conn.send_async("/queue/q", b"x")
        session_a = rig.connector.session(A)
        assert rig.connector.wait_until(lambda: len(session_a.sent) == 1)
        rig.connector.behave(A, "refuse")
        session_a.kill()
        rig.events.wait_for(FailedOver)
        session_b = rig.connector.session(B)
        assert rig.connector.wait_until(lambda: len(session_b.sent) == 1)
        assert "_AMQ_DUPL_ID" not in session_a.sent[0].headers
        assert session_b.sent[0].headers["_AMQ_DUPL_ID"] == session_b.sent[0].message_id
        session_b.confirm()


def test_an_application_set_amq_dupl_id_goes_to_every_broker():
    rig = make((A,), connector_type=_connector({"a:61613": CLASSIC}))
    with running(rig):
        rig.conn.send("/queue/q", b"x", {"_AMQ_DUPL_ID": "row-9"})
        assert rig.connector.session(A).sent[0].headers["_AMQ_DUPL_ID"] == "row-9"


def test_dedup_off_sends_no_header_to_artemis():
    rig = make((A,), dedup="off", connector_type=_connector({"a:61613": ARTEMIS_STOMP}))
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        assert "_AMQ_DUPL_ID" not in rig.connector.session(A).sent[0].headers


# --- the notice at connect ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "drops"),
    [
        (ARTEMIS_STOMP, True),
        (ARTEMIS_AMQP, True),
        (CLASSIC, False),
        ("RabbitMQ/3.10.8", False),
        ("RabbitMQ", False),
        (None, False),
    ],
)
def test_which_brokers_drop_duplicates(product, drops):
    assert drops_duplicates(product) is drops


def test_a_broker_without_duplicate_detection_is_reported_once_after_connected():
    rig = make((A, B), connector_type=_connector({"a:61613": CLASSIC, "b:61613": CLASSIC}))
    with running(rig):
        notice = rig.events.wait_for(DuplicatesPossible)
        assert notice.broker == "stomp://a:61613"
        assert CLASSIC in notice.reason
        assert "failover-message-id" in notice.reason
        connected = rig.events.of_type(Connected)[0]
        events = [e for e in rig.events.events if isinstance(e, (Connected, DuplicatesPossible))]
        assert events[:2] == [connected, notice]
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(Connected, count=2)
    # Closed is the last event: whatever the loop said about B came before it.
    assert len(rig.events.of_type(Connected)) == 2
    assert len(rig.events.of_type(DuplicatesPossible)) == 1


def test_artemis_is_not_reported_but_a_later_classic_broker_is():
    rig = make((A, B), connector_type=_connector({"a:61613": ARTEMIS_STOMP, "b:61613": CLASSIC}))
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        assert rig.events.of_type(DuplicatesPossible) == []
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        notice = rig.events.wait_for(DuplicatesPossible)
        assert notice.broker == "stomp://b:61613"


def test_dedup_off_is_reported_on_artemis_too():
    rig = make((A,), dedup="off", connector_type=_connector({"a:61613": ARTEMIS_AMQP}))
    with running(rig):
        notice = rig.events.wait_for(DuplicatesPossible)
        assert notice.reason.startswith("dedup=off")


def test_a_broker_that_names_no_product_is_reported():
    rig = make((A,))
    with running(rig):
        notice = rig.events.wait_for(DuplicatesPossible)
        assert "did not name its product" in notice.reason


# --- the consumer-side helper ---------------------------------------------------------------


@dataclass
class Msg:
    id: str | None
    headers: dict[str, str] = field(default_factory=dict)
    acks: int = 0

    def __post_init__(self) -> None:
        if self.id is not None:
            self.headers["failover-message-id"] = self.id

    def ack(self) -> None:
        self.acks += 1


def test_a_wrapped_handler_sees_each_id_once_and_copies_are_acknowledged():
    handled: list[str | None] = []
    dedup = Deduplicator(window=10)
    handle = dedup(lambda m: handled.append(m.id))
    messages = [Msg("a"), Msg("b"), Msg("a"), Msg("c"), Msg("b")]
    for message in messages:
        handle(message)
    assert handled == ["a", "b", "c"]
    assert [m.acks for m in messages] == [0, 0, 1, 0, 1]
    assert dedup.dropped == 2


def test_a_handler_that_raises_leaves_the_id_unseen_for_the_redelivery():
    dedup = Deduplicator()
    calls: list[str | None] = []

    def fails_once(message: Msg) -> None:
        calls.append(message.id)
        if len(calls) == 1:
            raise RuntimeError("boom")

    handle = dedup(fails_once)
    with pytest.raises(RuntimeError):
        handle(Msg("a"))
    handle(Msg("a"))  # the broker's redelivery
    assert calls == ["a", "a"]
    assert dedup.dropped == 0


def test_the_window_bounds_memory_and_forgets_the_oldest():
    dedup = Deduplicator(window=3)
    kept = list(dedup.filter(Msg(i) for i in ["1", "2", "3", "4", "1", "4"]))
    assert [m.id for m in kept] == ["1", "2", "3", "4", "1"]  # "1" was forgotten; "4" was not
    assert len(dedup) == 3


def test_filter_drops_copies_and_passes_messages_without_an_id():
    dedup = Deduplicator()
    stream = [Msg("a"), Msg(None), Msg("a"), Msg(None), Msg("b")]
    assert [m.id for m in dedup.filter(stream)] == ["a", None, None, "b"]


def test_the_amq_dupl_id_is_the_key_when_failover_message_id_is_missing():
    dedup = Deduplicator()
    first = Msg(None, {"_AMQ_DUPL_ID": "x"})
    copy = Msg(None, {"_AMQ_DUPL_ID": "x"})
    assert len(list(dedup.filter([first, copy]))) == 1


@pytest.mark.parametrize("window", [0, -1, 1.5, True])
def test_a_bad_window_is_refused(window):
    with pytest.raises(ValueError, match="window"):
        Deduplicator(window=window)
