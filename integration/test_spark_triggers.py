"""The Spark source's triggers, rate control and lag against real ActiveMQ brokers."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from failover_client import FailoverConnection
from failover_client.spark import FORMAT, register
from failover_client.spark._depth import QueueDepth
from failover_client.testing.brokers import Cluster
from failover_client.testing.brokers._activemq import LocalActiveMQ

pytestmark = pytest.mark.integration


def test_activemq_statistics_tell_the_queue_depth(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"m-{n}" for n in range(25)])
    with FailoverConnection(f"failover:({broker.uri()})") as connection:
        depth = QueueDepth(connection, [unique_queue])
        assert depth.ask(10.0) == 25
        broker.send(unique_queue, [f"n-{n}" for n in range(5)])
        assert depth.ask(10.0) == 30


# --- in a query -------------------------------------------------------------------------------

BACKLOG = 30_000
STEP = 5_000
WAIT = 600.0
"""Safety net for a hung query; the query ends by itself well before."""


@pytest.fixture
def spark(spark_local: SparkSession) -> SparkSession:
    spark_local.sparkContext.setLogLevel("ERROR")
    register(spark_local)
    return spark_local


def read_stream(spark: SparkSession, uri: str, destination: str, checkpoint: Path, **extra: str):
    reader = (
        spark.readStream.format(FORMAT)
        .option("uri", uri)
        .option("destination", destination)
        .option("checkpointLocation", str(checkpoint))
        .option("bodyAsString", "true")
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load()


def available_now_into_memory(
    spark: SparkSession, uri: str, destination: str, tmp_path: Path, name: str, step: str
) -> StreamingQuery:
    """An AvailableNow query from ``destination`` into the memory table ``name``."""
    checkpoint = tmp_path / "checkpoint"
    frame = read_stream(spark, uri, destination, checkpoint, maxMessagesPerBatch=step)
    return (
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def rows_and_bodies(spark: SparkSession, name: str) -> Row:
    """The memory table's rows and distinct bodies."""
    return spark.sql(
        f"select count(*) as rows, count(distinct body_string) as bodies from {name}"
    ).collect()[0]


def test_available_now_drains_the_backlog_in_steps_and_stops(
    spark: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="failover_client.spark")  # its target, on failure
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"m-{n}" for n in range(BACKLOG)])
    name = f"available_now_{uuid.uuid4().hex[:8]}"
    query = available_now_into_memory(
        spark, f"failover:({broker.uri()})", unique_queue, tmp_path, name, str(STEP)
    )
    assert query.awaitTermination(WAIT), "the query did not stop by itself"
    assert query.exception() is None
    counts = rows_and_bodies(spark, name)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    print(f"batch sizes: {sizes}")
    # All of it, each once, in steps no larger than maxMessagesPerBatch.
    assert (counts.rows, counts.bodies) == (BACKLOG, BACKLOG)
    assert sum(sizes) == BACKLOG
    assert max(sizes) <= STEP
    assert len(sizes) >= BACKLOG // STEP
    # Every batch was acknowledged, the last one too: its commit returned only once the broker
    # confirmed the acknowledgements, before Spark ended the source's process. Nothing is left
    # for the next run to read again.
    left = settled_depth(broker, unique_queue, timeout=10.0)
    print(f"left on the broker after the run: {left} (last batch {sizes[-1]})")
    assert left == 0


