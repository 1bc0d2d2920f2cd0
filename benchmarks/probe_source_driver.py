"""The Spark source's driver driven as Spark drives it, without Spark: stalls and batch times.

Run: ``python benchmarks/probe_source_driver.py [--messages 100000] [--batch 10000] [--runs 1]
[--spark-part 0.5]``

Each run starts one ActiveMQ broker (store in memory), queues ``--messages``, opens the
source's driver (``SourceDriver``) and calls ``latest`` and ``planned`` in a loop as Spark's
micro-batches do, by default with no pause for Spark's own part of a batch (``--spark-part``
sleeps that long after each batch instead), so the acknowledgements of each committed batch are
written while the broker delivers the next. It prints the wall time of each run, the driver
process's CPU time per message, the batches' count and median size and, per run, the batches whose
``latestOffset`` took longer than ``--stall`` seconds and the connection losses the log
reported. With the DEBUG timeline on (``--timeline``) every offset call is logged as in
docs/spark.md.

This is where the ActiveMQ wedge of docs/receiving.md ("Reading is not always enough") was
caught: while the source wrote one ACK frame per message, every batch's ten thousand at once,
4 of 12 runs stalled for the 15 s of the heart-beat limit, and the reconnect was then refused
as "already connected" for 104-110 s. The source now writes one cumulative ACK per session.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, precreate
from benchmarks.bench_spark_source import fill
from failover_client.spark._options import source_options
from failover_client.spark._source import _open_driver


class Losses(logging.Handler):
    """Counts what the connection logged about losses and refused reconnects."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if " lost " in text or "reconnect attempt" in text:
            self.lines.append(f"{time.strftime('%H:%M:%S')} {text[:160]}")


def one_run(
    messages: int, batch: int, stall: float, spark_part: float
) -> tuple[float, float, list[str], list[int]]:
    """One broker, one queue, one driver: (wall seconds, this process's CPU seconds, the slow
    offset calls, each batch's size). The broker is another process: the CPU is the driver's
    (all its threads). ``spark_part``: seconds slept after each batch's ``planned``, where Spark
    would run the batch (the driver's threads go on receiving meanwhile)."""
    sizes: list[int] = []
    slow: list[str] = []
    with brokers(1, store="/dev/shm") as cluster:
        dest = f"/queue/probe.{uuid.uuid4().hex[:8]}"
        precreate(cluster, dest)
        uri = cluster.failover_uri("stomp")
        fill(uri, dest, messages)
        options = source_options(
            {
                "uri": uri,
                "destination": dest,
                "checkpointLocation": tempfile.mkdtemp(),
                "maxMessagesPerBatch": str(batch),
            }
        )
        driver = _open_driver(options)
        try:
            driver.consumer.wait_delivery(30.0)
            started, cpu = time.perf_counter(), time.process_time()
            end = driver.initial()
            while end < messages:
                asked = time.perf_counter()
                new = driver.latest(end, batch)
                took = time.perf_counter() - asked
                if took > stall:
                    slow.append(f"latestOffset {end}..{new} took {took:.1f} s")
                if new > end:
                    driver.planned(end, new)
                    sizes.append(new - end)
                    time.sleep(spark_part)
                end = new
            driver.commit(end)
            return time.perf_counter() - started, time.process_time() - cpu, slow, sizes
        finally:
            driver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--stall", type=float, default=10.0, help="seconds that count as a stall")
    parser.add_argument("--timeline", action="store_true", help="log every offset call")
    parser.add_argument(
        "--spark-part",
        type=float,
        default=0.0,
        help="seconds slept after each batch, where Spark would run it (0.5 is about its part "
        "of a 10,000-message batch on 2 cores)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    losses = Losses()
    logging.getLogger("failover_client").addHandler(losses)
    logging.getLogger("failover_client").setLevel(logging.INFO)
    if args.timeline:
        logging.getLogger("failover_client.spark").setLevel(logging.DEBUG)
    for run in range(1, args.runs + 1):
        losses.lines.clear()
        wall, cpu, slow, sizes = one_run(args.messages, args.batch, args.stall, args.spark_part)
        print(
            f"run {run}: {args.messages} messages in {wall:.1f} s, "
            f"{cpu / args.messages * 1e6:.1f} us of the driver process's CPU per message, "
            f"{len(sizes)} batches (median {statistics.median(sizes):,.0f})",
            flush=True,
        )
        for line in slow + losses.lines:
            print(f"  {line}", flush=True)


if __name__ == "__main__":
    main()
