"""Checkpoint locations Spark users write, and the data source from any thread of a session.

Against real ActiveMQ brokers and a real S3-compatible server on loopback (moto's server,
:class:`~failover_client.testing.spark.LoopbackS3`), in local mode:

* a source whose ``checkpointLocation`` is ``s3a://bucket/...``, configured the way a user
  configures S3A (``spark.hadoop.fs.s3a.*`` in the session conf), runs in a driver process of
  its own, is SIGKILLed mid-stream and restarted: the restarted driver finds its spool on S3,
  nothing is lost and no message comes back in a second batch;
* a ``foreachBatch`` sink keeps its commit markers on ``s3a://``;
* a location nobody serves (``dbfs:/`` off Databricks) fails at ``load()`` in one short
  message, and nothing is written to the driver's working directory;
* ``format("failover")`` registered on the main thread works from a worker thread.

Spark's own checkpoint (offsets, commits) stays on local disk here: the PySpark wheel has no
S3A connector for the JVM (``hadoop-aws``), which a cluster that checkpoints on S3 installs.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import col

from failover_client.spark import FORMAT, MARKER_DIRECTORY, foreach_batch_sink, register
from failover_client.spark._spool import SPOOL_DIRECTORY
from failover_client.testing.brokers import Cluster
from failover_client.testing.spark import DriverJob, LoopbackS3, SparkSessions
from integration.test_spark_sink import Progress, drain_all, rate_stream
from integration.test_spark_source import WAIT, outputs

pytestmark = pytest.mark.integration

BUCKET = "checkpoints"


@pytest.fixture(scope="module")
def s3() -> Iterator[LoopbackS3]:
    with LoopbackS3() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture
def spark_s3(spark_sessions: SparkSessions, s3: LoopbackS3) -> SparkSession:
    """A local session with S3A pointed at the loopback server, the format registered."""
    session = spark_sessions.local(s3.spark_conf())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


# --- the source's spool on s3a://, through a driver SIGKILL -------------------------------------

JOB = textwrap.dedent(
    """
    import json, os, sys
    from typing import Any
    from failover_client.spark import register
    from failover_client.testing.spark import local_session

    uri, destination, spool, checkpoint, out, log = sys.argv[1:7]
    conf = json.loads(os.environ["JOB_SPARK_CONF"])
    # The driver's and its JVM's stderr, for the test's failure message.
    os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)

    spark = local_session(app_name="source-s3a-driver-kill", conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    def write(batch: Any, batch_id: int) -> None:
        rows = [[r.message_id, r.body_string] for r in batch.collect()]
        path = os.path.join(out, f"batch-{batch_id:05d}.json")
        with open(path + ".tmp", "w") as file:
            json.dump(rows, file)
        os.replace(path + ".tmp", path)  # a replayed batch overwrites its own file
        print(f"batch {batch_id} {len(rows)}", flush=True)

    frame = (
        spark.readStream.format("failover")
        .option("uri", uri)
        .option("destination", destination)
        .option("checkpointLocation", spool)
        .option("maxMessagesPerBatch", "500")
        .option("bodyAsString", "true")
        .load()
    )
    query = frame.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start()
    query.awaitTermination()
    """
)


def batch_lines(job: DriverJob) -> Iterator[str]:
    """The job's ``batch ...`` lines as they come; ends when it exits or stays quiet too long.

    A cold driver (a new JVM and SparkContext, then the first batch through Python workers)
    has taken over four minutes on the shared 2-core machine, so the patience is 3 * WAIT.
    """
    return (line for line in job.follow(3 * WAIT) if line.startswith("batch "))


def test_a_spool_on_s3a_survives_a_driver_kill(
    activemq_cluster: Cluster,
    unique_queue: str,
    s3: LoopbackS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    total = 4_000
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"s-{n}" for n in range(total)])
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "out"
    out.mkdir()
    prefix = f"{tmp_path.name}/ck"
    spool = f"s3a://{BUCKET}/{prefix}"
    local_checkpoint = tmp_path / "checkpoint"
    # The job's session gets the S3A settings as a user writes them; the keys stay out of
    # the job's command line.
    monkeypatch.setenv("JOB_SPARK_CONF", json.dumps(s3.spark_conf()))
    log = tmp_path / "driver.log"
    args = (broker.uri(), unique_queue, spool, str(local_checkpoint), str(out), str(log))

    def driver_log() -> str:
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return "\n".join(line for line in lines if not line.lstrip().startswith("at "))[-4000:]

    job = DriverJob(script, *args)
    try:
        for line in batch_lines(job):
            if int(line.split()[1]) >= 2:
                break
        else:
            pytest.fail(f"the first run of the query committed no batch; its log:\n{driver_log()}")
    finally:
        job.kill()
    before = outputs(out)
    assert 0 < sum(len(rows) for rows in before.values()) < total
    spooled = s3.keys(BUCKET, f"{prefix}/{SPOOL_DIRECTORY}/")
    assert any("/committed-" in key for key in spooled), spooled

    def all_there() -> bool:
        return len({body for rows in outputs(out).values() for _, body in rows}) == total

    job = DriverJob(script, *args)
    try:
        for _ in batch_lines(job):
            if all_there():
                break
    finally:
        job.kill()

    batches = outputs(out)
    bodies = {body for rows in batches.values() for _, body in rows}
    assert bodies == {f"s-{n}" for n in range(total)}, driver_log()
    copies = collections.Counter(message_id for rows in batches.values() for message_id, _ in rows)
    assert max(copies.values()) == 1
    assert len(copies) == total
    assert len(batches) > len(before)
    # The spool lived on S3 only: nothing of it on the driver's disk.
    assert not (local_checkpoint / SPOOL_DIRECTORY).exists()
    assert not list(tmp_path.rglob(SPOOL_DIRECTORY))


# --- the sink's commit markers on s3a:// ---------------------------------------------------------


def test_a_foreach_batch_sink_keeps_its_markers_on_s3a(
    spark_s3: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    s3: LoopbackS3,
    tmp_path: Path,
) -> None:
    rows, per_batch = 900, 300
    prefix = f"{tmp_path.name}/sink"
    sink = foreach_batch_sink(
        activemq_cluster.failover_uri("stomp"),
        destination=unique_queue,
        checkpointLocation=f"s3a://{BUCKET}/{prefix}",
    )
    progress = Progress()
    spark_s3.streams.addListener(progress)
    frame = rate_stream(spark_s3, rows, per_batch).select(col("value").cast("string"))
    query = (
        frame.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        assert progress.reached(query, rows // per_batch - 1), query.exception()
    finally:
        query.stop()
        spark_s3.streams.removeListener(progress)
    markers = set(s3.keys(BUCKET, f"{prefix}/{MARKER_DIRECTORY}/"))
    wanted = {f"{prefix}/{MARKER_DIRECTORY}/batch-{b}.json" for b in range(rows // per_batch)}
    assert wanted <= markers
    received = drain_all(activemq_cluster, unique_queue)
    assert {m.text for m in received} == {str(v) for v in range(rows)}


# --- a location nobody serves fails at once -------------------------------------------------------


def test_dbfs_off_databricks_fails_at_load_and_writes_nothing_locally(
    spark_s3: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PySparkException) as caught:
        (
            spark_s3.readStream.format(FORMAT)
            .option("uri", "failover:(stomp://127.0.0.1:61613)")
            .option("destination", "/queue/x")
            .option("checkpointLocation", "dbfs:/ck")
            .load()
        )
    text = str(caught.value)
    assert len(text.splitlines()) <= 60, text
    first = "\n".join(text.splitlines()[:10])
    assert "checkpointLocation 'dbfs:/ck'" in first, text
    assert "/dbfs mount" in first, text
    assert os.listdir(tmp_path) == []


# --- registration seen from other threads ---------------------------------------------------------


def test_format_failover_works_from_another_thread(
    spark_local: SparkSession, activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    register(spark_local)  # on this (the main) thread
    uri = activemq_cluster.failover_uri("stomp")

    def write() -> None:
        (
            spark_local.range(0, 100, numPartitions=2)
            .select(col("id").cast("string").alias("value"))
            .write.format(FORMAT)
            .option("uri", uri)
            .option("destination", unique_queue)
            .mode("append")
            .save()
        )

    def read_stream_schema() -> list[str]:
        frame = (
            spark_local.readStream.format(FORMAT)
            .option("uri", uri)
            .option("destination", unique_queue)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .load()
        )
        return frame.columns

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(write).result(timeout=WAIT)
        columns = pool.submit(read_stream_schema).result(timeout=WAIT)
    assert "message_id" in columns
    received = drain_all(activemq_cluster, unique_queue)
    assert sorted(int(m.body) for m in received) == list(range(100))
