"""The Spark source against real ActiveMQ brokers: broker kills, a killed driver, bad options.

The broker-kill and bad-option tests run twice: in ``local[2,4]`` and on a real standalone
cluster (a master and two workers from the PySpark install; the spool files are read by
executors in their own JVMs and Python workers). The driver-kill test runs the query in a
subprocess of its own (local mode), SIGKILLs that process group mid-stream and starts the same
query again from its checkpoint.

What is checked is what a user relies on: every message reaches the query's output at least
once through broker fail-overs (the killed broker's unconsumed and unacknowledged messages
included, once it is back), redelivered copies of spooled messages are dropped by id, and
after a driver SIGKILL and a restart nothing is lost and no message comes back in a new batch.
"""

from __future__ import annotations

import collections
import functools
import json
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from failover_client.spark import FORMAT
from failover_client.spark._spool import SPOOL_DIRECTORY
from failover_client.testing.brokers import Cluster, allocate_ports
from failover_client.testing.spark import DriverJob

pytestmark = pytest.mark.integration

PER_BROKER = 10_000
PER_BATCH = 2_000
WAIT = 240.0
"""Safety net for a hung query; every wait returns as soon as its condition holds."""


# --- the source registered ----------------------------------------------------------------------


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark_each: SparkSession) -> SparkSession:
    """Local mode, then the standalone cluster (``spark_each``), the format registered."""
    return spark_each


class Progress(StreamingQueryListener):
    """Wakes the test on every progress or end of a query."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events = 0
        self.ended: set[str] = set()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        with self._cond:
            self._events += 1
            self._cond.notify_all()

    def onQueryIdle(self, event: Any) -> None:
        self.onQueryProgress(event)

    def onQueryTerminated(self, event: Any) -> None:
        with self._cond:
            self.ended.add(str(event.id))
            self._cond.notify_all()

    def until(self, query: StreamingQuery, condition: Callable[[], bool]) -> bool:
        """Re-check ``condition`` after every progress event until it holds or the query ends."""
        while True:
            with self._cond:
                seen = self._events
            if condition():
                return True
            with self._cond:
                if str(query.id) in self.ended:
                    return condition()
                if not self._cond.wait_for(functools.partial(self._moved, seen), WAIT):
                    return False

    def _moved(self, seen: int) -> bool:
        return self._events > seen


@pytest.fixture
def progress(spark: SparkSession) -> Iterator[Progress]:
    listener = Progress()
    spark.streams.addListener(listener)
    yield listener
    spark.streams.removeListener(listener)


def read_stream(spark: SparkSession, uri: str, destination: str, checkpoint: Path, **extra: str):
    reader = (
        spark.readStream.format(FORMAT)
        .option("uri", uri)
        .option("destination", destination)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load()


# --- every message through broker kills ---------------------------------------------------------


def test_every_message_arrives_through_broker_kills(
    spark: SparkSession,
    activemq_cluster: Cluster,
    unique_queue: str,
    progress: Progress,
    tmp_path: Path,
) -> None:
    first, second = activemq_cluster[0], activemq_cluster[1]
    first.send(unique_queue, [f"a-{n}" for n in range(PER_BROKER)])
    second.send(unique_queue, [f"b-{n}" for n in range(PER_BROKER)])
    uri = f"failover:({first.uri()},{second.uri()})?randomize=false"
    name = f"source_{uuid.uuid4().hex[:8]}"
    checkpoint = tmp_path / "checkpoint"
    frame = read_stream(
        spark,
        uri,
        unique_queue,
        checkpoint,
        maxMessagesPerBatch=str(PER_BATCH),
        bodyAsString="true",
    )
    query = (
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )

    def distinct(prefix: str = "") -> int:
        found = spark.sql(
            f"select count(distinct body_string) as n from {name} "
            f"where body_string like '{prefix}%'"
        )
        return int(found.collect()[0].n)

    try:
        # The query reads from the first broker; it dies mid-stream with messages still
        # queued there and others delivered but not yet acknowledged.
        assert progress.until(query, lambda: distinct("a-") > 0), query.exception()
        first.kill()
        # The subscription moves to the second broker, which the query drains.
        assert progress.until(query, lambda: distinct("b-") == PER_BROKER), query.exception()
        # The first broker comes back with its store; the second dies; the query returns to
        # the first and takes the rest (and, again, what it had not acknowledged there).
        activemq_cluster.heal()
        second.kill()
        assert progress.until(query, lambda: distinct() == 2 * PER_BROKER), query.exception()
        assert query.isActive
        assert query.exception() is None
        counts = spark.sql(
            f"select count(*) as rows, count(distinct message_id) as ids, "
            f"count(distinct broker) as brokers from {name}"
        ).collect()[0]
    finally:
        query.stop()

    # Redelivered copies of spooled messages were dropped by id: each message once.
    assert (counts.rows, counts.ids) == (2 * PER_BROKER, 2 * PER_BROKER)
    assert counts.brokers == 2
    # Committed batches leave only their id records in the spool.
    spooled = [p.name for p in (checkpoint / SPOOL_DIRECTORY).iterdir()]
    assert len([n for n in spooled if n.startswith("batch-")]) <= 1
    assert any(n.startswith("committed-") for n in spooled)


# --- a driver SIGKILLed, then restarted from its checkpoint -------------------------------------

JOB = textwrap.dedent(
    """
    import json, os, sys
    from typing import Any
    from failover_client.spark import register
    from failover_client.testing.spark import local_session

    uri, destination, checkpoint, out = sys.argv[1:5]

    spark = local_session(app_name="source-driver-kill")
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
        .option("checkpointLocation", checkpoint)
        .option("maxMessagesPerBatch", "500")
        .option("bodyAsString", "true")
        .load()
    )
    query = frame.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint).start()
    query.awaitTermination()
    """
)


def batch_lines(job: DriverJob) -> Iterator[str]:
    """The job's ``batch ...`` lines as they come (ends if it exits or goes quiet for WAIT)."""
    return (line for line in job.follow(WAIT) if line.startswith("batch "))