def test_available_now_waits_out_a_broker_kill_and_finishes_the_backlog(
    spark: SparkSession, activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    """The broker is SIGKILLed mid-drain and back seconds later: four receiveTimeouts of
    silence, which must not read as the end of the queue, then redeliveries of spooled
    messages, which must not read as an offset that stopped moving."""
    broker = activemq_cluster[0]
    backlog = 12_000
    broker.send(unique_queue, [f"m-{n}" for n in range(backlog)])
    name = f"available_now_kill_{uuid.uuid4().hex[:8]}"
    uri = f"failover:({broker.uri()})?initialReconnectDelay=100"
    query = available_now_into_memory(spark, uri, unique_queue, tmp_path, name, "1000")
    deadline = time.monotonic() + WAIT
    while sum(p["numInputRows"] for p in query.recentProgress) < 2_000:
        assert query.isActive, f"the query ended before the kill: {query.exception()}"
        assert time.monotonic() < deadline, "the query made no progress"
        time.sleep(0.2)  # polling Spark's progress
    broker.kill()
    time.sleep(4.0)  # down for four receiveTimeouts
    broker.start()
    assert query.awaitTermination(WAIT), "the query did not stop by itself"
    assert query.exception() is None
    counts = rows_and_bodies(spark, name)
    # All of it, each once: the redelivered ones were spooled before and are dropped by id.
    assert (counts.rows, counts.bodies) == (backlog, backlog)
    assert settled_depth(broker, unique_queue, timeout=10.0) == 0


def settled_depth(broker: LocalActiveMQ, destination: str, timeout: float = 60.0) -> int | None:
    """The queue's depth once it reached 0, or the last one seen after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        depth = broker.queue_depth(destination.removeprefix("/queue/"))
        if depth == 0 or time.monotonic() > deadline:
            return depth
        time.sleep(0.5)  # the broker applies acknowledgements at its own pace


def test_available_now_leaves_later_messages_for_the_next_run(
    spark: SparkSession, activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"m-{n}" for n in range(300)])
    checkpoint = tmp_path / "checkpoint"

    def run() -> list[str]:
        bodies: list[str] = []

        def collect(batch: DataFrame, batch_id: int) -> None:
            bodies.extend(r.body_string for r in batch.collect())

        frame = read_stream(spark, f"failover:({broker.uri()})", unique_queue, checkpoint)
        query = (
            frame.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(WAIT), "the query did not stop by itself"
        assert query.exception() is None
        return bodies

    assert sorted(run()) == sorted(f"m-{n}" for n in range(300))
    broker.send(unique_queue, [f"later-{n}" for n in range(200)])
    # The second run starts from the first one's checkpoint: the new ones, each once.
    assert sorted(run()) == sorted(f"later-{n}" for n in range(200))


def test_the_progress_shows_the_lag_behind_the_broker(
    spark: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="failover_client.spark")  # depth requests, on failure
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"m-{n}" for n in range(3_000)])
    name = f"lag_{uuid.uuid4().hex[:8]}"
    checkpoint = tmp_path / "checkpoint"
    frame = read_stream(
        spark, f"failover:({broker.uri()})", unique_queue, checkpoint, maxMessagesPerBatch="200"
    )
    # A batch a second: the depth is asked without waiting (at most once a second) and comes
    # with a later progress, so the 3,000 messages keep the query behind for about 15 s.
    query = (
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + WAIT
    try:
        # Until a progress carries the broker's depth, the backlog is gone, or the query ended.
        while time.monotonic() < deadline and query.isActive:
            sources = [p["sources"][0] for p in query.recentProgress]
            latest = [json.loads(s["latestOffset"]) for s in sources if s["latestOffset"]]
            if any("brokerDepth" in offset for offset in latest):
                break
            if any(o["committed"] >= 3_000 for o in latest):
                break
            time.sleep(0.5)  # progresses come once a second
        sources = [p["sources"][0] for p in query.recentProgress]
    finally:
        query.stop()
    assert query.exception() is None
    for source in sources:
        print(source["latestOffset"], source["endOffset"])
    reports = [
        (json.loads(s["latestOffset"]), json.loads(s["endOffset"]))
        for s in sources
        if s["latestOffset"] and s["endOffset"]
    ]
    assert reports
    keys = {"position", "spooled", "buffered", "pendingCommit", "acknowledged", "committed"}
    assert all(keys <= set(latest) for latest, _ in reports)
    # The broker's depth came with a later progress (it is asked without waiting), and
    # while the backlog lasted the query was behind the broker by what it still held.
    behind = [
        latest["position"] - end["position"] for latest, end in reports if "brokerDepth" in latest
    ]
    assert behind
    assert max(behind) > 0
