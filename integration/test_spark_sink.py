"""The Spark sink against real ActiveMQ brokers, in local mode and on a standalone cluster.

Every test runs twice: in ``local[2,4]`` and on a real standalone cluster (a master and two
workers from the PySpark install, executors in their own JVMs). Each deployment gets one
SparkSession for the whole module (tests are grouped by it), so the module costs two session
start-ups and one cluster start-up, not one per test.

What is checked is what a user relies on: every row arrives (drained from every broker, after
the killed one is restarted with its store), every copy of a row carries that row's id, the
query keeps running through a broker kill, a task that fails half-way through its partition is
retried without loss, and bad options fail the query at once with a short message.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, udf
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from failover_client import MESSAGE_ID_HEADER
from failover_client.spark import FORMAT, MARKER_DIRECTORY, foreach_batch_sink
from failover_client.testing.brokers import Cluster, ReceivedMessage, allocate_ports
from failover_client.testing.spark import (
    FailFirstAttempt,
    Tripwire,
)

pytestmark = pytest.mark.integration

ROWS = 50_000
PER_BATCH = 5_000
BATCHES = ROWS // PER_BATCH
WAIT = 240.0
"""Safety net for a hung query; every wait returns as soon as its condition holds."""


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark_each: SparkSession) -> SparkSession:
    """Local mode, then the standalone cluster (``spark_each``), the format registered."""
    return spark_each


class Progress(StreamingQueryListener):
    """Collects the batches a query committed; ``reached(n)`` waits for batch ``n``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.batches: dict[str, list[int]] = collections.defaultdict(list)
        self.ended: set[str] = set()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        with self._cond:
            self.batches[str(event.progress.id)].append(event.progress.batchId)
            self._cond.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self._cond:
            self.ended.add(str(event.id))
            self._cond.notify_all()

    def reached(self, query: StreamingQuery, batch: int) -> bool:
        """Wait until ``query`` committed ``batch`` (False if it ended or the wait ran out)."""
        key = str(query.id)

        def done() -> bool:
            return max(self.batches[key], default=-1) >= batch or key in self.ended

        with self._cond:
            self._cond.wait_for(done, WAIT)
            return max(self.batches[key], default=-1) >= batch


@pytest.fixture
def progress(spark: SparkSession) -> Iterator[Progress]:
    listener = Progress()
    spark.streams.addListener(listener)
    yield listener
    spark.streams.removeListener(listener)


def rate_stream(spark: SparkSession, rows: int = ROWS, per_batch: int = PER_BATCH) -> DataFrame:
    """``rows`` numbered rows, ``per_batch`` per micro-batch (batch k holds k*per_batch...)."""
    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", per_batch)
        .option("numPartitions", 2)
        .load()
        .where(col("value") < rows)
    )


def drain_all(cluster: Cluster, queue: str) -> list[ReceivedMessage]:
    """Everything ``queue`` holds on every broker (restarting a killed one, with its store)."""
    cluster.heal()
    found: list[ReceivedMessage] = []
    for broker in cluster:
        found += broker.drain(queue, timeout=120, idle=2.0)
    return found


def ids_by_row(messages: list[ReceivedMessage]) -> dict[str, set[str]]:
    ids: dict[str, set[str]] = collections.defaultdict(set)
    for message in messages:
        ids[message.text].add(message.headers[MESSAGE_ID_HEADER])
    return ids


# --- at-least-once through a broker kill ----------------------------------------------------


