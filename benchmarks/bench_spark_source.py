"""The Spark source: messages per second from one broker, end to end into a Spark sink.

Run: ``python benchmarks/bench_spark_source.py [--messages 50000] [--reps 3] [--batch 10000]
[--partitions 1,2,4]``

One ActiveMQ broker (full-JIT flags, store in memory unless ``--store disk``), ``local[2]``
Spark, 128-byte persistent messages queued before the query starts (sent with the library's
confirmation window). A streaming query reads them with ``format("failover")`` and writes to
Spark's ``noop`` sink: every message is received on the driver, spooled (``numPartitions``
Arrow files per batch under the checkpoint, written before its offsets are reported), read back
by that many executor tasks, and acknowledged to the broker after Spark committed its batch.

The alternative in the same run: plain stomp.py consumers of the same queue, with the same
guarantee (every message acknowledged after it was handled, the same prefetch as the source's),
timed from SUBSCRIBE to the last acknowledgement written (``benchmarks/_stomp_anchor.py``):
cumulative ``client`` acknowledgements every 100 and every 50 messages, written from stomp.py's
reading thread or from a thread of their own; the fastest of them by median is the anchor of
the ratios (cumulative every batch stalls after ActiveMQ's first page of 200: not run). An
extra row: ``client-individual`` with one ACK per message from the listener
(it can deadlock with ActiveMQ, docs/receiving.md; a run with no message for 15 s is closed and
reported as stalled). Each round runs the plain consumers, then the source once per
``--partitions`` value; every other round the other way round, each in reverse order (the
machine is noisy); figures are medians over ``--reps`` rounds, after an unrecorded warm-up
round that starts the Python workers and warms the broker.

* ``source msg/s`` (the headline): messages over the time from the start of the query's first
  batch (the ``timestamp`` of its first progress event: when that trigger began) to the end of
  the batch that took the last one (its ``timestamp`` plus its ``triggerExecution``). Spark's
  own query start-up comes before that first trigger (the JVM's stream thread, the offset and
  commit logs, the Python worker that runs the source); it is a fixed cost of every Spark
  source, Kafka's included, and the plain consumer has no counterpart for it: its process
  start, connect and SUBSCRIBE are not timed either. With ``--messages 100000`` and batches of
  10,000, a batch's fixed cost (Spark's planning, offset and commit logs, task launch; the
  source's plan) shows ten times over;
* ``from start()``: the same messages over the time from ``start()`` (query start-up
  included), an extra row for who wants the whole wait;
* ``steady``: messages of every batch after the first over the time from the end of the first
  batch to the end of the last;
* ``acknowledged``: the queue is empty on the broker (every message acknowledged) this long
  after the last batch ended: the ack of a batch waits for the next plan (Spark commits
  batch N when it plans N+1);
* ``ratio``: the source's rate (headline) over the anchor's rate of the same round;
* ``median_ms``: the median of each of Spark's ``durationMs`` parts over a run's full batches
  (``latestOffset`` is the source's plan: acknowledging, taking, spooling);

* ``source process peak RSS``: the peak resident memory (``VmHWM``) of the Python worker that
  runs the source on the driver (the one of Spark's workers connected to the broker), the
  most of any round.

Target: the source's rate (headline) >= 0.8x the anchor's (the fastest plain consumer).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
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
from benchmarks._proc_rss import clients_of, memory  # noqa: E402
from benchmarks._stomp_anchor import Anchor, anchors, consume  # noqa: E402
from failover_client import FailoverConnection  # noqa: E402
from failover_client.spark import register  # noqa: E402
from failover_client.testing.brokers import Broker, Cluster  # noqa: E402
from failover_client.testing.spark import SparkSessions  # noqa: E402

BODY = "x" * 128
STORES = {"disk": None, "memory": "/dev/shm"}
TARGET = 0.8
"""The source's rate (headline) as a share of the fastest plain stomp.py consumer's (same round)."""


class Batches:
    """Every micro-batch of each query that took messages: when it began and ended (Spark's
    progress timestamps), its rows and the ``durationMs`` parts."""

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
                began = datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00"))
                ms = dict(progress.durationMs)
                record = {
                    "began": began.timestamp(),
                    "ended": began.timestamp() + ms.get("triggerExecution", 0) / 1000,
                    "batch": progress.batchId,
                    "rows": progress.numInputRows,
                    "ms": ms,
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


def plain_stomp(cluster: Cluster, messages: int, batch: int, anchor: Anchor) -> dict[str, Any]:
    """The same queue read by hand with stomp.py the way ``anchor`` says."""
    destination = f"/queue/bench.spark.plain.{uuid.uuid4().hex[:8]}"
    precreate(cluster, destination)
    fill_rate = fill(cluster.failover_uri("stomp"), destination, messages)
    endpoint = cluster[0].endpoint("stomp")
    run = consume(endpoint.host, endpoint.port, destination, messages, 2 * batch, anchor)
    if run["stalled"]:
        # What a stalled run left would hold the broker's memory and slow the runs after it.
        left = messages - run["arrived"]
        cluster[0].drain(destination, timeout=300.0, idle=2.0, expect=left)
    return {**run, "fill_per_s": round(fill_rate)}


def one_run(
    cluster: Cluster, spark: Any, batches: Batches, messages: int, batch: int, partitions: int
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
        .option("numPartitions", partitions)
        .load()
    )
    started = time.time()
    query = frame.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
    try:
        seen = batches.wait_rows(str(query.id), messages)
        if sum(r["rows"] for r in seen) < messages:
            raise RuntimeError(f"the query stopped short: {query.exception()}")
        last = seen[-1]["ended"]
        acked = emptied(broker, destination, last)
        source_memory = driver_memory(broker)
    finally:
        query.stop()
    rows = sum(r["rows"] for r in seen)
    steady_rows = rows - seen[0]["rows"]
    steady_time = last - seen[0]["ended"]
    full = [r for r in seen if r["rows"] >= batch] or seen
    return {
        "partitions": partitions,
        "messages": rows,
        "fill_per_s": round(fill_rate),
        "per_s": rows / (last - seen[0]["began"]),
        "from_start_per_s": rows / (last - started),
        "first_batch_after_start_s": round(seen[0]["began"] - started, 2),
        "steady_per_s": steady_rows / steady_time if steady_time > 0 else None,
        "batches": len(seen),
        "batch_rows": [r["rows"] for r in seen],
        "median_ms": {
            part: statistics.median(r["ms"].get(part, 0) for r in full)
            for part in sorted(full[0]["ms"])
        },
        "acknowledged_after_s": None if acked is None else round(acked, 2),
        **source_memory,
    }


def driver_memory(broker: Broker) -> dict[str, Any]:
    """The resident memory of the Python worker that runs the source on the driver.

    Of the Python processes below this one (Spark's JVM and its workers) it is the one
    connected to the broker's STOMP port: executor tasks read spool files only.
    """
    found = clients_of(broker.endpoint("stomp").port)
    if len(found) != 1:
        log(f"source process not found by its broker connection: {found}")
        return {}
    figures = memory(found[0])
    return {f"source_{key}_mb": round(value / 2**20, 1) for key, value in figures.items()}


def one_round(
    cluster: Cluster,
    spark: Any,
    batches: Batches,
    args: argparse.Namespace,
    counts: list[int],
    rep: int,
) -> dict[str, Any]:
    """Every plain consumer, then the source at each partition count, or the other way round
    and in reverse order every other round (the machine is noisy)."""
    kinds = anchors()
    forward = rep % 2 == 0

    def plains() -> dict[str, dict[str, Any]]:
        ordered = kinds if forward else list(reversed(kinds))
        return {a.name: plain_stomp(cluster, args.messages, args.batch, a) for a in ordered}

    def sources() -> dict[int, dict[str, Any]]:
        ordered = counts if forward else list(reversed(counts))
        return {n: one_run(cluster, spark, batches, args.messages, args.batch, n) for n in ordered}

    if forward:
        plain, source = plains(), sources()
    else:
        source, plain = sources(), plains()
    shown_plain = "; ".join(
        f"{name} {run['per_s']:,.0f}"
        if not run["stalled"]
        else f"{name} stalled after {run['arrived']:,}"
        for name, run in plain.items()
    )
    shown = ", ".join(
        f"{n}p {run['per_s']:,.0f} (from start() {run['from_start_per_s']:,.0f})"
        for n, run in sorted(source.items())
    )
    log(
        f"{'warm-up' if rep == 0 else f'round {rep}'}: plain stomp.py {shown_plain}; source {shown}"
    )
    return {"plain": plain, "source": {str(n): r for n, r in source.items()}}


def summarise(
    rounds: list[dict[str, Any]],
    counts: list[int],
    args: argparse.Namespace,
    result: dict[str, Any],
) -> tuple[dict[str, Any], str]:
    """Medians per consumer; the source's ratio against the fastest plain consumer (the one
    with the highest median), round by round."""
    plain_medians: dict[str, Any] = {}
    for anchor in anchors():
        runs = [r["plain"][anchor.name] for r in rounds]
        done = [run["per_s"] for run in runs if not run["stalled"]]
        plain_medians[anchor.name] = {
            "per_s": statistics.median(done) if len(done) == len(runs) else None,
            "stalled_rounds": len(runs) - len(done),
            "arrived_when_stalled": [run["arrived"] for run in runs if run["stalled"]],
        }
    complete = {k: v["per_s"] for k, v in plain_medians.items() if v["per_s"] is not None}
    anchor_name = max(complete, key=lambda k: complete[k])
    anchor_median = complete[anchor_name]
    medians: dict[str, Any] = {
        "plain": plain_medians,
        "anchor": anchor_name,
        "plain_stomp_per_s": anchor_median,
    }
    rows: list[list[object]] = []
    for n in counts:
        runs = [(r["source"][str(n)], r["plain"][anchor_name]["per_s"]) for r in rounds]
        for run, plain in runs:
            run["ratio"] = run["per_s"] / plain
        rate = statistics.median(run["per_s"] for run, _ in runs)
        from_start = statistics.median(run["from_start_per_s"] for run, _ in runs)
        steady = statistics.median(run["steady_per_s"] or 0 for run, _ in runs)
        ratio = statistics.median(run["ratio"] for run, _ in runs)
        start_ratio = statistics.median(run["from_start_per_s"] / p for run, p in runs)
        peaks = [run["source_peak_rss_mb"] for run, _ in runs if "source_peak_rss_mb" in run]
        peak = max(peaks) if peaks else None
        medians[f"partitions_{n}"] = {
            "source_peak_rss_mb": peak,
            "per_s": rate,
            "from_start_per_s": from_start,
            "steady_per_s": steady,
            "ratio": ratio,
            "from_start_ratio": start_ratio,
            "met": ratio >= TARGET,
        }
        shown_peak = "?" if peak is None else f"{peak:,.0f}"
        rows.append(
            [
                f"source, {n}",
                rate,
                steady,
                anchor_median,
                f"{ratio:.2f}x",
                ratio >= TARGET,
                shown_peak,
            ]
        )
        rows.append(
            [
                f"source, {n}, from start()",
                from_start,
                "",
                anchor_median,
                f"{start_ratio:.2f}x",
                "",
                "",
            ]
        )
    for name, figures in plain_medians.items():
        rate = figures["per_s"]
        if rate is None:
            arrived = ", ".join(f"{a:,}" for a in figures["arrived_when_stalled"])
            shown = (
                f"stalled in {figures['stalled_rounds']} of {len(rounds)} rounds (after {arrived})"
            )
            rows.append([f"plain: {name}", shown, "", "", "", "", ""])
        else:
            label = " (the anchor)" if name == anchor_name else ""
            rows.append(
                [
                    f"plain: {name}{label}",
                    rate,
                    "",
                    anchor_median,
                    f"{rate / anchor_median:.2f}x",
                    "",
                    "",
                ]
            )
    text = table(
        f"Spark source into noop vs plain stomp.py consumers, one broker, "
        f"{args.messages:,} messages, batches of {args.batch:,} ({args.store} store, "
        f"median of {args.reps} rounds; load average {result['machine'].get('load_average')} "
        f"at the start, {result['load_average_end']} at the end; "
        f"target {TARGET}x the fastest plain consumer)",
        [
            "consumer (numPartitions)",
            "msg/s (source: first batch to last)",
            "source steady msg/s",
            "anchor msg/s",
            "ratio",
            "met",
            "source process peak RSS MB",
        ],
        rows,
    )
    return medians, text


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10_000, help="maxMessagesPerBatch")
    parser.add_argument("--partitions", default="1,2,4", help="numPartitions values to run")
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    parser.add_argument("--quick", action="store_true", help="2 reps of 20,000 messages")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.messages = 2, 20_000
    counts = [int(n) for n in args.partitions.split(",")]
    started = time.time()
    sessions = SparkSessions(app_name="bench-spark-source")
    spark = sessions.get("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    batches = Batches()
    spark.streams.addListener(batches.listener)
    result: dict[str, Any] = {"benchmark": "spark_source", "machine": machine(), "args": vars(args)}
    rounds: list[dict[str, Any]] = []
    try:
        with brokers(1, label="spark-src", full_jit=True, store=STORES[args.store]) as cluster:
            warm(cluster[0], "/queue/bench.warmup", 5000)
            for rep in range(args.reps + 1):  # round 0 warms Spark's workers and the broker
                rounds.append(one_round(cluster, spark, batches, args, counts, rep))
    finally:
        spark.streams.removeListener(batches.listener)
        sessions.stop()
    rounds = rounds[1:]  # the warm-up round is not recorded
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    medians, text = summarise(rounds, counts, args, result)
    result["rounds"] = rounds
    result["medians"] = medians
    result["target"] = {"ratio": TARGET}
    result["table"] = text
    result["seconds"] = round(time.time() - started, 1)
    path = write_json("spark_source", result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
