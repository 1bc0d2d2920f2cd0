"""Acknowledgements the brokers confirmed: ``FailoverConnection.confirm_settled`` and the Spark
source's commit, which returns only once its ACKs are confirmed (fake broker group)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from failover_client import FailoverConnection, Message, Subscription
from failover_client.spark import source_options
from failover_client.spark._consumer import Consumer
from failover_client.spark._driver import ACK_CONFIRM_WAIT, SourceDriver
from failover_client.spark._spool import Spool
from failover_client.testing import FakeClock, FakeConnector, FakeSession

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
IDENTITY = {"destinations": ["/queue/in"], "selector": None}


def pulled(connection: FailoverConnection, connector: FakeConnector, count: int) -> list[Message]:
    subscription: Subscription = connection.subscribe("/queue/in", ack="client-individual")
    subscription.wait_active(5.0)
    session = connector.session("a:61613")
    (subscription_id,) = session.subscriptions
    for number in range(count):
        session.deliver(subscription_id, b"x", message_id=f"ID:{number}")
    taken = [subscription.receive(5.0) for _ in range(count)]
    assert all(m is not None for m in taken)
    return [m for m in taken if m is not None]


def acked_unanswered(
    connection: FailoverConnection, connector: FakeConnector, count: int
) -> tuple[list[Message], FakeSession]:
    """``count`` messages pulled and acknowledged on a session that answers no sync by itself."""
    messages = pulled(connection, connector, count)
    session = connector.session("a:61613")
    session.auto_confirm = False
    for message in messages:
        message.ack()
    return messages, session


def test_a_confirmation_is_asked_behind_the_acks_and_counts_them() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as connection:
        messages = pulled(connection, connector, 3)
        messages[0].ack()
        messages[2].ack()
        outcome = connection.confirm_settled([messages[0], messages[2]], 5.0)
        assert (outcome.confirmed, outcome.lost, outcome.unconfirmed) == (2, 0, 0)
        assert outcome.complete
        # One question for the session, asked after both ACKs were written.
        assert connector.session("a:61613").syncs == [2]


def test_no_answer_by_the_deadline_is_counted_unconfirmed_and_named() -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as connection:
        messages, _ = acked_unanswered(connection, connector, 2)
        before = clock.monotonic()
        outcome = connection.confirm_settled(messages, 5.0)
        assert clock.monotonic() - before == pytest.approx(5.0)
        assert (outcome.confirmed, outcome.unconfirmed) == (0, 2)
        assert not outcome.complete
        assert outcome.causes == ("stomp://a:61613: no confirmation within 5 s",)


def test_asked_now_and_waited_for_later() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as connection:
        messages, session = acked_unanswered(connection, connector, 2)
        question = connection.ask_settled(messages)
        assert session.syncs == [2]
        assert not question.answered
        assert session.confirm_syncs() == 1
        assert question.answered
        assert question.wait(0).confirmed == 2


def test_a_session_lost_while_confirming_counts_its_messages_lost() -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as connection:
        messages, session = acked_unanswered(connection, connector, 2)

        def kill_once_asked() -> None:
            assert connector.wait_until(lambda: session.syncs == [2])
            session.kill()

        killer = threading.Thread(target=kill_once_asked)
        killer.start()
        outcome = connection.confirm_settled(messages, None)
        killer.join(5.0)
        assert (outcome.confirmed, outcome.lost, outcome.unconfirmed) == (0, 2, 0)
        assert "stomp://a:61613" in outcome.causes[0]


def test_a_message_of_a_session_already_dead_is_lost_without_a_question() -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    with FailoverConnection(URI, connector=connector, clock=clock) as connection:
        messages = pulled(connection, connector, 1)
        session = connector.session("a:61613")
        session.kill()
        outcome = connection.confirm_settled(messages, 5.0)
        assert (outcome.lost, outcome.unconfirmed) == (1, 0)
        assert session.syncs == []


# --- the Spark source's commit ----------------------------------------------------------------


class CountingConsumer(Consumer):
    """The source's consumer, telling the test of each delivery its handler buffered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals = threading.Semaphore(0)

    def _arrive(self, message: Message) -> None:
        super()._arrive(message)
        self.arrivals.release()


