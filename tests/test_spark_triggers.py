"""The Spark source's triggers, rate options and lag, without Spark running.

The driver runs over the scripted consumer of ``test_spark_source_pure`` and a spool in a
temporary directory, on a fake clock; the queue depth is a scripted answer.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from failover_client import ConnectionFailure, FailoverConnection, Message
from failover_client.spark import SparkOptionError, source_options
from failover_client.spark._consumer import Consumer
from failover_client.spark._depth import (
    QueueDepth,
    _parsed,
    answers_statistics,
    statistics_queue,
)
from failover_client.spark._driver import RECONNECT_WAIT, SourceDriver
from failover_client.spark._pacing import FILL_GAP, FILL_WITHIN
from failover_client.spark._source import FailoverStreamReader, source_schema
from failover_client.spark._spool import Spool
from failover_client.testing import FakeClock, FakeConnector
from tests.test_spark_source_pure import IDENTITY, URI, Delivery, Inline, ScriptedConsumer


class ActiveMQConsumer(ScriptedConsumer):
    """A scripted consumer whose broker calls itself ActiveMQ Classic."""

    def product(self) -> str | None:
        return "ActiveMQ/5.17.6"


class ScriptedDepth:
    """Answers the queue depth the test sets; counts the questions."""

    def __init__(self, depth: int | None) -> None:
        self.depth = depth
        self.asked = 0
        self.requested = 0

    def ask(self, timeout: float) -> int | None:
        self.asked += 1
        return self.depth

    def request(self) -> None:
        self.requested += 1

    def latest(self) -> int | None:
        return self.depth


def options(tmp_path: Path, **extra: str):
    return source_options(
        {
            "uri": URI,
            "destination": "/queue/in",
            "checkpointLocation": str(tmp_path / "checkpoint"),
            **extra,
        }
    )


def driver_with(
    tmp_path: Path,
    consumer: ScriptedConsumer,
    *,
    clock: FakeClock | None = None,
    depth: ScriptedDepth | None = None,
    **extra: str,
) -> SourceDriver:
    spool = Spool.open(str(tmp_path / "checkpoint"), IDENTITY)
    return SourceDriver(
        options(tmp_path, **extra),
        spool,
        consumer,  # type: ignore[arg-type]
        depth=depth,  # type: ignore[arg-type]
        clock=clock or FakeClock(),
        acker=Inline(),
    )


def numbered(count: int, *, start: int = 0, size: int = 1) -> list[Delivery]:
    return [Delivery(f"id-{n}", body=b"x" * size) for n in range(start, start + count)]


# --- an idle trigger does not wait ------------------------------------------------------------


def test_an_idle_trigger_returns_at_once_without_waiting_for_the_broker(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer, receiveTimeout="30s")
    assert driver.latest(0, 100) == 0
    assert driver.latest(0, 100) == 0
    assert consumer.takes == []  # nothing buffered: not even a look
    consumer.push(*numbered(100))
    assert driver.latest(0, 100) == 100
    assert consumer.takes == [(100, 0.0)]  # a full batch buffered: nothing to wait for


def test_a_batch_short_of_its_limit_takes_what_the_broker_is_still_sending(
    tmp_path: Path,
) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer, receiveTimeout="30s")
    consumer.push(*numbered(1))
    assert driver.latest(0, 100) == 1
    # Each further take waits at most FILL_GAP for a delivery; a quiet one ends the batch.
    assert consumer.takes == [(100, FILL_GAP), (99, FILL_GAP)]


class Trickle(ScriptedConsumer):
    """A broker that delivers one message half a fill gap after each take asked for more."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def take(
        self,
        limit: int | None,
        timeout: float,
        max_bytes: int | None = None,
        *,
        whole: bool = True,
    ) -> list[Delivery]:
        if not self.queued:
            self.clock.advance(timeout / 2)
            self.push(*numbered(1, start=len(self.takes) + 1000))
        return super().take(limit, timeout, max_bytes, whole=whole)


def test_a_trickle_fills_a_batch_for_fill_within_at_most(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = Trickle(clock)
    driver = driver_with(tmp_path, consumer, clock=clock, receiveTimeout="30s")
    consumer.push(*numbered(1))
    end = driver.latest(0, 1000)
    # Never quiet for FILL_GAP, so FILL_WITHIN ends the batch, well short of its limit.
    assert 2 <= end < 1000
    waited = sum(timeout for _, timeout in consumer.takes[1:]) / 2
    assert waited == pytest.approx(FILL_WITHIN, abs=FILL_GAP)


# --- rate control -----------------------------------------------------------------------------


def test_max_bytes_per_batch_bounds_the_bodies_and_a_large_message_goes_alone(
    tmp_path: Path,
) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer, maxBytesPerBatch="250")
    consumer.push(*numbered(3, size=100), Delivery("big", body=b"y" * 1000), *numbered(1, start=3))
    assert driver.latest(0, 100) == 2  # 200 bytes; a third would be 300
    assert driver.latest(2, 100) == 3  # the next does not fit beside it
    assert driver.latest(3, 100) == 4  # 1,000 bytes, alone: a batch always moves
    assert driver.latest(4, 100) == 5


