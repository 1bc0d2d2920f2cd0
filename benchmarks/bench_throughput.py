"""Send throughput on one broker: FailoverConnection vs raw stomp.py, in the same run.

Run: ``python benchmarks/bench_throughput.py [--reps 5] [--scale 1.0] [--quick]``

One ActiveMQ Classic broker (full-JIT JVM flags) on loopback, warmed up first (a few thousand
messages through the harness, then one unrecorded round of every method). Each repetition
runs every method twice with half the messages each time: down the list, then back up it
(A B ... Y Z Z Y ... B A). So each method and the one it is compared with run in both orders
within one repetition, and a repetition's ratio does not depend on which of them goes first.
With one fixed order it did on this machine: the unconfirmed pair measured 0.78-0.91 in five
runs with raw stomp.py first and 1.12 in one with failover-client first. Every run goes to a
fresh queue that already exists (created and drained once before), and the queue is purged
afterwards so no run pays for another's backlog. Bodies are 128 bytes.

The whole set runs twice: with the broker's store on disk (KahaDB syncs every persistent
message before its receipt, so the broker, not the client, bounds one connection's confirmed
rate) and with the store in memory (/dev/shm), where the client's own cost shows. Reported:
messages per second (median over repetitions; a repetition's rate is both halves' messages
over both halves' time) and the ratio against the raw stomp.py method it is compared with,
and the CPU per message of the client process and of the broker's JVM (``/proc``), medians:
client and broker share the cores, so on the memory store the broker's CPU per message is as
much the rate as the client's.

Confirmed, persistent (``persistent:true``, the broker writes each to its store):

* ``raw receipt-per-message``: stomp.py ``send(..., receipt=...)`` then wait for that receipt;
  the only way stomp.py can prove a message arrived;
* ``raw receipts, awaited at the end``: reference only, stomp.py sending with receipts without
  waiting for each (what an application would have to hand-write to pipeline);
* ``raw transactions of 256, commit receipts (reference)``: stomp.py BEGIN, 256 SENDs, COMMIT
  with a receipt, all awaited at the end (what group commit does, hand-written);
* ``raw transactions of 256 with the id header (reference)``: the same, each SEND also
  carrying the one header failover-client adds to a confirmed send on ActiveMQ Classic
  (``failover-message-id``, unique per message, in its format): ActiveMQ keeps it as a message
  property, so this row shows what the id costs the broker, apart from the client
  (``probe_send_headers.py`` takes the headers apart one by one);
* ``failover send()``: ``FailoverConnection.send`` (blocks until confirmed, one at a time);
* ``failover send_async()+flush()``: pipelined within the confirmation window (default 1024),
  URI defaults: ``confirmMode=auto``, which on ActiveMQ Classic group-commits the sends that
  are written together in one transaction confirmed by its COMMIT's receipt;
* ``failover send_async()+flush(), confirmMode=receipt``: the same with one receipt per send;
* ``failover send_async()+flush(), dedup=off``: group commit without ``_AMQ_DUPL_ID``; on
  ActiveMQ Classic, which drops no copy by it, ``dedup=auto`` sends none either, so this row
  and the default's carry the same one id header per send, and it is compared with the
  hand-written transactions that carry that header too.

Unconfirmed (fire-and-forget, ``persistent:false``), each loop ended by one confirmed message
so the clock stops when the broker has really taken everything:

* ``raw send()``: stomp.py ``send`` without a receipt;
* ``failover send(confirm=False)``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, machine, precreate, ratio, table, warm, write_json
from benchmarks._consume_io import cpu_seconds
from benchmarks._raw import RawSender, purge
from failover_client import FailoverConnection
from failover_client.testing.brokers import Cluster

BODY = b"x" * 128
PERSISTENT = {"persistent": "true"}
TRANSIENT = {"persistent": "false"}

Method = Callable[[str, int], None]

STORES = {"disk": None, "memory": "/dev/shm"}


def methods(
    raw: RawSender,
    fc: FailoverConnection,
    fc_receipts: FailoverConnection,
    fc_one_id: FailoverConnection,
) -> dict[str, tuple[Method, int]]:
    """name -> (run(destination, count), base message count)."""

    def raw_confirmed(dest: str, n: int) -> None:
        for _ in range(n):
            raw.send_confirmed(dest, BODY, PERSISTENT)

    def raw_pipelined(dest: str, n: int) -> None:
        # Reference only: stomp.py with receipts, all awaited at the end (hand-written pipelining)
        receipts = [raw.send_with_receipt(dest, BODY, PERSISTENT) for _ in range(n)]
        raw.wait_receipts(receipts)

    def raw_transactions(dest: str, n: int) -> None:
        # Reference only: group commit written by hand with stomp.py.
        receipts = []
        for start in range(0, n, 256):
            receipts.append(raw.send_transaction(dest, BODY, PERSISTENT, min(256, n - start)))
        raw.wait_receipts(receipts)

    def raw_transactions_with_ids(dest: str, n: int) -> None:
        # Reference only: the hand-written transactions with failover-client's id header.
        receipts = []
        for start in range(0, n, 256):
            receipts.append(
                raw.send_transaction_with_ids(dest, BODY, PERSISTENT, min(256, n - start))
            )
        raw.wait_receipts(receipts)

    def fc_blocking(dest: str, n: int) -> None:
        for _ in range(n):
            fc.send(dest, BODY, PERSISTENT)

    def fc_pipelined(dest: str, n: int) -> None:
        for _ in range(n):
            fc.send_async(dest, BODY, PERSISTENT)
        fc.flush()

    def fc_pipelined_receipts(dest: str, n: int) -> None:
        for _ in range(n):
            fc_receipts.send_async(dest, BODY, PERSISTENT)
        fc_receipts.flush()

    def fc_pipelined_one_id(dest: str, n: int) -> None:
        for _ in range(n):
            fc_one_id.send_async(dest, BODY, PERSISTENT)
        fc_one_id.flush()

    def raw_unconfirmed(dest: str, n: int) -> None:
        for _ in range(n - 1):
            raw.send(dest, BODY, TRANSIENT)
        raw.send_confirmed(dest, BODY, TRANSIENT)

    def fc_unconfirmed(dest: str, n: int) -> None:
        for _ in range(n - 1):
            fc.send(dest, BODY, TRANSIENT, confirm=False)
        fc.send(dest, BODY, TRANSIENT)

    return {
        # Blocking rows: a half of a repetition must outlast the scheduler's noise. At 500
        # messages (0.1-0.25 s on the memory store) one descheduling moved a half's rate 2-3x
        # and the paired median of a run between 0.52x and 1.15x; at 2,000, 0.99-1.07x.
        "raw receipt-per-message": (raw_confirmed, 8000),
        "raw receipts, awaited at the end (reference)": (raw_pipelined, 8000),
        "raw transactions of 256, commit receipts (reference)": (raw_transactions, 16000),
        "raw transactions of 256 with the id header (reference)": (
            raw_transactions_with_ids,
            16000,
        ),
        "failover send()": (fc_blocking, 8000),
        "failover send_async()+flush()": (fc_pipelined, 16000),
        "failover send_async()+flush(), confirmMode=receipt": (fc_pipelined_receipts, 8000),
        "failover send_async()+flush(), dedup=off": (fc_pipelined_one_id, 16000),
        "raw send() unconfirmed": (raw_unconfirmed, 30000),
        "failover send(confirm=False)": (fc_unconfirmed, 30000),
    }


# Each method against what a competent user would write for the same guarantee: group commit
# against hand-written transactions (its ratio against one receipt per message follows from
# the table: the rows are in the same run).
COMPARE = {
    "failover send()": ("raw receipt-per-message", 1.0),
    "failover send_async()+flush()": ("raw transactions of 256, commit receipts (reference)", 0.95),
    "failover send_async()+flush(), confirmMode=receipt": ("raw receipt-per-message", None),
    # The same SEND headers on both sides: what is left is the client.
    "failover send_async()+flush(), dedup=off": (
        "raw transactions of 256 with the id header (reference)",
        None,
    ),
    "failover send(confirm=False)": ("raw send() unconfirmed", 0.95),
}


def run(cluster: Cluster, reps: int, scale: float, only: list[str] | None = None) -> dict[str, Any]:
    """Every method (or those whose names contain one of ``only``) ``reps`` times (after one
    warm-up round) on ``cluster[0]``."""
    broker = cluster[0]
    host = (broker.endpoint("stomp").host, broker.endpoint("stomp").port)
    warm(broker, "/queue/bench.warmup", 5000)
    raw = RawSender(host)
    fc = FailoverConnection(cluster.failover_uri("stomp"))
    fc.connect()
    fc_receipts = FailoverConnection(cluster.failover_uri("stomp", {"confirmMode": "receipt"}))
    fc_receipts.connect()
    fc_one_id = FailoverConnection(cluster.failover_uri("stomp", {"dedup": "off"}))
    fc_one_id.connect()
    try:
        table_of = methods(raw, fc, fc_receipts, fc_one_id)
        if only:
            table_of = {k: v for k, v in table_of.items() if any(o in k for o in only)}
        rates: dict[str, list[float]] = {name: [] for name in table_of}
        cpu_us: dict[str, list[float]] = {name: [] for name in table_of}
        broker_us: dict[str, list[float]] = {name: [] for name in table_of}
        names = list(table_of)
        for rep in range(reps + 1):  # round 0 is the warm-up, not recorded
            # name -> [messages, seconds, CPU seconds, broker CPU seconds] over this
            # repetition's two halves
            totals = {name: [0, 0.0, 0.0, 0.0] for name in names}
            for half in (names, names[::-1]):  # A B ... Z then Z ... B A (see the docstring)
                for name in half:
                    method, base = table_of[name]
                    count = max(50, int(base * scale / 2))
                    elapsed, cpu, broker_cpu = _timed(cluster, host, method, count)
                    total = totals[name]
                    total[0] += count
                    total[1] += elapsed
                    total[2] += cpu
                    total[3] += broker_cpu
                    log(
                        f"{'warm-up' if rep == 0 else f'rep {rep}'}: {name:32} "
                        f"{count:>6} msgs {count / elapsed:>9,.0f} msg/s "
                        f"{cpu / count * 1e6:6.1f} us CPU/msg "
                        f"(broker {broker_cpu / count * 1e6:.1f})"
                    )
            if rep > 0:
                for name, (count, elapsed, cpu, broker_cpu) in totals.items():
                    rates[name].append(count / elapsed)
                    cpu_us[name].append(cpu / count * 1e6)
                    broker_us[name].append(broker_cpu / count * 1e6)
        stats = fc.stats()
    finally:
        fc_one_id.close()
        fc_receipts.close()
        fc.close()
        raw.close()
    medians = {name: statistics.median(r) for name, r in rates.items()}
    cpu = {name: round(statistics.median(r), 1) for name, r in cpu_us.items()}
    broker = {name: round(statistics.median(r), 1) for name, r in broker_us.items()}
    return {
        "rates": rates,
        "medians": medians,
        "cpu_us": cpu,
        "broker_cpu_us": broker,
        "client_stats": stats,
    }


def _timed(
    cluster: Cluster, host: tuple[str, int], method: Method, count: int
) -> tuple[float, float, float]:
    """Run ``method`` once to a fresh, existing queue, then purge it: (seconds, CPU seconds,
    the broker's CPU seconds meanwhile; 0 when its process cannot be read)."""
    dest = f"/queue/bench.tp.{uuid.uuid4().hex[:8]}"
    precreate(cluster, dest)
    pid = cluster[0].pid
    broker_start = cpu_seconds(pid)
    cpu_start = _cpu()
    start = time.perf_counter()
    method(dest, count)
    elapsed = time.perf_counter() - start
    cpu = _cpu() - cpu_start
    broker_end = cpu_seconds(pid)
    purge(host, dest)
    broker = 0.0 if broker_start is None or broker_end is None else broker_end - broker_start
    return elapsed, cpu, broker


def _cpu() -> float:
    """CPU seconds used by this process so far (every thread, user + system).

    Unlike wall time it does not count time the process spent waiting for the broker or for
    a core held by another process, so it shows the client's own cost on a shared machine.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies message counts")
    parser.add_argument(
        "--quick", action="store_true", help="2 repetitions, a quarter of the counts"
    )
    parser.add_argument(
        "--stores",
        nargs="+",
        choices=sorted(STORES),
        default=["disk", "memory"],
        help="where the broker's message store lives: disk (fsync per persistent message, "
        "which bounds one connection's confirmed rate) or memory (/dev/shm)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="TEXT",
        help="run only the methods whose names contain one of these texts, e.g. "
        "--only 'receipt-per-message' 'send()'",
    )
    parser.add_argument(
        "--output",
        metavar="NAME",
        help="write the result to benchmarks/results/NAME.json, a partial (--only) run too "
        "(default: throughput.json, for a full run only)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.scale = 2, 0.25
    started = time.time()
    cases: dict[str, Any] = {}
    text = ""
    for store in args.stores:
        where = STORES[store]
        log(f"store: {store} ({where or 'system temporary directory'})")
        with brokers(1, label="throughput", full_jit=True, store=where) as cluster:
            measured = run(cluster, args.reps, args.scale, args.only)
        medians = measured["medians"]
        rows = []
        comparisons: dict[str, Any] = {}
        for name, median in medians.items():
            base_name, target = COMPARE.get(name, (None, None))
            if base_name not in medians:
                base_name = None
            r = ratio(median, medians[base_name]) if base_name else None
            paired = None
            if base_name:
                # Runs of one repetition ran close together and in both orders: their ratio is
                # less exposed to load that comes and goes on a shared machine than a ratio of
                # medians.
                pairs = zip(measured["rates"][name], measured["rates"][base_name], strict=True)
                paired = round(statistics.median(a / b for a, b in pairs), 3)
                comparisons[name] = {
                    "vs": base_name,
                    "ratio_of_medians": r,
                    "median_paired_ratio": paired,
                    "cpu_ratio": ratio(measured["cpu_us"][name], measured["cpu_us"][base_name]),
                    "target": target,
                    "met": None if target is None else bool(paired >= target),
                }
            spread = measured["rates"][name]
            rows.append(
                [
                    name,
                    f"{median:,.0f}",
                    f"{min(spread):,.0f}",
                    f"{max(spread):,.0f}",
                    measured["cpu_us"][name],
                    measured["broker_cpu_us"][name],
                    base_name or "",
                    "" if r is None else f"{r:.2f}x",
                    "" if paired is None else f"{paired:.2f}x",
                    "" if target is None else f">= {target}x",
                ]
            )
        text += table(
            f"Throughput, one ActiveMQ broker, store on {store}, 128-byte bodies, "
            f"median of {args.reps} reps (msg/s)",
            [
                "method",
                "median",
                "min",
                "max",
                "client CPU us/msg",
                "broker CPU us/msg",
                "compared with",
                "ratio of medians",
                "median of paired ratios",
                "target",
            ],
            rows,
        )
        cases[store] = {
            "rates_msg_per_s": measured["rates"],
            "medians_msg_per_s": medians,
            "client_cpu_us_per_msg": measured["cpu_us"],
            "broker_cpu_us_per_msg": measured["broker_cpu_us"],
            "comparisons": comparisons,
            "client_stats": measured["client_stats"],
        }
    result = {
        "benchmark": "throughput",
        "machine": machine(),
        "args": vars(args),
        "stores": cases,
        "table": text,
        "seconds": round(time.time() - started, 1),
        "ok": True,
        "notes": "queues exist before each run (sent + drained once); confirmed runs are "
        "persistent, unconfirmed runs non-persistent; client and broker share the machine's "
        "cores",
    }
    if args.output:
        write_json(args.output, result)
    elif not args.only:  # a partial run must not replace the full run's tracked result file
        write_json("throughput", result)
    return result


if __name__ == "__main__":
    main()