def driver_on(tmp_path: Path, connector: FakeConnector, clock: FakeClock) -> SourceDriver:
    options = source_options(
        {"uri": URI, "destination": "/queue/in", "checkpointLocation": str(tmp_path / "ck")}
    )
    consumer = CountingConsumer(
        options,
        connection_factory=lambda o: FailoverConnection(o.uri, connector=connector, clock=clock),
        clock=clock,
    )
    consumer.start()
    spool = Spool.open(str(tmp_path / "ck"), IDENTITY)
    return SourceDriver(options, spool, consumer, clock=clock)


def deliver(driver: SourceDriver, connector: FakeConnector, *ids: str) -> None:
    """Offer ``ids`` on broker a and wait (real time, bounded) until the source buffered them."""
    session = connector.session("a:61613")
    (subscription_id,) = session.subscriptions
    for message_id in ids:
        session.deliver(subscription_id, b"x", message_id=message_id)
    consumer = driver.consumer
    assert isinstance(consumer, CountingConsumer)
    for _ in ids:
        assert consumer.arrivals.acquire(timeout=5.0)


def test_a_commit_returns_only_once_the_broker_confirmed_its_acks(tmp_path: Path) -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    driver = driver_on(tmp_path, connector, clock)
    try:
        deliver(driver, connector, "m1", "m2", "m3")
        end = driver.latest(None, 3)  # the limit: a batch short of it waits on the fake clock
        assert end == 3
        session = connector.session("a:61613")
        session.auto_confirm = False
        seen: dict[str, object] = {}

        def broker() -> None:
            # What the broker has when the source asks: every ACK of the batch, before it.
            assert connector.wait_until(lambda: bool(session.syncs))
            seen["acks"] = sorted(r.message_id or "" for r in session.acks)
            seen["syncs"] = list(session.syncs)
            seen["returned_early"] = done.is_set()
            session.confirm_syncs()

        done = threading.Event()
        answering = threading.Thread(target=broker)
        answering.start()
        driver.commit(end)
        done.set()
        answering.join(5.0)
        # One cumulative ACK (m3's) stands for the batch, written before the question.
        assert seen == {"acks": ["m3"], "syncs": [1], "returned_early": False}
        (subscription,) = session.subscriptions
        assert session.unsettled(subscription) == 0
    finally:
        driver.close()


def test_a_commit_the_broker_never_confirms_warns_after_the_deadline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    driver = driver_on(tmp_path, connector, clock)
    try:
        deliver(driver, connector, "m1", "m2")
        end = driver.latest(None, 2)
        connector.session("a:61613").auto_confirm = False
        before = clock.monotonic()
        with caplog.at_level(logging.WARNING, logger="failover_client.spark"):
            driver.commit(end)
        assert clock.monotonic() - before == pytest.approx(ACK_CONFIRM_WAIT)
        (record,) = [r for r in caplog.records if "acknowledgements" in r.getMessage()]
        text = record.getMessage()
        assert "the commit of offsets below 2 (2 messages)" in text
        assert "confirmed 0 of 1 acknowledgements" in text  # one cumulative ACK
        assert "1 have no answer after 30 s" in text
        assert "stomp://a:61613: no confirmation within 30 s" in text
    finally:
        connector.session("a:61613").auto_confirm = True
        driver.close()


def test_close_confirms_acks_of_redelivered_copies_before_it_closes(tmp_path: Path) -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    driver = driver_on(tmp_path, connector, clock)
    deliver(driver, connector, "m1")
    # Limits of what is buffered: a batch short of its limit would wait on the fake clock.
    driver.commit(driver.latest(None, 1))
    session = connector.session("a:61613")
    assert session.syncs == [1]
    # A copy of the committed m1 (say, from a broker that did not get the first ACK): acked at
    # once when it is taken, confirmed by no commit since none follows.
    deliver(driver, connector, "m1")
    assert driver.latest(1, 1) == 1
    assert len(session.acks) == 2
    driver.close()
    assert session.syncs == [1, 2]
    assert session.closed
