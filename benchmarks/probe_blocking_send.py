"""Where a blocking ``send()``'s frames are written, and how much its rate moves from run to run.

Run: ``python benchmarks/probe_blocking_send.py [--rounds 6] [--messages 1000] [--store memory]``

One ActiveMQ Classic broker (full-JIT flags, store in memory by default). Each round runs raw
stomp.py with a receipt awaited per message, then ``FailoverConnection.send`` twice, then raw
again (A B B A), each on a fresh existing queue purged afterwards, ``--messages`` persistent
128-byte messages each. For every run it prints the rate, the client's CPU per message and
how our frame writer wrote the SENDs: ``inline`` (on the sending thread, no hand-off) or
``queued`` (handed to the writer thread; ``FrameWriter`` wakes or starts it). To count them it
wraps two private methods of ``failover_client.net._writer.FrameWriter`` in this process.

The point is the spread: the two runs of one method within a round, seconds apart, against
the ratio between the methods.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, precreate, warm
from benchmarks._raw import RawSender, purge
from failover_client import FailoverConnection
from failover_client.net import _writer

BODY = b"x" * 128
PERSISTENT = {"persistent": "true"}
STORES = {"disk": None, "memory": "/dev/shm"}

counts = {"inline": 0, "queued": 0}


def _count_writes() -> None:
    """Count inline writes and hand-offs to the writer thread (this process only)."""
    inline = _writer.FrameWriter._write_inline
    wake = _writer.FrameWriter._wake_locked

    def write_inline(self: Any, data: Any) -> None:
        counts["inline"] += 1
        inline(self, data)

    def wake_locked(self: Any) -> None:
        counts["queued"] += 1
        wake(self)

    _writer.FrameWriter._write_inline = write_inline  # type: ignore[method-assign]
    _writer.FrameWriter._wake_locked = wake_locked  # type: ignore[method-assign]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=1000, help="per run")
    parser.add_argument("--store", choices=sorted(STORES), default="memory")
    args = parser.parse_args(argv)
    _count_writes()
    rates: dict[str, list[float]] = {"raw": [], "failover": []}
    with brokers(1, label="blocking", full_jit=True, store=STORES[args.store]) as cluster:
        broker = cluster[0]
        host = (broker.endpoint("stomp").host, broker.endpoint("stomp").port)
        warm(broker, "/queue/bench.warmup", 5000)
        raw = RawSender(host)
        fc = FailoverConnection(cluster.failover_uri("stomp"))
        fc.connect()

        def raw_run(dest: str) -> None:
            for _ in range(args.messages):
                raw.send_confirmed(dest, BODY, PERSISTENT)

        def fc_run(dest: str) -> None:
            for _ in range(args.messages):
                fc.send(dest, BODY, PERSISTENT)

        order: list[tuple[str, Callable[[str], None]]] = [
            ("raw", raw_run),
            ("failover", fc_run),
            ("failover", fc_run),
            ("raw", raw_run),
        ]
        try:
            for rnd in range(args.rounds + 1):  # round 0 warms up, not recorded
                seconds = {"raw": 0.0, "failover": 0.0}
                for name, run in order:
                    dest = f"/queue/bench.blocking.{uuid.uuid4().hex[:8]}"
                    precreate(cluster, dest)
                    before = dict(counts)
                    cpu = _cpu()
                    start = time.perf_counter()
                    run(dest)
                    elapsed = time.perf_counter() - start
                    cpu = _cpu() - cpu
                    purge(host, dest)
                    seconds[name] += elapsed
                    log(
                        f"round {rnd} {name:8} {args.messages / elapsed:7,.0f} msg/s "
                        f"{cpu / args.messages * 1e6:6.1f} us CPU/msg, SENDs written inline "
                        f"{counts['inline'] - before['inline']}, writer-thread hand-offs "
                        f"{counts['queued'] - before['queued']}; load {os.getloadavg()[0]:.2f}"
                    )
                if rnd:
                    for name, total in seconds.items():
                        rates[name].append(2 * args.messages / total)
        finally:
            fc.close()
            raw.close()
    pairs = [a / b for a, b in zip(rates["failover"], rates["raw"], strict=True)]
    print(f"failover send(): {[round(r) for r in rates['failover']]} msg/s")
    print(f"raw receipt-per-message: {[round(r) for r in rates['raw']]} msg/s")
    print(
        f"paired ratios {[round(p, 2) for p in pairs]}, median {statistics.median(pairs):.3f}; "
        f"ratio of medians "
        f"{statistics.median(rates['failover']) / statistics.median(rates['raw']):.3f}"
    )


if __name__ == "__main__":
    main()