def outputs(directory: Path) -> dict[str, list[list[str]]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("batch-*.json"))}


def test_driver_killed_and_restarted_loses_nothing_and_replays_nothing(
    activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    total = 6_000
    broker = activemq_cluster[0]
    broker.send(unique_queue, [f"k-{n}" for n in range(total)])
    script = tmp_path / "job.py"
    script.write_text(JOB)
    out = tmp_path / "out"
    out.mkdir()
    args = (broker.uri(), unique_queue, str(tmp_path / "checkpoint"), str(out))

    job = DriverJob(script, *args)
    try:
        for line in batch_lines(job):
            if int(line.split()[1]) >= 3:
                break
        else:
            pytest.fail("the first run of the query committed no batch")
    finally:
        job.kill()
    before = outputs(out)
    assert 0 < sum(len(rows) for rows in before.values()) < total

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
    assert bodies == {f"k-{n}" for n in range(total)}
    # Each message in exactly one batch: a batch replayed after the kill rewrote its own
    # file with the same rows; nothing acknowledged (or spooled) came back in a new batch.
    copies = collections.Counter(message_id for rows in batches.values() for message_id, _ in rows)
    assert max(copies.values()) == 1
    assert len(copies) == total
    assert len(batches) > len(before)


# --- bad options fail at once, briefly ----------------------------------------------------------


def short(error: BaseException, reason: str) -> str:
    """The error's text, once ``reason`` is in its first lines and the whole is short."""
    text = str(error)
    lines = text.splitlines()
    assert len(lines) <= 60, text
    assert any(reason in line for line in lines[:10]), text
    return text


def failed_query(frame: Any, tmp_path: Path) -> BaseException:
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        with pytest.raises(PySparkException) as caught:
            query.awaitTermination(WAIT)
    finally:
        query.stop()
    return caught.value


def test_a_source_without_checkpoint_location_fails_at_load(
    spark: SparkSession, activemq_cluster: Cluster
) -> None:
    with pytest.raises(PySparkException) as caught:
        (
            spark.readStream.format(FORMAT)
            .option("uri", activemq_cluster.failover_uri())
            .option("destination", "/queue/x")
            .load()
        )
    short(caught.value, "failover source: option checkpointLocation is required")


def test_unreachable_brokers_fail_the_query_at_start(spark: SparkSession, tmp_path: Path) -> None:
    ports = allocate_ports(2)  # free: nothing listens there
    uri = f"failover:(stomp://127.0.0.1:{ports[0]},stomp://127.0.0.1:{ports[1]})"
    frame = read_stream(spark, f"{uri}?maxReconnectAttempts=1", "/queue/x", tmp_path / "checkpoint")
    text = short(failed_query(frame, tmp_path), "gave up after 1 reconnect attempt(s)")
    assert f"127.0.0.1:{ports[0]}: connection refused" in text


def test_a_bad_selector_fails_the_query_at_start(
    spark: SparkSession, activemq_cluster: Cluster, tmp_path: Path
) -> None:
    frame = read_stream(
        spark,
        activemq_cluster.failover_uri(),
        "/queue/x",
        tmp_path / "checkpoint",
        selector="this is = not a selector (",
    )
    short(failed_query(frame, tmp_path), "SubscriptionRefused")
