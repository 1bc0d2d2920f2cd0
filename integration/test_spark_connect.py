"""The data source through Spark Connect: a source and a sink, broker -> Spark -> broker.

The client is a Spark Connect session (``SparkSession.builder.remote("local[2]")``, which
starts a local Connect server in the client's own process: the ``spark-connect`` extra's
packages and nothing else), in a child process so that its server has the JVM to itself. It
registers the data source through Connect and runs a query that reads a queue with the
``failover`` source and writes every message to another queue with the ``failover`` sink;
every message arrives, each with the id its source row carried.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from failover_client import MESSAGE_ID_HEADER
from failover_client.testing.brokers import Cluster
from failover_client.testing.spark import DriverJob
from integration.test_spark_source import WAIT

pytestmark = pytest.mark.integration

pytest.importorskip("grpc", reason="the spark-connect extra is not installed")

TOTAL = 2_000

CLIENT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    from failover_client.spark import register
    from failover_client.testing.spark import prepare_environment, session_conf

    uri, source, sink, checkpoint = sys.argv[1:5]
    prepare_environment()
    builder = SparkSession.builder.remote("local[2]")
    for key, value in session_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    print(f"session {type(spark).__module__}", flush=True)
    register(spark)

    frame = (
        spark.readStream.format("failover")
        .option("uri", uri)
        .option("destination", source)
        .option("checkpointLocation", checkpoint)
        .option("maxMessagesPerBatch", "500")
        .load()
        .selectExpr("body", "message_id")
    )
    query = (
        frame.writeStream.format("failover")
        .option("uri", uri)
        .option("destination", sink)
        .option("bodyColumn", "body")
        .option("messageIdColumn", "message_id")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()
    """
)


def first_lines(job: DriverJob, count: int) -> list[str]:
    """The client's first ``count`` output lines (fewer if it exits or stays quiet)."""
    lines: list[str] = []
    # A cold Connect server and client on the shared 2-core machine: minutes.
    for line in job.follow(3 * WAIT):
        lines.append(line)
        if len(lines) == count:
            break
    return lines


def test_source_and_sink_through_spark_connect(
    activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    broker = activemq_cluster[0]
    source, sink = unique_queue, f"{unique_queue}-out"
    bodies = [f"c-{n}" for n in range(TOTAL)]
    broker.send(source, bodies)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    job = DriverJob(script, broker.uri(), source, sink, str(tmp_path / "checkpoint"))
    try:
        lines = first_lines(job, 2)
        assert lines == ["session pyspark.sql.connect.session", "started"], lines
        received = broker.drain(sink, timeout=3 * WAIT, idle=5.0, expect=TOTAL)
    finally:
        job.kill()
    assert sorted(m.text for m in received) == sorted(bodies)
    ids = [m.headers.get(MESSAGE_ID_HEADER) for m in received]
    assert len(set(ids)) == TOTAL
    assert None not in ids