def test_min_messages_hold_a_batch_back_until_enough_arrived(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = ScriptedConsumer()
    driver = driver_with(
        tmp_path, consumer, clock=clock, minMessagesPerBatch="5", maxBatchDelay="10s"
    )
    consumer.push(*numbered(3))
    assert driver.latest(0, 100) == 0
    consumer.push(*numbered(2, start=3))
    assert driver.latest(0, 100) == 5


def test_max_batch_delay_releases_a_small_batch(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = ScriptedConsumer()
    driver = driver_with(
        tmp_path, consumer, clock=clock, minMessagesPerBatch="5", maxBatchDelay="10s"
    )
    consumer.push(*numbered(2))
    clock.advance(9.0)
    assert driver.latest(0, 100) == 0
    clock.advance(1.0)
    assert driver.latest(0, 100) == 2
    # The delay counts from the last batch again.
    consumer.push(*numbered(1, start=2))
    clock.advance(5.0)
    assert driver.latest(2, 100) == 2


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"maxBytesPerBatch": "0"}, "maxBytesPerBatch"),
        ({"maxBytesPerBatch": "lots"}, "maxBytesPerBatch"),
        ({"minMessagesPerBatch": "-1"}, "minMessagesPerBatch"),
        ({"minMessagesPerBatch": "20001", "maxMessagesPerBatch": "10000"}, "minMessagesPerBatch"),
        ({"maxBatchDelay": "5s"}, "maxBatchDelay"),
        ({"minMessagesPerBatch": "5", "maxBatchDelay": "soon"}, "maxBatchDelay"),
        ({"queueDepth": "sometimes"}, "queueDepth"),
    ],
)
def test_bad_rate_options_fail_naming_the_option(
    tmp_path: Path, extra: dict[str, str], named: str
) -> None:
    with pytest.raises(SparkOptionError) as caught:
        options(tmp_path, **extra)
    assert caught.value.option == named
    assert named in str(caught.value)


def test_a_misspelt_rate_option_gets_the_nearest_name(tmp_path: Path) -> None:
    with pytest.raises(SparkOptionError, match="did you mean maxBytesPerBatch"):
        options(tmp_path, maxBytePerBatch="100")


def test_rate_options_parse(tmp_path: Path) -> None:
    parsed = options(
        tmp_path,
        maxBytesPerBatch="1048576",
        minMessagesPerBatch="100",
        maxBatchDelay="2m",
        queueDepth="off",
    )
    assert (parsed.max_bytes_per_batch, parsed.min_messages_per_batch) == (1_048_576, 100)
    assert (parsed.max_batch_delay, parsed.queue_depth) == (120.0, False)
    assert options(tmp_path).max_batch_delay == 15 * 60.0


# --- Trigger.AvailableNow and Once ------------------------------------------------------------


def test_available_now_drains_to_the_queue_depth_in_bounded_steps(tmp_path: Path) -> None:
    consumer = ActiveMQConsumer()
    depth = ScriptedDepth(25)
    driver = driver_with(tmp_path, consumer, depth=depth)
    consumer.push(*numbered(25))
    driver.prepare_available_now()
    assert depth.asked == 1
    ends = [driver.latest(0, 10)]
    while (end := driver.latest(ends[-1], 10)) != ends[-1]:
        ends.append(end)
    assert ends == [10, 20, 25]
    # Arrived after the start: not this run's.
    consumer.push(*numbered(5, start=25))
    assert driver.latest(25, 10) == 25
    assert consumer.buffered() == 5


def test_available_now_waits_for_the_broker_between_steps(tmp_path: Path) -> None:
    consumer = ActiveMQConsumer()
    driver = driver_with(tmp_path, consumer, depth=ScriptedDepth(4), receiveTimeout="3s")
    consumer.push(*numbered(4))
    driver.prepare_available_now()
    assert driver.latest(0, 10) == 4
    assert consumer.takes[0] == (4, 3.0)


def test_available_now_counts_what_waits_for_a_commit_as_spooled(tmp_path: Path) -> None:
    consumer = ActiveMQConsumer()
    depth = ScriptedDepth(None)
    driver = driver_with(tmp_path, consumer, depth=depth)
    consumer.push(*numbered(6))
    assert driver.latest(0, 6) == 6  # spooled, not committed: still on the broker
    consumer.push(*numbered(4, start=6))
    depth.depth = 10
    driver.prepare_available_now()
    assert driver.latest(6, 100) == 10
    assert driver.latest(10, 100) == 10


