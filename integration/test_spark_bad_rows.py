"""Bad rows in the Spark sink on real brokers: one poison row among 1,000.

A row a broker would refuse must cost that row, not the partition: the other 999 arrive once
per attempt that ran (Spark must not retry the task and re-send them), the query's error names
the row and the reason in its first line, and with ``onRowError=deadLetter:<destination>`` the
query keeps running and the row waits on that destination with the reason in a header.

Two kinds of poison: a header ActiveMQ cannot parse (``priority=high``, which the sink's checks
catch before sending), and a send RabbitMQ refuses by closing the connection (an exchange that
does not exist: the connection quarantines the frame as poison after two fail-overs, and the
sink takes the broker's words into the error).
"""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from failover_client import MESSAGE_ID_HEADER
from failover_client.spark import FORMAT
from failover_client.spark._rowerrors import ORIGINAL_DESTINATION_HEADER, ROW_ERROR_HEADER
from failover_client.testing.brokers import Cluster, ReceivedMessage
from integration.test_failover_common import durable_queue, failover_uri, send_destination

pytestmark = pytest.mark.integration

ROWS = 1_000
POISON = 500
WAIT = 240.0
"""Safety net for a hung query; every wait returns as soon as its condition holds."""


@pytest.fixture(scope="module")
def spark(spark_each: SparkSession) -> SparkSession:
    """Local mode (``local[2,4]``: 4 attempts per task), then the standalone cluster."""
    return spark_each


def rows(spark: SparkSession, headers: Column | None = None, to: Column | None = None) -> DataFrame:
    """``ROWS`` numbered rows in one micro-batch, over 2 partitions."""
    frame = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS)
        .option("numPartitions", 2)
        .load()
        .where(F.col("value") < ROWS)
    )
    columns = [F.col("value").cast("string").alias("value")]
    if headers is not None:
        columns.append(headers.alias("headers"))
    if to is not None:
        columns.append(to.alias("to"))
    return frame.select(*columns)


def poison_header() -> Column:
    return F.when(
        F.col("value") == POISON, F.create_map(F.lit("priority"), F.lit("high"))
    ).otherwise(F.create_map(F.lit("priority"), F.lit("4")))


