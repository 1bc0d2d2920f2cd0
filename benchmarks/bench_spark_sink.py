"""The Spark sink: throughput per partition, and the time from a broker kill to the next row.

Run: ``python benchmarks/bench_spark_sink.py [--rows 20000] [--reps 3] [--kills 10] [--quick]``

Throughput (one ActiveMQ broker, full-JIT flags, store in memory unless ``--store disk``, so
the client's cost shows rather than the disk's; ``local[2]`` Spark; 128-byte persistent
bodies; every figure after a warm-up round of every method, medians over ``--reps``):

* ``library process``: one Python process sending with ``FailoverConnection.send_async`` and
  ``flush`` (the library's own confirmation window): the ceiling for one sender;
* ``sink, streaming`` (the product): a streaming query (``rate-micro-batch``, one partition,
  ``--rows`` rows per micro-batch) writing with ``format("failover")``; the rate is the
  batch's rows over its ``addBatch`` time (the sink's write, confirmations included, plus
  Spark's scheduling of the one task);
* ``sink, df.write``: the same rows as a batch write of one partition, timed around ``save()``;
* ``naive foreach``: the hand-rolled alternative users write today: a ``ForeachWriter`` that
  opens a stomp.py connection per partition and awaits a receipt for every row.

Targets: sink (streaming) >= 0.6x the library process, >= 3x the naive foreach writer.

Kill to first row (``--kills``; three brokers with the harness's fast-restart flags): a
streaming query runs on; a UDF in it calls this process at chosen rows (mid-partition, see
``failover_client.testing.spark.Tripwire``), which SIGKILLs the broker the query is writing
to (the one the latest commit marker names) and restarts it in the background. The time
to the first row after it is the earliest broker timestamp (set by the broker when it stores
the message, before its receipt) on any other broker after the kill's wall-clock time:
median and p95 over the kills. Brokers and Spark share the machine's two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere
# Executors import the naive writer's stomp.py helper from this repository (benchmarks._raw).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

from benchmarks._common import (  # noqa: E402
    broker_by_port,
    brokers,
    log,
    machine,
    port_of,
    precreate,
    ratio,
    summary_ms,
    table,
    warm,
    write_json,
)
from benchmarks._raw import purge  # noqa: E402
from failover_client import FailoverConnection  # noqa: E402
from failover_client.spark import MARKER_DIRECTORY, register  # noqa: E402
from failover_client.testing.brokers import Cluster  # noqa: E402
from failover_client.testing.spark import SparkSessions, Tripwire  # noqa: E402

BODY = "x" * 128
PERSISTENT = {"persistent": "true"}
STORES = {"disk": None, "memory": "/dev/shm"}
TARGETS = {"library process": 0.6, "naive foreach": 3.0}


class NaiveForeachWriter:
    """What a user hand-rolls for ``foreach``: stomp.py, one receipt awaited per row."""

    def __init__(self, host: tuple[str, int], destination: str) -> None:
        self.host = host
        self.destination = destination
        self.sender: Any = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        from benchmarks._raw import RawSender  # noqa: PLC0415 - on the executor

        self.sender = RawSender(self.host)
        return True

    def process(self, row: Any) -> None:
        self.sender.send_confirmed(self.destination, row.value.encode(), PERSISTENT)

    def close(self, error: BaseException | None) -> None:
        if self.sender is not None:
            self.sender.close()


class BatchTimes:
    """``addBatch`` milliseconds of every micro-batch of a query, from its progress events."""

    def __init__(self) -> None:
        from pyspark.sql.streaming import StreamingQueryListener  # noqa: PLC0415

        owner = self
        self.cond = threading.Condition()
        self.times: dict[str, dict[int, float]] = {}

        class Listener(StreamingQueryListener):  # type: ignore[misc]
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                progress = event.progress
                with owner.cond:
                    batches = owner.times.setdefault(str(progress.id), {})
                    batches[progress.batchId] = progress.durationMs.get("addBatch", 0) / 1000
                    owner.cond.notify_all()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.listener = Listener()

    def wait(self, query_id: str, batches: int, timeout: float = 600.0) -> dict[int, float]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.times.get(query_id, {})) >= batches, timeout)
            return dict(self.times.get(query_id, {}))


def rate_source(spark: Any, rows: int, batches: int) -> Any:
    from pyspark.sql.functions import col, lit  # noqa: PLC0415

    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 1)
        .load()
        .where(col("value") < rows * batches)
        .select(lit(BODY).alias("value"))
    )


def streamed(spark: Any, times: BatchTimes, rows: int, reps: int, start: Any) -> list[float]:
    """Rates (rows/s) of micro-batches 1..reps (batch 0 starts the Python workers)."""
    checkpoint = tempfile.mkdtemp(prefix="fc-bench-spark-")
    query = start(rate_source(spark, rows, reps + 1).writeStream, checkpoint)
    try:
        seconds = times.wait(str(query.id), reps + 1)
    finally:
        query.stop()
    return [rows / seconds[b] for b in range(1, reps + 1)]


def throughput(cluster: Cluster, spark: Any, rows: int, reps: int) -> dict[str, Any]:
    broker = cluster[0]
    host = (broker.endpoint("stomp").host, broker.endpoint("stomp").port)
    uri = cluster.failover_uri("stomp")
    warm(broker, "/queue/bench.warmup", 5000)
    times = BatchTimes()
    spark.streams.addListener(times.listener)
    naive_rows = max(200, rows // 8)

    def library(dest: str) -> float:
        with FailoverConnection(uri) as connection:
            started = time.perf_counter()
            for _ in range(rows):
                connection.send_async(dest, BODY, PERSISTENT)
            connection.flush()
            return rows / (time.perf_counter() - started)

    def sink_stream(dest: str) -> list[float]:
        def start(writer: Any, checkpoint: str) -> Any:
            return (
                writer.format("failover")
                .option("uri", uri)
                .option("destination", dest)
                .option("checkpointLocation", checkpoint)
                .start()
            )

        return streamed(spark, times, rows, 1, start)

    def sink_batch(dest: str) -> float:
        from pyspark.sql.functions import lit  # noqa: PLC0415

        frame = spark.range(0, rows, 1, 1).select(lit(BODY).alias("value"))
        started = time.perf_counter()
        frame.write.format("failover").option("uri", uri).option("destination", dest).mode(
            "append"
        ).save()
        return rows / (time.perf_counter() - started)

    def naive(dest: str) -> list[float]:
        def start(writer: Any, checkpoint: str) -> Any:
            return (
                writer.foreach(NaiveForeachWriter(host, dest))
                .option("checkpointLocation", checkpoint)
                .start()
            )

        return streamed(spark, times, naive_rows, 1, start)

    methods = {
        "library process": lambda d: [library(d)],
        "sink, streaming": sink_stream,
        "sink, df.write": lambda d: [sink_batch(d)],
        "naive foreach": naive,
    }
    rates: dict[str, list[float]] = {name: [] for name in methods}
    for rep in range(reps + 1):  # round 0 warms every path up, unrecorded
        order = list(methods) if rep % 2 else list(methods)[::-1]
        for name in order:
            dest = f"/queue/bench.spark.{uuid.uuid4().hex[:8]}"
            precreate(cluster, dest)
            measured = methods[name](dest)
            purge(host, dest)
            log(f"{'warm-up' if rep == 0 else f'rep {rep}'}: {name:18} {measured[0]:>9,.0f} rows/s")
            if rep > 0:
                rates[name].extend(measured)
    spark.streams.removeListener(times.listener)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "rows_per_partition": rows,
        "naive_rows": naive_rows,
        "rates": rates,
        "medians": medians,
    }


def kill_latency(cluster: Cluster, spark: Any, kills: int) -> dict[str, Any]:
    """SIGKILL the broker in use ``kills`` times inside one running query (see the docstring)."""
    from pyspark.sql.functions import col, udf  # noqa: PLC0415

    per_batch = 10_000
    dest = f"/queue/bench.spark.kill.{uuid.uuid4().hex[:8]}"
    precreate(cluster, dest)
    uri = cluster.failover_uri("stomp", {"randomize": False})
    # Every other batch, in its middle: the killed broker has restarted before the next kill.
    trips = [per_batch * (2 + 2 * k) + per_batch // 2 for k in range(kills)]
    batches = 2 + 2 * kills + 1
    killed: list[tuple[int, float]] = []  # (broker index, wall-clock time of the kill)
    restarts: list[threading.Thread] = []

    checkpoint = Path(tempfile.mkdtemp(prefix="fc-bench-spark-"))

    def kill(_: str) -> None:
        index = in_use(cluster, checkpoint)
        at = time.time()
        cluster[index].kill()
        killed.append((index, at))
        thread = threading.Thread(target=cluster[index].start, daemon=True)
        thread.start()
        restarts.append(thread)

    times = BatchTimes()
    spark.streams.addListener(times.listener)
    with Tripwire(kill) as wire:
        trip = udf(wire.at(*trips), "string", useArrow=False)
        frame = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", per_batch)
            .option("numPartitions", 1)
            .load()
            .where(col("value") < per_batch * batches)
            .select(trip(col("value").cast("string")).alias("value"))
        )
        query = (
            frame.writeStream.format("failover")
            .option("uri", uri)
            .option("destination", dest)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            times.wait(str(query.id), batches)
            alive = query.isActive and query.exception() is None
        finally:
            query.stop()
    spark.streams.removeListener(times.listener)
    for thread in restarts:
        thread.join()
    cluster.heal()
    drained = arrivals(cluster, dest)
    stamps = [(broker, stamp) for broker, stamp, _ in drained]
    bodies = {body for _, _, body in drained}
    delays = []
    for index, at in killed:
        after = [t for broker, t in stamps if broker != index and t >= at]
        if after:
            delays.append(min(after) - at)
    return {
        "kills": len(killed),
        "query_survived": alive,
        "rows": per_batch * batches,
        "messages_drained": len(drained),
        "rows_missing": len({str(v) for v in range(per_batch * batches)} - bodies),
        "duplicates": len(drained) - len(bodies),
        "first_row_after_kill": summary_ms(delays),
        "samples_ms": [round(d * 1000, 1) for d in delays],
    }


def in_use(cluster: Cluster, checkpoint: Path) -> int:
    """The broker the latest committed batch ended on (its commit marker names it)."""
    markers = sorted(
        (checkpoint / MARKER_DIRECTORY).glob("batch-*.json"),
        key=lambda p: int(p.name.split("-")[1].split(".")[0]),
    )
    record = json.loads(markers[-1].read_text())
    return broker_by_port(cluster, port_of(record["partitions"][0]["broker"]))


def arrivals(cluster: Cluster, dest: str) -> list[tuple[int, float, str]]:
    """(broker index, broker timestamp in seconds, body) of every message ``dest`` holds."""
    found = []
    for index, broker in enumerate(cluster):
        for message in broker.drain(dest, timeout=600.0, idle=2.0):
            found.append((index, float(message.headers["timestamp"]) / 1000, message.text))
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows per partition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    parser.add_argument("--quick", action="store_true", help="2 reps, 5,000 rows, 3 kills")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.rows, args.kills = 2, 5_000, 3
    started = time.time()
    sessions = SparkSessions(app_name="bench-spark-sink")
    spark = sessions.get("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    result: dict[str, Any] = {"benchmark": "spark_sink", "machine": machine(), "args": vars(args)}
    try:
        with brokers(1, label="spark-tp", full_jit=True, store=STORES[args.store]) as cluster:
            measured = throughput(cluster, spark, args.rows, args.reps)
        medians = measured["medians"]
        sink = medians["sink, streaming"]
        rows = []
        comparisons = {}
        for name, median in medians.items():
            versus = ratio(sink, median) if name in TARGETS else None
            if name in TARGETS:
                comparisons[name] = {"sink_ratio": versus, "target": TARGETS[name]}
            rows.append([name, median, versus if versus is not None else "", TARGETS.get(name, "")])
        text = table(
            f"Spark sink throughput per partition ({args.store} store, rows/s, median)",
            ["method", "rows/s", "sink (streaming) / this", "target"],
            rows,
        )
        result["throughput"] = {**measured, "comparisons": comparisons, "table": text}
        if args.kills:
            with brokers(3, label="spark-kill", full_jit=False) as cluster:
                result["kill"] = kill_latency(cluster, spark, args.kills)
            kill = result["kill"]["first_row_after_kill"]
            table(
                "Broker SIGKILL to the first row stored by another broker, inside a running query",
                ["kills", "median ms", "p95 ms", "max ms", "query kept running", "rows lost"],
                [
                    [
                        kill.get("n", 0),
                        kill.get("median_ms", ""),
                        kill.get("p95_ms", ""),
                        kill.get("max_ms", ""),
                        result["kill"]["query_survived"],
                        result["kill"]["rows_missing"],
                    ]
                ],
            )
    finally:
        sessions.stop()
    result["seconds"] = round(time.time() - started, 1)
    path = write_json("spark_sink", result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
