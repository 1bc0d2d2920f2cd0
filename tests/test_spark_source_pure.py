"""The Spark source without Spark running: ledger, driver, consumer, reader.

No SparkSession and no broker: the driver runs over a scripted consumer and a spool in a
temporary directory; the consumer over the shipped fake connector on a fake clock; the reader's
rows are compared with PySpark's own Arrow mapping of the source schema.
"""

from __future__ import annotations

import collections
import inspect
import pickle
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import StringType, StructField, StructType

from failover_client import (
    AllBrokersFailed,
    FailoverConnection,
    GaveUp,
    SettleConfirmation,
    SubscriptionRefused,
)
from failover_client.adapter import Received
from failover_client.spark import SparkOptionError, source_options
from failover_client.spark._consumer import Consumer, open_connection
from failover_client.spark._driver import SourceDriver
from failover_client.spark._ledger import AckLedger
from failover_client.spark._rows import spool_table
from failover_client.spark._source import (
    FailoverStreamReader,
    SpoolPartition,
    source_schema,
    stream_reader,
)
from failover_client.spark._spool import Spool, SpoolBatch, SpoolGap
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"


# --- doubles -----------------------------------------------------------------------------------


@dataclass
class Slot:
    broker: str = "stomp://a:61613"


@dataclass
class Delivery:
    """A received message as the driver sees one (the shape of ``failover_client.Message``)."""

    message_id: str | None
    body: bytes = b"x"
    headers: dict[str, str] = field(default_factory=dict)
    destination: str = "/queue/in"
    redelivered: bool = False
    session: Slot = field(default_factory=Slot)
    acks: int = 0

    @property
    def received(self) -> Received:
        return Received(
            "s", self.destination, self.body, self.headers, redelivered=self.redelivered
        )

    def ack(self) -> None:
        self.acks += 1


def deliveries(*ids: str | None, redelivered: bool = False) -> list[Delivery]:
    return [Delivery(i, body=f"{i}".encode(), redelivered=redelivered) for i in ids]


class ScriptedConsumer:
    """Hands out what the test queued, ``limit`` at a time; records the waits."""

    def __init__(self) -> None:
        self.queued: collections.deque[Delivery] = collections.deque()
        self.takes: list[tuple[int | None, float]] = []
        self.calls: list[str] = []
        """What the driver asked: ``take``, ``ask <n>`` (confirm n acks), ``wait <n>``."""
        self.closed = False

    def push(self, *items: Delivery) -> None:
        self.queued.extend(items)

    def take(
        self,
        limit: int | None,
        timeout: float,
        max_bytes: int | None = None,
        *,
        whole: bool = True,
    ) -> list[Delivery]:
        self.takes.append((limit, timeout))
        self.calls.append("take")
        count = len(self.queued) if limit is None else min(limit, len(self.queued))
        taken: list[Delivery] = []
        size = 0
        while len(taken) < count:
            following = len(self.queued[0].body)
            if max_bytes is not None and size + following > max_bytes and (taken or not whole):
                break
            taken.append(self.queued.popleft())
            size += following
        return taken

    def buffered(self) -> int:
        return len(self.queued)

    def check(self) -> None:
        pass

    def connected(self) -> bool:
        return True

    def state(self) -> str:
        return "connected" if self.connected() else "reconnecting"

    def product(self) -> str | None:
        return None

    def wait_delivery(self, timeout: float) -> bool:
        return bool(self.queued)

    def acknowledge(self, messages: list[Delivery]) -> list[Delivery]:
        """One by one (the real consumer's are cumulative: ``test_spark_frontier.py``)."""
        for message in messages:
            message.ack()
        return list(messages)

    def ask(self, messages: list[Delivery]) -> Answered:
        self.calls.append(f"ask {len(messages)}")
        return Answered(self, len(messages))

    def close(self) -> None:
        self.closed = True


