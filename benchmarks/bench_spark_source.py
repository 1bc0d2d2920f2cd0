"""The Spark source: messages per second from one broker, end to end into a Spark sink.

Run: ``python benchmarks/bench_spark_source.py [--messages 50000] [--reps 3] [--batch 10000]``

One ActiveMQ broker (full-JIT flags, store in memory unless ``--store disk``), ``local[2]``
Spark, 128-byte persistent messages queued before the query starts (sent with the library's
confirmation window). A streaming query reads them with ``format("failover")`` and writes to
Spark's ``noop`` sink: every message is received on the driver, spooled (an Arrow file under
the checkpoint, written before its offsets are reported), read back by an executor task, and
acknowledged to the broker after Spark committed its batch.

Figures per run (medians over ``--reps``, after an unrecorded warm-up run that starts the
Python workers and warms the broker):

* ``end to end``: messages over the time from ``start()`` to the progress event of the batch
  that took the last one (query start-up included);
* ``steady``: messages of every batch after the first over the time from the end of the first
  batch to the end of the last (start-up excluded);
* ``acknowledged``: the queue is empty on the broker (every message acknowledged) this long
  after the last batch ended: the ack of a batch waits for the next plan (Spark commits
  batch N when it plans N+1).

Target: >= 5,000 messages/s end to end.
"""

from __future__ import annotations

import argparse
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

from benchmarks._common import (  # noqa: E402
    brokers,
    log,
    machine,
    precreate,
    table,
    warm,
    write_json,
)
from failover_client import FailoverConnection  # noqa: E402
from failover_client.spark import register  # noqa: E402
from failover_client.testing.brokers import Broker, Cluster  # noqa: E402
from failover_client.testing.spark import SparkSessions  # noqa: E402

BODY = "x" * 128
STORES = {"disk": None, "memory": "/dev/shm"}
TARGET = 5_000.0


class Batches:
    """(wall-clock end, input rows, duration) of every micro-batch of each query."""

    def __init__(self) -> None:
        from pyspark.sql.streaming import StreamingQueryListener  # noqa: PLC0415

        owner = self
        self.cond = threading.Condition()
        self.seen: dict[str, list[dict[str, Any]]] = {}

        class Listener(StreamingQueryListener):  # type: ignore[misc]
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                progress = event.progress
                if not progress.numInputRows:
                    return
                record = {
                    "ended": time.time(),
                    "batch": progress.batchId,
                    "rows": progress.numInputRows,
                    "ms": dict(progress.durationMs),
                }
                with owner.cond:
                    owner.seen.setdefault(str(progress.id), []).append(record)
                    owner.cond.notify_all()

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.listener = Listener()

    def wait_rows(self, query_id: str, rows: int, timeout: float = 600.0) -> list[dict[str, Any]]:
        def total() -> int:
            return sum(r["rows"] for r in self.seen.get(query_id, []))

        with self.cond:
            self.cond.wait_for(lambda: total() >= rows, timeout)
            return list(self.seen.get(query_id, []))


def fill(uri: str, destination: str, count: int) -> float:
    """Queue ``count`` persistent messages (confirmed); returns messages/s."""
    with FailoverConnection(uri) as connection:
        started = time.perf_counter()
        for _ in range(count):
            connection.send_async(destination, BODY, {"persistent": "true"})
        connection.flush()
        return count / (time.perf_counter() - started)


def emptied(broker: Broker, destination: str, since: float, timeout: float = 60.0) -> float | None:
    """Seconds after ``since`` (wall clock) until ``destination`` holds nothing on ``broker``."""
    name = destination.removeprefix("/queue/")
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        depth = broker.queue_depth(name)
        if depth is None:
            return None  # this broker kind cannot tell cheaply
        if depth == 0:
            return time.time() - since
        pause.wait(0.05)  # the broker offers no event for an empty queue
    return None


def one_run(
    cluster: Cluster, spark: Any, batches: Batches, messages: int, batch: int
) -> dict[str, Any]:
    broker = cluster[0]
    destination = f"/queue/bench.spark.source.{uuid.uuid4().hex[:8]}"
    precreate(cluster, destination)
    uri = cluster.failover_uri("stomp")
    fill_rate = fill(uri, destination, messages)
    checkpoint = tempfile.mkdtemp(prefix="fc-bench-source-")
    frame = (
        spark.readStream.format("failover")
        .option("uri", uri)
        .option("destination", destination)
        .option("checkpointLocation", checkpoint)
        .option("maxMessagesPerBatch", batch)
        .load()
    )
    started = time.time()
    query = frame.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
    try:
        seen = batches.wait_rows(str(query.id), messages)
        last = seen[-1]["ended"]
        acked = emptied(broker, destination, last)
    finally:
        query.stop()
    rows = sum(r["rows"] for r in seen)
    steady_rows = rows - seen[0]["rows"]
    steady_time = last - seen[0]["ended"]
    return {
        "messages": rows,
        "fill_per_s": round(fill_rate),
        "end_to_end_per_s": rows / (last - started),
        "steady_per_s": steady_rows / steady_time if steady_time > 0 else None,
        "batches": len(seen),
        "median_batch_rows": statistics.median(r["rows"] for r in seen),
        "median_batch_ms": statistics.median(r["ms"].get("triggerExecution", 0) for r in seen),
        "median_latest_offset_ms": statistics.median(r["ms"].get("latestOffset", 0) for r in seen),
        "acknowledged_after_s": None if acked is None else round(acked, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10_000, help="maxMessagesPerBatch")
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    parser.add_argument("--quick", action="store_true", help="2 reps of 20,000 messages")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.messages = 2, 20_000
    started = time.time()
    sessions = SparkSessions(app_name="bench-spark-source")
    spark = sessions.get("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    batches = Batches()
    spark.streams.addListener(batches.listener)
    result: dict[str, Any] = {"benchmark": "spark_source", "machine": machine(), "args": vars(args)}
    runs: list[dict[str, Any]] = []
    try:
        with brokers(1, label="spark-src", full_jit=True, store=STORES[args.store]) as cluster:
            warm(cluster[0], "/queue/bench.warmup", 5000)
            for rep in range(args.reps + 1):  # run 0 warms Spark's workers and the broker
                run = one_run(cluster, spark, batches, args.messages, args.batch)
                log(
                    f"{'warm-up' if rep == 0 else f'rep {rep}'}: "
                    f"{run['end_to_end_per_s']:,.0f} msg/s end to end, "
                    f"{run['steady_per_s'] or 0:,.0f} steady, {run['batches']} batches"
                )
                if rep > 0:
                    runs.append(run)
    finally:
        spark.streams.removeListener(batches.listener)
        sessions.stop()
    end_to_end = statistics.median(r["end_to_end_per_s"] for r in runs)
    steady = statistics.median(r["steady_per_s"] or 0 for r in runs)
    text = table(
        f"Spark source, one broker into a noop sink ({args.store} store, median of {args.reps})",
        ["messages", "end to end msg/s", "steady msg/s", "batches", "target", "met"],
        [
            [
                args.messages,
                end_to_end,
                steady,
                statistics.median(r["batches"] for r in runs),
                TARGET,
                end_to_end >= TARGET,
            ]
        ],
    )
    result["runs"] = runs
    result["medians"] = {"end_to_end_per_s": end_to_end, "steady_per_s": steady}
    result["target"] = {"end_to_end_per_s": TARGET, "met": end_to_end >= TARGET}
    result["table"] = text
    result["seconds"] = round(time.time() - started, 1)
    path = write_json("spark_source", result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
