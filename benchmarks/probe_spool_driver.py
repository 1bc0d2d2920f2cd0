"""The Spark source's driver without Spark: the DEBUG timeline of each plan, old and new spool path.

Run: ``python benchmarks/probe_spool_driver.py [--messages 100000] [--batch 10000] [--rounds 2]``

One ActiveMQ broker (full-JIT flags, store in ``/dev/shm``). For each path, a fresh queue is
filled with ``--messages`` 128-byte persistent messages (the library's confirmation window), and
a ``SourceDriver`` over a real ``Consumer`` plans batches of ``--batch`` the way Spark's offset
calls do (``latestOffset`` from the last end, taken as committed, then ``partitions``), with no
Spark in between: its receiving thread and its acknowledging thread run while it builds each
batch's table and files, as they do in a query. Printed per round: messages per second through
the driver, and the medians over the full batches of the timeline's steps (``rows``: the table
or the rows; ``spool``: the files; ``acknowledge`` includes awaiting the previous batch's
confirmation, which Spark's own part of a batch would hide). The old path is the per-message
one of ``benchmarks/bench_spool_table.py``. Paths alternate in order from round to round.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, warm
from benchmarks.bench_spark_source import fill
from benchmarks.bench_spool_table import old_encode
from failover_client.spark import _driver, source_options
from failover_client.spark._consumer import Consumer
from failover_client.spark._driver import SourceDriver
from failover_client.spark._fs import Location
from failover_client.spark._partitions import slices
from failover_client.spark._spool import Spool, SpoolBatch
from tests.spool_support import SpooledMessage, rows_of

STEPS = ("rows", "spool", "take", "acknowledge", "await")


def old_write_parts(spool: Spool, start: int, rows: list[SpooledMessage], parts: int) -> SpoolBatch:
    location = Location(spool.url)
    for begin, end in slices(len(rows), parts):
        data = old_encode(start + begin, rows[begin:end])
        location.write_bytes(SpoolBatch(start + begin, start + end).name, data)
    return SpoolBatch(start, start + len(rows))


PATHS: dict[str, tuple[Any, Any]] = {
    "old": (rows_of, old_write_parts),
    "new": (_driver.spool_table, _driver.write_parts),
}


class Timeline(logging.Handler):
    """The steps of every ``latestOffset`` line of the driver's DEBUG timeline."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.plans: list[dict[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "latestOffset" in text and "rows=" in text:
            self.plans.append({k: float(v) for k, v in re.findall(r"(\w+)=(\d+)ms", text)})


def run(uri: str, path: str, messages: int, batch: int) -> tuple[float, dict[str, float]]:
    _driver.spool_table, _driver.write_parts = PATHS[path]  # type: ignore[assignment]
    destination = f"/queue/probe.spool.{uuid.uuid4().hex[:8]}"
    fill(uri, destination, messages)
    checkpoint = tempfile.mkdtemp(prefix="fc-probe-spool-")
    options = source_options(
        {
            "uri": uri,
            "destination": destination,
            "checkpointLocation": checkpoint,
            "maxMessagesPerBatch": str(batch),
        }
    )
    spool = Spool.open(checkpoint, {"destinations": [destination], "selector": None})
    consumer = Consumer(options)
    consumer.start()
    driver = SourceDriver(options, spool, consumer)
    timeline = Timeline()
    log = logging.getLogger("failover_client.spark")
    log.addHandler(timeline)
    log.setLevel(logging.DEBUG)
    began = time.perf_counter()
    start = 0
    try:
        while start < messages:
            end = driver.latest(start, batch)
            driver.planned(start, end)
            start = end
        driver.latest(start, batch)  # acknowledges the last batch
        elapsed = time.perf_counter() - began
    finally:
        log.removeHandler(timeline)
        driver.close()
    full = timeline.plans[1:-1] or timeline.plans
    return messages / elapsed, {k: statistics.median(p.get(k, 0.0) for p in full) for k in STEPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, dict[str, float]]]] = {"old": [], "new": []}
    with brokers(1, label="probe-spool", full_jit=True, store="/dev/shm") as cluster:
        warm(cluster[0], "/queue/probe.warm", 5000)
        uri = cluster.failover_uri("stomp")
        for n in range(args.rounds):
            for path in ("old", "new") if n % 2 == 0 else ("new", "old"):
                rate, steps = run(uri, path, args.messages, args.batch)
                results[path].append((rate, steps))
                print(f"round {n} {path}: {rate:,.0f} msg/s, medians (ms) {steps}", flush=True)
    for path, runs in results.items():
        steps = {k: statistics.median(s[k] for _, s in runs) for k in STEPS}
        rates = ", ".join(f"{rate:,.0f}" for rate, _ in runs)
        print(f"{path}: {rates} msg/s; medians over rounds (ms) {steps}")


if __name__ == "__main__":
    main()