def test_stream_keeps_every_row_through_a_broker_kill(
    spark: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    progress: Progress,
    tmp_path: Path,
) -> None:
    uri = activemq_cluster.failover_uri("stomp", {"randomize": False})
    # A task of batch 3 reaches this row, the test kills the broker every task writes to
    # (randomize=false: the first), and the task carries on.
    with Tripwire(lambda _: activemq_cluster[0].kill()) as wire:
        trip = udf(wire.at(3 * PER_BATCH + PER_BATCH // 3), "string", useArrow=False)
        rows = rate_stream(spark).select(trip(col("value").cast("string")).alias("value"))
        query = (
            rows.writeStream.format(FORMAT)
            .option("uri", uri)
            .option("destination", unique_queue)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            assert progress.reached(query, BATCHES - 1), query.exception()
            assert wire.fired.is_set()
            assert query.isActive
            assert query.exception() is None
        finally:
            query.stop()

    messages = drain_all(activemq_cluster, unique_queue)
    ids = ids_by_row(messages)
    assert set(ids) == {str(v) for v in range(ROWS)}
    # Every copy of a row carries that row's one id, and no two rows share an id.
    assert all(len(found) == 1 for found in ids.values())
    assert len({next(iter(found)) for found in ids.values()}) == ROWS
    # The id names the query and the micro-batch the row was in.
    for value, found in ids.items():
        assert next(iter(found)).startswith(f"{query.id}-{int(value) // PER_BATCH}-")
    markers = sorted(p.name for p in (tmp_path / "checkpoint" / MARKER_DIRECTORY).iterdir())
    assert {f"batch-{b}.json" for b in range(BATCHES)} <= set(markers)


def test_task_failing_mid_partition_is_retried_without_loss(
    spark: SparkSession, activemq_cluster: Cluster, unique_queue: str
) -> None:
    rows = 6_000
    # Partition 0 holds 0..2999; on its first attempt the UDF fails at row 2000 (the sink
    # may have sent some rows before it, or none: the UDF runs ahead of the sink). The retry
    # sends all 3000. (A bad *row* no longer fails its task: see test_spark_bad_rows.)
    fail_once = udf(FailFirstAttempt("2000"), "string", useArrow=False)
    frame = spark.range(0, rows, 1, 2).select(
        col("id").cast("string").alias("value"),
        fail_once(col("id").cast("string")).alias("id"),
    )
    (
        frame.write.format(FORMAT)
        .option("uri", activemq_cluster.failover_uri("stomp"))
        .option("destination", unique_queue)
        .option("messageIdColumn", "id")
        .mode("append")
        .save()
    )
    messages = drain_all(activemq_cluster, unique_queue)
    ids = ids_by_row(messages)
    assert set(ids) == {str(v) for v in range(rows)}
    assert all(found == {value} for value, found in ids.items())
    copies = collections.Counter(m.text for m in messages)
    twice = {int(value) for value, count in copies.items() if count > 1}
    print(f"rows the failed attempt had sent before row 2000: {len(twice)}")
    # What the failed attempt sent before the failure came again from the retry, nothing after.
    assert twice <= set(range(2000))


def test_foreach_batch_helper_sends_every_batch(
    spark: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    progress: Progress,
    tmp_path: Path,
) -> None:
    rows, per_batch = 3_000, 1_000
    sink = foreach_batch_sink(
        activemq_cluster.failover_uri("stomp"),
        destination=unique_queue,
        checkpointLocation=str(tmp_path / "markers"),
    )
    frame = rate_stream(spark, rows, per_batch).select(col("value").cast("string"))
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        assert progress.reached(query, rows // per_batch - 1), query.exception()
    finally:
        query.stop()
    ids = ids_by_row(drain_all(activemq_cluster, unique_queue))
    assert set(ids) == {str(v) for v in range(rows)}
    for value, found in ids.items():
        assert next(iter(found)).startswith(f"{query.id}-{int(value) // per_batch}-")
    markers = {p.name for p in (tmp_path / "markers" / MARKER_DIRECTORY).iterdir()}
    assert {f"batch-{b}.json" for b in range(rows // per_batch)} <= markers


# --- bad options fail at once, briefly --------------------------------------------------------


def short(error: BaseException, reason: str) -> str:
    """The error's text, once ``reason`` is in its first lines and the whole is short.

    PySpark 4.1+ shows a failed task's Python traceback and the query's summary (about 20
    lines); 4.0 adds the executor's JVM stack (about 30 more). Neither is the wall of py4j
    frames a user would otherwise dig through, and the reason comes first in both.
    """
    text = str(error)
    lines = text.splitlines()
    assert len(lines) <= 60, text
    assert any(reason in line for line in lines[:10]), text
    return text


def failed_stream(frame: DataFrame, tmp_path: Path, reason: str, **options: str) -> str:
    """Start a streaming query with ``options``; return the error it ends with (see short)."""
    writer = frame.writeStream.format(FORMAT).option(
        "checkpointLocation", str(tmp_path / "checkpoint")
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    try:
        with pytest.raises(PySparkException) as caught:
            query.awaitTermination(WAIT)
    finally:
        query.stop()
    return short(caught.value, reason)


def test_missing_uri_fails_the_stream_at_start(spark: SparkSession, tmp_path: Path) -> None:
    reason = "failover sink: option uri is required"
    failed_stream(rate_stream(spark, 10, 10), tmp_path, reason, destination="/queue/x")


def test_unknown_option_is_named_with_the_valid_ones(
    spark: SparkSession, activemq_cluster: Cluster
) -> None:
    with pytest.raises(PySparkException) as caught:
        (
            spark.range(3)
            .selectExpr("cast(id as string) as value")
            .write.format(FORMAT)
            .option("uri", activemq_cluster.failover_uri())
            .option("destination", "/queue/x")
            .option("bodyColum", "value")
            .mode("append")
            .save()
        )
    text = short(caught.value, "unknown option 'bodycolum' (did you mean bodyColumn?)")
    assert "valid options: uri, destination" in text


def test_wrong_column_type_names_the_column_and_a_cast(
    spark: SparkSession, activemq_cluster: Cluster, tmp_path: Path
) -> None:
    text = failed_stream(
        rate_stream(spark, 10, 10),
        tmp_path,
        "option bodyColumn: column 'value' is bigint, must be string or binary",
        uri=activemq_cluster.failover_uri(),
        destination="/queue/x",
    )
    assert "cast('string')" in text


def test_unreachable_brokers_fail_the_first_batch(spark: SparkSession, tmp_path: Path) -> None:
    ports = allocate_ports(2)  # free: nothing listens there
    uri = f"failover:(stomp://127.0.0.1:{ports[0]},stomp://127.0.0.1:{ports[1]})"
    frame = rate_stream(spark, 10, 10).select(col("value").cast("string"))
    text = failed_stream(
        frame,
        tmp_path,
        "AllBrokersFailed: gave up after 1 reconnect attempt(s)",
        uri=f"{uri}?maxReconnectAttempts=1",
        destination="/queue/x",
    )
    assert f"127.0.0.1:{ports[0]}: connection refused" in text
