"""The source's cumulative acknowledgements: one ACK per done prefix, never past an undone one.

The frontier alone over plain objects, then the driver and the real consumer on the shipped
fake broker group, whose sessions settle a ``client`` ACK cumulatively as a broker does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from failover_client import FailoverConnection
from failover_client.spark._consumer import Consumer
from failover_client.spark._driver import SourceDriver
from failover_client.spark._frontier import AckFrontier
from failover_client.spark._spool import Spool
from failover_client.testing import FakeClock, FakeConnector
from tests.test_spark_source_pure import IDENTITY, Inline, source


class Delivered:
    """A delivery of ``subscription`` on ``session``, counting its ACK frames."""

    def __init__(self, name: str, subscription: object, session: object) -> None:
        self.name = name
        self.subscription = subscription
        self.session = session
        self.acks = 0

    def ack(self) -> None:
        self.acks += 1

    def __repr__(self) -> str:
        return f"<{self.name}>"


def arrived(frontier: AckFrontier[Delivered], *names: str, sub: object, session: object):
    messages = [Delivered(name, sub, session) for name in names]
    for message in messages:
        frontier.arrived(message)
    return messages


def test_one_ack_stands_for_a_done_prefix() -> None:
    frontier: AckFrontier[Delivered] = AckFrontier()
    sub, session = object(), object()
    m = arrived(frontier, "m0", "m1", "m2", "m3", sub=sub, session=session)
    assert frontier.acknowledge(m[:3]) == [m[2]]
    assert [x.acks for x in m] == [0, 0, 1, 0]
    assert frontier.waiting() == 1


def test_an_undone_earlier_delivery_holds_the_ack_back() -> None:
    frontier: AckFrontier[Delivered] = AckFrontier()
    sub, session = object(), object()
    m = arrived(frontier, "m0", "m1", "m2", sub=sub, session=session)
    # A copy of a committed message (m2) is done before m0 / m1's batch commits: acknowledging
    # it now would settle them cumulatively.
    assert frontier.acknowledge([m[2]]) == []
    assert frontier.acknowledge([m[1]]) == []
    assert [x.acks for x in m] == [0, 0, 0]
    assert frontier.acknowledge([m[0]]) == [m[2]]
    assert [x.acks for x in m] == [0, 0, 1]
    assert frontier.waiting() == 0


def test_each_subscription_and_session_keeps_its_own_order() -> None:
    frontier: AckFrontier[Delivered] = AckFrontier()
    sub_x, sub_y, old, new = object(), object(), object(), object()
    x_old = arrived(frontier, "x0", "x1", sub=sub_x, session=old)
    y_old = arrived(frontier, "y0", sub=sub_y, session=old)
    x_new = arrived(frontier, "x2", "x3", sub=sub_x, session=new)
    written = frontier.acknowledge([*x_old, *y_old, x_new[0]])
    assert sorted(written, key=repr) == [x_old[1], x_new[0], y_old[0]]
    assert x_new[1].acks == 0


def test_a_delivery_it_does_not_hold_is_refused_by_name() -> None:
    frontier: AckFrontier[Delivered] = AckFrontier()
    sub, session = object(), object()
    (m0,) = arrived(frontier, "m0", sub=sub, session=session)
    with pytest.raises(ValueError, match="<stray> is not awaiting an acknowledgement"):
        frontier.acknowledge([Delivered("stray", sub, session)])
    assert frontier.acknowledge([m0]) == [m0]
    with pytest.raises(ValueError, match="<m0> is not awaiting"):
        frontier.acknowledge([m0])  # covered already: acknowledging it again is a bug


# --- the driver and the consumer on a fake broker ----------------------------------------------


@pytest.fixture
def fake() -> tuple[FakeConnector, FakeClock]:
    clock = FakeClock(autojump=True)  # a batch's take waits a while for more
    return FakeConnector(clock=clock), clock


def driver_with_consumer(
    fake: tuple[FakeConnector, FakeClock], tmp_path: Path
) -> tuple[SourceDriver, Consumer]:
    connector, clock = fake
    options = source(tmp_path)
    consumer = Consumer(
        options,
        connection_factory=lambda o: FailoverConnection(o.uri, connector=connector, clock=clock),
        clock=clock,
    )
    consumer.start()
    spool = Spool.open(str(tmp_path / "checkpoint"), IDENTITY)
    return SourceDriver(options, spool, consumer, acker=Inline(), clock=clock), consumer


def test_a_committed_batch_is_one_ack_on_the_wire_and_settles_nothing_after_it(
    fake: tuple[FakeConnector, FakeClock], tmp_path: Path
) -> None:
    driver, consumer = driver_with_consumer(fake, tmp_path)
    try:
        session = fake[0].session("a:61613")
        (sub,) = session.subscriptions
        for n in range(5):
            session.deliver(sub, f"m{n}".encode(), message_id=f"ID:{n}")
        consumer.wait_delivery(1.0)
        assert driver.latest(0, 3) == 3
        assert session.acks == []  # nothing committed yet
        # A copy of m1 comes (its first ACK lost, say) after m3 and m4.
        session.deliver(sub, b"m1", message_id="ID:1", redelivered=True)
        # Spark committed 0..3 and plans the next batch: m0..m2 acknowledged by one ACK; m3, m4
        # spooled. The copy's own ACK would settle m3 and m4 too: it waits for their commit.
        assert driver.latest(3, 3) == 5
        assert [r.message_id for r in session.acks] == ["ID:2"]
        assert session.unsettled(sub) == 3  # m3, m4 and the copy
        driver.commit(5)
        assert [r.message_id for r in session.acks] == ["ID:2", "ID:1"]
        assert session.unsettled(sub) == 0
        assert driver.lag()["acknowledged"] == 6
    finally:
        driver.close()


def test_a_failover_starts_a_new_order_and_the_dead_sessions_ack_is_not_written(
    fake: tuple[FakeConnector, FakeClock], tmp_path: Path
) -> None:
    connector, _ = fake
    driver, consumer = driver_with_consumer(fake, tmp_path)
    try:
        old = connector.session("a:61613")
        (sub,) = old.subscriptions
        for n in range(2):
            old.deliver(sub, f"a{n}".encode(), message_id=f"A:{n}")
        consumer.wait_delivery(1.0)
        connector.behave("a:61613", "refuse")
        old.kill()
        # Restored on b: its subscription is there once the connection is up again.
        assert connector.wait_until(
            lambda: any(s.address.key == "b:61613" and s.subscriptions for s in connector.sessions)
        )
        new = connector.session("b:61613")
        (sub_b,) = new.subscriptions
        for n in range(2):
            new.deliver(sub_b, f"b{n}".encode(), message_id=f"B:{n}")
        assert driver.latest(0, 4) == 4
        assert driver.latest(4, 4) == 4  # Spark committed 0..4
        # b's own ACK covers b's two; a's session is gone, its messages come again from a.
        assert [r.message_id for r in new.acks] == ["B:1"]
        assert new.unsettled(sub_b) == 0
        assert old.acks == []
    finally:
        driver.close()