class Answered:
    """A confirmation question every broker answers at once."""

    def __init__(self, consumer: ScriptedConsumer, count: int) -> None:
        self.consumer = consumer
        self.count = count

    def wait(self, timeout: float | None) -> SettleConfirmation:
        self.consumer.calls.append(f"wait {self.count}")
        return SettleConfirmation(confirmed=self.count)


def source(tmp_path: Path, **extra: str):
    return source_options(
        {
            "uri": URI,
            "destination": "/queue/in",
            "checkpointLocation": str(tmp_path / "checkpoint"),
            **extra,
        }
    )


IDENTITY = {"destinations": ["/queue/in"], "selector": None}


T = TypeVar("T")


class Inline(Executor):
    """Runs what is submitted at once, so the order of the driver's calls is the test's."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def driver_on(tmp_path: Path, consumer: ScriptedConsumer, *, retained: int = 1000) -> SourceDriver:
    spool = Spool.open(str(tmp_path / "checkpoint"), IDENTITY, retained=retained)
    return SourceDriver(source(tmp_path), spool, consumer, acker=Inline())


# --- the ledger --------------------------------------------------------------------------------


def test_fresh_deliveries_wait_for_their_batch_commit() -> None:
    ledger: AckLedger[Delivery] = AckLedger()
    first = deliveries("a", "b")
    admission = ledger.admit(first)
    assert (admission.fresh, admission.ack_now, admission.held) == (first, [], 0)
    ledger.spooled(2, admission)
    assert ledger.commit(1) == []  # not the whole batch: nothing yet
    assert ledger.commit(2) == first
    assert ledger.commit(2) == []
    assert ledger.committed == 2


def test_a_copy_of_an_uncommitted_message_joins_its_batch() -> None:
    ledger: AckLedger[Delivery] = AckLedger()
    ledger.spooled(2, ledger.admit(deliveries("a", "b")))
    copy = deliveries("b", redelivered=True)
    admission = ledger.admit(copy)
    assert (admission.fresh, admission.held) == ([], 1)
    assert copy[0] in ledger.commit(2)


def test_a_copy_of_a_committed_message_is_acknowledged_at_once() -> None:
    ledger: AckLedger[Delivery] = AckLedger()
    ledger.spooled(1, ledger.admit(deliveries("a")))
    ledger.commit(1)
    copy = deliveries("a")
    assert ledger.admit(copy).ack_now == copy


def test_one_id_twice_in_a_take_is_spooled_once_and_acknowledged_twice() -> None:
    ledger: AckLedger[Delivery] = AckLedger()
    both = deliveries("a", "a")
    admission = ledger.admit(both)
    assert (admission.fresh, admission.copies) == ([both[0]], [both[1]])
    assert admission.fresh_ids == ["a"]
    ledger.spooled(1, admission)
    assert ledger.commit(1) == both


def test_messages_without_an_id_are_always_fresh() -> None:
    ledger: AckLedger[Delivery] = AckLedger()
    ledger.spooled(1, ledger.admit(deliveries(None)))
    admission = ledger.admit(deliveries(None))
    assert (len(admission.fresh), admission.fresh_ids) == (1, [None])


def test_restored_ids_catch_redeliveries_after_a_restart() -> None:
    ledger: AckLedger[Delivery] = AckLedger(committed=2)
    ledger.restore(spooled=[(4, ["c", "d"])], committed=[(2, ["a", "b"])])
    admission = ledger.admit(deliveries("a", "c", "e"))
    assert [d.message_id for d in admission.ack_now] == ["a"]
    assert admission.held == 1
    assert [d.message_id for d in admission.fresh] == ["e"]
    assert [d.message_id for d in ledger.commit(4)] == ["c"]


def test_committed_ids_are_forgotten_beyond_the_retention() -> None:
    ledger: AckLedger[Delivery] = AckLedger(retained=2)
    for end, ids in ((2, ("a", "b")), (4, ("c", "d")), (6, ("e", "f"))):
        ledger.spooled(end, ledger.admit(deliveries(*ids)))
        ledger.commit(end)
    assert [d.message_id for d in ledger.admit(deliveries("a", "c", "e")).fresh] == ["a", "c"]
    assert "known_ids=2" in repr(ledger)


# --- the driver: spool before offsets, ack after commits ---------------------------------------


def test_latest_spools_the_batch_before_reporting_its_end(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b", "c"))
    assert driver.initial() == 0
    end = driver.latest(0, 3)
    assert end == 3
    # What Spark will read is on disk now, in a file a fresh process finds.
    assert Spool(driver.spool.url).state().batches == (SpoolBatch(0, 3),)
    # A normal trigger with a full batch buffered takes it without waiting for the broker.
    assert consumer.takes == [(3, 0.0)]


def test_nothing_is_acknowledged_before_spark_commits(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    first = deliveries("a", "b")
    consumer.push(*first)
    driver.latest(0, None)
    driver.planned(0, 2)
    assert [d.acks for d in first] == [0, 0]
    driver.commit(2)
    assert [d.acks for d in first] == [1, 1]
    assert driver.spool.state().batches == ()


def test_the_next_plan_acknowledges_up_to_its_start(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    first = deliveries("a", "b")
    consumer.push(*first)
    driver.latest(0, None)
    # The stream went idle: Spark commits batch 0 only when it plans batch 1, and an idle
    # stream plans nothing. The start offset of its next latestOffset says batch 0 committed.
    assert driver.latest(2, None) == 2
    assert [d.acks for d in first] == [1, 1]


def test_a_plan_asks_for_the_acks_confirmation_and_the_next_plan_waits_for_it(
    tmp_path: Path,
) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    # Full batches buffered (limits 2, then 1): each plan takes once.
    consumer.push(*deliveries("a", "b"))
    assert driver.latest(0, 2) == 2
    consumer.push(*deliveries("c"))
    consumer.calls.clear()
    # Batch 0's two acks are asked for first, the broker confirms them while batch 1 is
    # taken, spooled and run: the plan of batch 1 does not wait for the answer.
    assert driver.latest(2, 1) == 3
    assert consumer.calls == ["ask 2", "take"]
    # Spark's own commit of batch 0 afterwards finds nothing left to acknowledge.
    consumer.calls.clear()
    driver.commit(2)
    assert consumer.calls == []
    # The next plan takes the answer first, then acknowledges batch 1.
    consumer.push(*deliveries("d"))
    assert driver.latest(3, 1) == 4
    assert consumer.calls == ["wait 2", "ask 1", "take"]


def test_a_plan_with_no_batch_after_it_waits_for_the_confirmation(tmp_path: Path) -> None:
    # Idle (or AvailableNow's end): Spark may end this process after the call.
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b"))
    assert driver.latest(0, 10) == 2
    consumer.calls.clear()
    assert driver.latest(2, 10) == 2
    assert consumer.calls == ["ask 2", "wait 2"]


def test_trigger_once_waits_for_the_confirmation_in_its_only_plan(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b"))
    assert driver.latest(0, 10) == 2
    consumer.push(*deliveries("c"))
    consumer.calls.clear()
    # ReadAllAvailable (no limit): Spark runs this batch and may stop.
    assert driver.latest(2, None) == 3
    assert consumer.calls[0] == "ask 2"
    assert consumer.calls[-1] == "wait 2"


def test_close_waits_for_the_confirmation_a_plan_left(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b"))
    driver.latest(0, 10)
    consumer.push(*deliveries("c"))
    driver.latest(2, 10)
    consumer.calls.clear()
    driver.close()
    assert consumer.calls == ["wait 2"]
    assert consumer.closed


def test_without_a_start_offset_the_planned_batch_is_taken_as_committed(tmp_path: Path) -> None:
    # PySpark 4.0 / 4.1: latestOffset() gets no start; Spark plans a batch only after the
    # one before it committed, so the batch whose partitions were planned here is done.
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    first = deliveries("a", "b")
    consumer.push(*first)
    assert driver.latest(None, None) == 2
    assert driver.latest(None, None) == 2
    assert [d.acks for d in first] == [0, 0]  # reported, never planned: not committed
    driver.planned(0, 2)
    consumer.push(*deliveries("c"))
    assert driver.latest(None, None) == 3
    assert [d.acks for d in first] == [1, 1]


def test_the_limit_bounds_a_batch(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries(*"abcde"))
    assert driver.latest(0, 2) == 2
    assert driver.latest(2, 2) == 4
    assert driver.latest(4, 2) == 5


def test_redeliveries_of_spooled_messages_are_not_spooled_again(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b"))
    driver.latest(0, None)
    # A fail-over: the old broker redelivers both; one new message comes too.
    copies = deliveries("a", "b", redelivered=True)
    consumer.push(*copies, *deliveries("c"))
    assert driver.latest(0, None) == 2  # batch 0..1 was spooled, never planned: as it is
    assert driver.latest(2, None) == 3
    assert [d.acks for d in copies] == [1, 1]  # acked with batch 0..1, committed by start=2
    table = driver.spool.state().batches
    assert table == (SpoolBatch(2, 3),)


def test_a_restarted_driver_resumes_from_the_spool(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    consumer.push(*deliveries("a", "b"))
    driver.latest(0, None)
    consumer.push(*deliveries("c"))
    driver.latest(2, None)  # commits 0..1 (acks "a", "b"), spools 2..2
    # The driver is SIGKILLed: its connection dies with "c" unacknowledged (and, as it
    # happens, the ACK of "b" never reached the broker).
    restarted_consumer = ScriptedConsumer()
    restarted = driver_on(tmp_path, restarted_consumer)
    assert (restarted.position, restarted.initial()) == (3, 2)
    copies = deliveries("b", "c", redelivered=True)
    restarted_consumer.push(*copies, *deliveries("d"))
    # Spark replays batch 2..2 from its offset log, then plans the next one.
    assert restarted.planned(2, 3) == [SpoolBatch(2, 3)]
    assert restarted.latest(3, None) == 4
    assert copies[0].acks == 1  # committed before the kill: acknowledged at once
    assert copies[1].acks == 1  # its batch (2..2) is committed by start=3
    rows = [b.start for b in restarted.spool.state().batches]
    assert rows == [3]  # only "d" is new


def test_an_offset_beyond_the_spool_is_a_clear_error(tmp_path: Path) -> None:
    driver = driver_on(tmp_path, ScriptedConsumer())
    with pytest.raises(SpoolGap, match="checkpoint is at offset 7"):
        driver.latest(7, None)
    with pytest.raises(SpoolGap, match="only reaches 0"):
        driver.planned(0, 5)


def test_nothing_buffered_reports_the_same_position(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_on(tmp_path, consumer)
    assert driver.latest(0, 10) == 0
    assert driver.spool.state().batches == ()
    driver.close()
    assert consumer.closed


# --- the consumer on a fake broker group -------------------------------------------------------


@pytest.fixture
def fake() -> tuple[FakeConnector, FakeClock]:
    clock = FakeClock()
    return FakeConnector(clock=clock), clock


def consumer_on(fake: tuple[FakeConnector, FakeClock], tmp_path: Path, **extra: str) -> Consumer:
    connector, clock = fake
    return Consumer(
        source(tmp_path, **extra),
        connection_factory=lambda options: FailoverConnection(
            options.uri, connector=connector, clock=clock
        ),
        clock=clock,
    )


def test_the_consumer_subscribes_with_client_acks_prefetch_and_selector(
    fake: tuple[FakeConnector, FakeClock], tmp_path: Path
) -> None:
    consumer = consumer_on(
        fake, tmp_path, destination="/queue/x,/queue/y", selector="n > 1", maxMessagesPerBatch="50"
    )
    try:
        consumer.start()
        specs = list(fake[0].session("a:61613").subscriptions.values())
        assert [s.destination for s in specs] == ["/queue/x", "/queue/y"]
        assert {s.ack for s in specs} == {"client"}  # cumulative: _frontier
        headers = dict(specs[0].headers)
        assert headers["selector"] == "n > 1"
        assert headers["activemq.prefetchSize"] == headers["prefetch-count"] == "100"
    finally:
        consumer.close()


def test_take_returns_deliveries_in_order_and_acks_reach_their_broker(
    fake: tuple[FakeConnector, FakeClock], tmp_path: Path
) -> None:
    consumer = consumer_on(fake, tmp_path)
    try:
        consumer.start()
        session = fake[0].session("a:61613")
        (subscription,) = session.subscriptions
        taken = []
        for number in range(3):
            session.deliver(subscription, f"m{number}".encode(), message_id=f"ID:{number}")
            # The fake clock never moves: take() waits for the delivery, not for time.
            taken += consumer.take(None, 60.0)
        assert [m.body for m in taken] == [b"m0", b"m1", b"m2"]
        taken[1].ack()
        assert [r.message_id for r in session.acks] == ["ID:1"]
    finally:
        consumer.close()


def test_take_waits_the_receive_timeout_on_the_clock(tmp_path: Path) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    consumer = Consumer(
        source(tmp_path),
        connection_factory=lambda options: FailoverConnection(
            options.uri, connector=connector, clock=clock
        ),
        clock=clock,
    )
    try:
        consumer.start()
        before = clock.monotonic()
        assert consumer.take(10, 2.5) == []
        assert clock.monotonic() - before == pytest.approx(2.5)
    finally:
        consumer.close()


def test_a_refused_subscription_fails_the_start(tmp_path: Path) -> None:
    connector = FakeConnector(clock=FakeClock(), refused_destinations=["/queue/in"])
    consumer = Consumer(
        source(tmp_path),
        connection_factory=lambda options: FailoverConnection(options.uri, connector=connector),
    )
    try:
        with pytest.raises(SubscriptionRefused):
            consumer.start()
    finally:
        consumer.close()


def test_a_connection_that_gave_up_fails_the_next_take(tmp_path: Path) -> None:
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    consumer = Consumer(
        source(tmp_path, uri=f"{URI}&maxReconnectAttempts=1"),
        connection_factory=lambda options: FailoverConnection(
            options.uri, connector=connector, clock=clock
        ),
        clock=clock,
    )
    try:
        consumer.start()
        events = EventRecorder()
        consumer.connection.add_listener(events)
        connector.behave("a:61613", "refuse")
        connector.behave("b:61613", "refuse")
        connector.session("a:61613").kill()
        events.wait_for(GaveUp)
        with pytest.raises(AllBrokersFailed, match="gave up"):
            consumer.take(1, 1.0)
        # Also when nothing is taken (a batch held back by minMessagesPerBatch).
        with pytest.raises(AllBrokersFailed, match="gave up"):
            consumer.check()
    finally:
        consumer.close()


# --- the reader Spark sees ---------------------------------------------------------------------


def test_the_schema_matches_what_spark_expects_from_arrow(tmp_path: Path) -> None:
    options = source(tmp_path, bodyAsString="true")
    reader = stream_reader(
        {
            "uri": URI,
            "destination": "/queue/in",
            "checkpointlocation": str(tmp_path),
            "bodyasstring": "true",
        },
        source_schema(options),
    )
    spool = Spool.open(str(tmp_path), IDENTITY)
    spool.write(0, spool_table([Delivery("a", body=b"caf\xc3\xa9"), Delivery("b", body=b"\xff")]))
    (batch,) = reader.read(SpoolPartition(spool.url, SpoolBatch(0, 2).name, 0, 2))
    assert batch.schema.equals(to_arrow_schema(source_schema(options), timezone="UTC"))
    assert batch.column("body_string").to_pylist() == ["café", "\ufffd"]


def test_a_partition_reads_only_its_offsets(tmp_path: Path) -> None:
    reader = stream_reader(
        {"uri": URI, "destination": "/queue/in", "checkpointlocation": str(tmp_path)},
        source_schema(source(tmp_path)),
    )
    spool = Spool.open(str(tmp_path), IDENTITY)
    spool.write(10, spool_table(deliveries(*"abcd")))
    rows = pa.Table.from_batches(
        list(reader.read(SpoolPartition(spool.url, SpoolBatch(10, 14).name, 11, 13)))
    ).to_pylist()
    assert [(r["offset"], r["message_id"]) for r in rows] == [(11, "b"), (12, "c")]
    assert "body_string" not in rows[0]


def test_the_reader_pickles_without_its_driver(tmp_path: Path) -> None:
    reader = stream_reader(
        {"uri": URI, "destination": "/queue/in", "checkpointlocation": str(tmp_path)},
        source_schema(source(tmp_path)),
    )
    reader._driver = SourceDriver.__new__(SourceDriver)  # stands for a running one
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._driver is None
    assert copy.options == reader.options


def test_latest_offset_takes_both_spark_signatures() -> None:
    # 4.2+ reads the parameters to decide on read limits; 4.0 / 4.1 call it with none.
    parameters = inspect.signature(FailoverStreamReader.latestOffset).parameters
    assert list(parameters) == ["self", "start", "limit"]
    assert all(p.default is None for name, p in parameters.items() if name != "self")


def test_read_limits_from_spark() -> None:
    reader = FailoverStreamReader(
        source_options({"uri": URI, "destination": "/queue/in", "maxmessagesperbatch": "7"}),
        StructType(),
    )
    assert reader.getDefaultReadLimit() == ReadMaxRows(7)
    assert reader._limit(ReadMaxRows(3)) == 3
    assert reader._limit(ReadAllAvailable()) is None
    assert reader._limit(None) == 7


def test_the_source_needs_a_checkpoint_location(tmp_path: Path) -> None:
    with pytest.raises(SparkOptionError) as caught:
        stream_reader({"uri": URI, "destination": "/queue/in"}, source_schema(source(tmp_path)))
    assert "option checkpointLocation is required" in str(caught.value)
    assert caught.value.option == "checkpointLocation"


def test_a_selector_over_amqp_is_refused_by_name(tmp_path: Path) -> None:
    raw = {
        "uri": "failover:(amqp://a:5672)",
        "destination": "/queue/in",
        "checkpointlocation": str(tmp_path),
        "selector": "n > 1",
    }
    with pytest.raises(SparkOptionError, match="selector works over STOMP only"):
        stream_reader(raw, source_schema(source_options(raw)))


def test_a_different_schema_is_refused_with_the_one_to_give(tmp_path: Path) -> None:
    raw = {"uri": URI, "destination": "/queue/in", "checkpointlocation": str(tmp_path)}
    with pytest.raises(SparkOptionError, match="the schema is fixed") as caught:
        stream_reader(raw, StructType([StructField("body", StringType())]))
    assert "struct<body:binary,headers:map<string,string>" in str(caught.value)


def test_the_schema_grows_body_string_only_when_asked(tmp_path: Path) -> None:
    assert source_schema(source(tmp_path)).fieldNames() == [
        "body",
        "headers",
        "destination",
        "message_id",
        "timestamp",
        "redelivered",
        "broker",
        "offset",
    ]
    assert "body_string" in source_schema(source(tmp_path, bodyAsString="true")).fieldNames()


@pytest.mark.parametrize(
    ("query", "drains"),
    [("", False), ("?consumer.drainOnStart=false", False), ("?consumer.drainOnStart=true", True)],
)
def test_the_sources_uri_says_whether_it_drains_the_other_members_at_start(
    query: str, drains: bool
) -> None:
    # A restarted driver starts on one member; what the killed one was delivered on another
    # (a network of brokers) stays there unless the new connection drains it.
    options = source_options(
        {
            "uri": f"failover:(stomp://a:61613,stomp://b:61613){query}",
            "destination": "/queue/q",
            "checkpointLocation": "/tmp/unused",
        }
    )
    connection = open_connection(options)
    try:
        assert connection.options.drain_on_start is drains
    finally:
        connection.close()