def test_without_a_depth_available_now_drains_until_the_broker_is_quiet(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer)
    consumer.push(*numbered(15))
    driver.prepare_available_now()
    assert driver.latest(0, 10) == 10
    assert driver.latest(10, 10) == 15
    assert driver.latest(15, 10) == 15  # quiet for receiveTimeout: done
    consumer.push(*numbered(3, start=15))
    assert driver.latest(15, 10) == 15


def test_available_now_ends_at_once_on_an_empty_queue(tmp_path: Path) -> None:
    consumer = ActiveMQConsumer()
    driver = driver_with(tmp_path, consumer, depth=ScriptedDepth(0))
    driver.prepare_available_now()
    assert driver.latest(0, 10) == 0
    assert consumer.takes == []


def test_copies_do_not_end_available_now_early(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer)
    consumer.push(*numbered(2))
    assert driver.latest(0, 10) == 2
    driver.prepare_available_now()
    consumer.push(*numbered(2), *numbered(1, start=2))  # two copies of spooled ones, one new
    # Only copies in the first take: not quiet, and not an offset that stayed put either
    # (Spark would end the query on it): the step takes on.
    assert driver.latest(2, 2) == 3


class FailingOver(ActiveMQConsumer):
    """Down for the first ``down_takes`` takes of an empty buffer (each a quiet ``timeout``
    on the fake clock), then up, delivering ``after`` once it is back."""

    def __init__(self, clock: FakeClock, down_takes: int, after: list[Delivery]) -> None:
        super().__init__()
        self.clock = clock
        self.down_takes = down_takes
        self.after = after

    def connected(self) -> bool:
        return self.down_takes <= 0

    def take(
        self,
        limit: int | None,
        timeout: float,
        max_bytes: int | None = None,
        *,
        whole: bool = True,
    ) -> list[Delivery]:
        if self.down_takes > 0 and not self.queued:
            self.takes.append((limit, timeout))
            self.clock.advance(timeout)
            self.down_takes -= 1
            if self.down_takes == 0:
                self.push(*self.after)
            return []
        return super().take(limit, timeout, max_bytes, whole=whole)


def test_available_now_does_not_take_a_failover_for_the_end_of_the_queue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    consumer = FailingOver(clock, down_takes=3, after=numbered(4, start=6))
    driver = driver_with(tmp_path, consumer, clock=clock, depth=ScriptedDepth(10))
    consumer.push(*numbered(6))
    driver.prepare_available_now()
    assert driver.latest(0, 100) == 6
    # The broker's quiet while the connection is down is no end: the rest comes after it.
    assert driver.latest(6, 100) == 10
    # The 6; three quiet takes while down (the first ended the first batch); the 4.
    assert len(consumer.takes) == 1 + 3 + 1
    assert "the connection is reconnecting; the drain waits for it" in caplog.text
    assert driver.latest(10, 100) == 10