def run(frame: DataFrame, tmp_path: Path, **options: str) -> tuple[str | None, bool]:
    """Run the query until it failed or committed batch 1; (its error, whether it is active).

    The input has its 1,000 rows in batch 0; batch 1 is empty but shows the query went on.
    """
    writer = frame.writeStream.format(FORMAT).option(
        "checkpointLocation", str(tmp_path / "checkpoint")
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            try:
                if query.awaitTermination(1.0):  # each wait ends after a second
                    return None, False
            except PySparkException as exc:
                return str(exc), False
            progress = query.lastProgress
            if progress is not None and progress["batchId"] >= 1:
                return None, query.isActive
        raise AssertionError(f"the query neither failed nor went on within {WAIT} s")
    finally:
        query.stop()


def reason_line(error: str) -> str:
    """The first line of the sink's own error, once it is among the error's first lines.

    Spark puts its own lines first (``[STREAM_FAILED] Query [...] terminated with exception:
    [PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source
    perform commit: Traceback``, then the one frame the sink leaves); the sink's exception is
    the first line after them, with no library frames before it.
    """
    lines = error.splitlines()
    print("\n".join(lines[:8]))
    found = [n for n, line in enumerate(lines) if "RowError: failover sink: row " in line]
    assert found, error
    assert found[0] <= 8, error
    return lines[found[0]]


def copies(messages: list[ReceivedMessage]) -> collections.Counter[str]:
    return collections.Counter(m.text for m in messages)


def drained(cluster: Cluster, destination: str) -> list[ReceivedMessage]:
    found: list[ReceivedMessage] = []
    for broker in cluster:
        found += broker.drain(destination, timeout=120, idle=2.0)
    return found


def assert_the_others_once(messages: list[ReceivedMessage], label: str) -> None:
    counted = copies(messages)
    good = {str(v) for v in range(ROWS) if v != POISON}
    extra = sum(counted.values()) - len(counted)
    print(
        f"{label}: {len(counted)} rows arrived, {extra} extra copies, poison row there: "
        f"{str(POISON) in counted}"
    )
    assert set(counted) == good
    assert extra == 0


def test_a_header_the_broker_cannot_parse_fails_the_batch_once_naming_the_row(
    spark: SparkSession, activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    error, _ = run(
        rows(spark, headers=poison_header()),
        tmp_path,
        uri=activemq_cluster.failover_uri("stomp"),
        destination=unique_queue,
        headersColumn="headers",
    )
    assert error is not None
    first = reason_line(error)
    assert "column 'headers' key 'priority' = 'high' must be an integer 0-9" in first
    # One attempt per task: every other row once, none re-sent by a retry.
    assert_the_others_once(drained(activemq_cluster, unique_queue), "activemq priority=high")


def test_dead_letter_keeps_the_query_running_and_the_row_waits_there(
    spark: SparkSession, activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    dead = f"{unique_queue}.dlq"
    error, active = run(
        rows(spark, headers=poison_header()),
        tmp_path,
        uri=activemq_cluster.failover_uri("stomp"),
        destination=unique_queue,
        headersColumn="headers",
        onRowError=f"deadLetter:{dead}",
    )
    assert error is None
    assert active
    assert_the_others_once(drained(activemq_cluster, unique_queue), "activemq deadLetter")
    [letter] = drained(activemq_cluster, dead)
    assert letter.text == str(POISON)
    assert "key 'priority' = 'high' must be an integer 0-9" in letter.headers[ROW_ERROR_HEADER]
    assert letter.headers[ORIGINAL_DESTINATION_HEADER] == unique_queue
    assert letter.headers[MESSAGE_ID_HEADER]  # the row's own id, for correlation


def test_a_send_the_broker_refuses_fails_the_batch_with_the_brokers_reason(
    spark: SparkSession, rabbitmq_cluster: Cluster, tmp_path: Path
) -> None:
    queue = send_destination(rabbitmq_cluster[0], durable_queue(rabbitmq_cluster))
    missing = "/exchange/no-such-exchange/rk"
    to = F.when(F.col("value") == POISON, F.lit(missing)).otherwise(F.lit(queue))
    error, _ = run(
        rows(spark, to=to),
        tmp_path,
        uri=failover_uri(rabbitmq_cluster, {"randomize": False}),
        destinationColumn="to",
    )
    assert error is not None
    first = reason_line(error)
    assert "refused by the broker" in first
    assert "no-such-exchange" in first
    messages = drained(rabbitmq_cluster, queue)
    counted = copies(messages)
    extra = sum(counted.values()) - len(counted)
    print(f"rabbitmq unknown exchange: {len(counted)} rows, {extra} extra copies")
    assert set(counted) == {str(v) for v in range(ROWS) if v != POISON}
    ids: dict[str, set[str]] = collections.defaultdict(set)
    for message in messages:
        ids[message.text].add(message.headers[MESSAGE_ID_HEADER])
    assert all(len(found) == 1 for found in ids.values())
    # Copies here are the connection's own replays: RabbitMQ closed the connection on the
    # poison frame (three times, until it was quarantined), dropping the receipts of sends it
    # had stored before it, and the connection re-sent those (same ids). How many depends on
    # timing; which ones does not: only rows written before the poison row on its partition's
    # connection. Frames after the poison row were discarded with the connection, so a row
    # after it arrives once, as does every row of the other partition. A retried task would
    # have re-sent its whole partition, those rows included.
    poison_partition, poison_index = row_place(
        first.split("failover sink: row ", 1)[1].split(":", 1)[0]
    )
    copied = {row_place(next(iter(ids[text]))) for text, count in counted.items() if count > 1}
    print(f"copied rows: {len(copied)}, partition {poison_partition} before {poison_index}")
    assert all(
        partition == poison_partition and index < poison_index for partition, index in copied
    ), sorted(copied)


def row_place(message_id: str) -> tuple[int, int]:
    """(partition, index in it) of a sink message id ``<query>-<batch>-<partition>-<index>``."""
    *_, partition, index = message_id.rsplit("-", 2)
    return int(partition), int(index)