def test_a_drain_fails_the_query_when_the_connection_stays_down(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = FailingOver(clock, down_takes=10_000, after=[])
    driver = driver_with(tmp_path, consumer, clock=clock, depth=ScriptedDepth(10))
    consumer.push(*numbered(6))
    driver.prepare_available_now()
    assert driver.latest(0, 100) == 6
    with pytest.raises(ConnectionFailure) as caught:
        driver.latest(6, 100)
    text = str(caught.value)
    assert "stopped at offset 6, 4 short of 10" in text
    assert "reconnecting for 12" in text  # RECONNECT_WAIT, in receiveTimeout steps
    assert clock.monotonic() >= RECONNECT_WAIT


def test_trigger_once_waits_for_the_connection_too(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = FailingOver(clock, down_takes=2, after=numbered(3))
    driver = driver_with(tmp_path, consumer, clock=clock)
    assert driver.latest(0, None) == 3


def test_a_quiet_connected_broker_short_of_the_target_ends_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    consumer = ActiveMQConsumer()
    driver = driver_with(tmp_path, consumer, depth=ScriptedDepth(10))
    consumer.push(*numbered(7))
    driver.prepare_available_now()
    assert driver.latest(0, 100) == 7
    assert driver.latest(7, 100) == 7
    assert "ends at offset 7, 3 short of the target 10" in caplog.text
    assert driver.latest(7, 100) == 7
    assert caplog.text.count("short of the target") == 1


def test_read_all_available_takes_one_batch_of_everything_delivered(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()
    driver = driver_with(tmp_path, consumer, maxMessagesPerBatch="10", maxBytesPerBatch="5")
    consumer.push(*numbered(25, size=2))
    assert driver.latest(0, None) == 25


# --- lag --------------------------------------------------------------------------------------


def test_the_lag_report_says_what_the_source_knows(tmp_path: Path) -> None:
    consumer = ActiveMQConsumer()
    depth = ScriptedDepth(None)
    driver = driver_with(tmp_path, consumer, depth=depth)
    consumer.push(*numbered(10))
    driver.latest(0, 4)  # 4 spooled, 6 buffered
    report = driver.lag()
    assert report == {
        "position": 10,
        "spooled": 4,
        "committed": 0,
        "buffered": 6,
        "pendingCommit": 4,
        "acknowledged": 0,
    }
    depth.depth = 30  # 10 delivered, 20 more on the broker
    driver.latest(4, 4)  # commits 0..4, acknowledges them: the broker's depth drops by 4
    depth.depth = 26
    report = driver.lag()
    assert report["brokerDepth"] == 26
    assert report["acknowledged"] == 4
    assert report["position"] == 8 + 2 + 20


def test_the_depth_is_asked_at_most_once_a_second(tmp_path: Path) -> None:
    clock = FakeClock()
    consumer = ActiveMQConsumer()
    depth = ScriptedDepth(3)
    driver = driver_with(tmp_path, consumer, depth=depth, clock=clock)
    driver.lag()
    driver.lag()
    clock.advance(1.0)
    driver.lag()
    assert depth.requested == 2


def test_other_brokers_are_never_asked_for_statistics(tmp_path: Path) -> None:
    consumer = ScriptedConsumer()  # no product known
    depth = ScriptedDepth(3)
    driver = driver_with(tmp_path, consumer, depth=depth)
    assert "brokerDepth" not in driver.lag()
    driver.prepare_available_now()
    assert (depth.asked, depth.requested) == (0, 0)
    assert not answers_statistics("ActiveMQ-Artemis/2.31.2")
    assert not answers_statistics("RabbitMQ/3.10.0")
    assert answers_statistics("ActiveMQ/5.17.6")


def test_statistics_answers_and_destinations() -> None:
    body = json.dumps(
        {
            "map": {
                "entry": [
                    {"string": ["destinationName", "queue://orders"]},
                    {"string": "size", "long": 42},
                    {"string": "averageEnqueueTime", "double": 1.5},
                ]
            }
        }
    ).encode()
    assert _parsed(body) == ("queue://orders", 42)
    assert statistics_queue("/queue/orders") == "/queue/ActiveMQ.Statistics.Destination.orders"
    assert statistics_queue("/topic/prices") is None


def test_a_topic_has_no_depth_to_ask_for() -> None:
    connection = FailoverConnection(URI, connector=FakeConnector(clock=FakeClock()))
    assert not QueueDepth(connection, ["/queue/a", "/topic/b"]).possible
    assert QueueDepth(connection, ["/queue/a"]).possible
    assert QueueDepth(connection, ["/topic/b"]).ask(1.0) is None


# --- the consumer and the reader --------------------------------------------------------------


def test_the_consumer_bounds_bytes_and_keeps_a_batch_moving(tmp_path: Path) -> None:
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    consumer = Consumer(
        options(tmp_path),
        connection_factory=lambda o: FailoverConnection(o.uri, connector=connector, clock=clock),
        clock=clock,
    )
    all_in = threading.Event()
    arrive = consumer._arrive

    def counted(message: Message) -> None:
        arrive(message)
        if consumer.buffered() == 3:
            all_in.set()

    consumer._arrive = counted  # type: ignore[method-assign]
    try:
        consumer.start()
        session = connector.session("a:61613")
        (subscription,) = session.subscriptions
        for number, size in enumerate([50, 60, 500]):
            session.deliver(subscription, b"z" * size, message_id=f"ID:{number}")
        # The subscription's worker thread buffers them; the timeout only stops a broken run.
        assert all_in.wait(30.0)
        assert consumer.wait_delivery(0.0)
        assert [len(m.body) for m in consumer.take(None, 0.0, 100)] == [50]
        assert consumer.take(None, 0.0, 40, whole=False) == []
        assert [len(m.body) for m in consumer.take(None, 0.0, 100)] == [60]
        assert [len(m.body) for m in consumer.take(None, 0.0, 100)] == [500]
    finally:
        consumer.close()


def test_the_reader_implements_the_available_now_contract(tmp_path: Path) -> None:
    parsed = options(tmp_path)
    reader = FailoverStreamReader(parsed, source_schema(parsed))
    assert isinstance(reader, SupportsTriggerAvailableNow)
    assert callable(reader.reportLatestOffset)
