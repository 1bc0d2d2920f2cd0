"""AMQP 1.0 on RabbitMQ: FailoverConnection over amqp:// vs raw python-qpid-proton, in one run.

Run: ``python benchmarks/bench_amqp.py [--kills 20] [--raw-kills 5] [--reps 6]
[--blocks 1] [--chaos-seconds 120] [--only throughput failover chaos] [--name amqp] [--quick]``

Two independent RabbitMQ nodes (AMQP 1.0 plugin) on loopback. Every queue is pre-declared
durable on both nodes and addressed as ``/amq/queue/<name>``; FailoverConnection members name
``vhost=/`` and log in as the nodes' user. This module holds the arguments, the targets and the
tables; the runs are in ``_amqp_series.py`` (throughput, failover) and ``_amqp_chaos.py``, the
raw proton drivers in ``_amqp_raw.py``.

Throughput (node 0; 128-byte non-durable messages to one queue capped at 1,000 messages, the
oldest dropped, so no run pays for another's backlog). Each repetition runs every method twice
with half the messages, down the list and back up (A B ... Z Z ... B A), so each pair runs in
both orders; reported are medians over repetitions and ratios of medians, and the client's CPU
per message (the process's CPU time, every thread, over the method's messages; for the raw
methods it includes their connect and close):

* ``failover send_async()+flush()`` (the confirmation window) vs ``raw Container, acceptance
  tracked`` (target at least 0.9) and vs ``raw BlockingConnection`` (a settlement awaited per
  message; target at least 3);
* ``failover send(confirm=False)`` (pre-settled), the last message confirmed, vs ``raw
  Container, pre-settled`` ending the same way (target at least 0.95);
* ``failover send()`` (one at a time, each confirmed) vs ``raw BlockingConnection`` (target at
  least 1).

Failover: a producer sends durable messages one at a time, each confirmed. Each round SIGKILLs
the node that accepted the last message and takes the time from just before the signal to the
first acceptance by the other node; the killed node is then restarted before the next round.
Series: FailoverConnection (``randomize=false``, other options default); raw proton
``reconnect=Backoff()`` for ``--raw-kills`` consecutive failovers of one connection (its
schedule is never reset); raw proton with its default reconnect (the anchor); then, with half
as many kills, FailoverConnection with ``initialReconnectDelay=0``. EOF: when a bare socket
to the killed node saw the end (no client can notice sooner). ``--blocks N`` runs the
FailoverConnection, default-reconnect and ``initialReconnectDelay=0`` series in N interleaved
turns, so a change in the machine's load falls on them alike. Target for the first series: median
at most 20 ms, p95 at most 60 ms, at least 10 times faster than raw ``Backoff()`` and no slower
than proton's default reconnect (medians; the default is the like-for-like anchor).
Every series' queue is drained from both nodes at the end and compared with the accepted ids.

Chaos: ``--chaos-seconds`` of faults (every ``--interval`` s a random node is SIGKILLed and
restarted, or SIGSTOPped and resumed, after ``--down`` s) under a FailoverConnection producer
(confirmed sends at ``--rate`` per second) and consumer (``client-individual`` acks), both with
``heartbeat=1000,1000`` (the receive half is the AMQP idle timeout, so a hung node is noticed).
The nodes are independent: what the producer left on the node the consumer was not on is found
by the final drain. Checked: no accepted message missing, duplicates counted and named,
threads and open descriptors the same before and after. Exits 1 on a loss or a leak.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._amqp_chaos import run_chaos
from benchmarks._amqp_series import CAP, run_failover, run_throughput
from benchmarks._common import brokers, machine, ratio, table, write_json

COMPARE = {
    "failover send_async()+flush()": [
        ("raw Container, acceptance tracked", 0.9),
        ("raw BlockingConnection, settlement awaited", 3.0),
    ],
    "failover send() (reference)": [("raw BlockingConnection, settlement awaited", 1.0)],
    "failover send(confirm=False)": [("raw Container, pre-settled", 0.95)],
}
"""For each FailoverConnection method: the raw method it is compared with, and the target."""

FAILOVER_HEADER = [
    "series",
    "kills",
    "median",
    "p95",
    "min",
    "max",
    "EOF-median",
    "after-EOF-median",
    "after-EOF-p95",
    "Backoff()-median/this",
    "accepted",
    "lost",
    "dups",
    "unexpected-dups",
    "error",
]


# -- throughput ------------------------------------------------------------------------------


def throughput_tables(result: dict[str, Any], reps: int) -> str:
    """Rates and ratios; adds ``comparisons`` (each with its target, met or not) to ``result``."""
    rates, medians = result["rates_msg_per_s"], result["medians_msg_per_s"]
    cpu = result["median_cpu_us_per_msg"]
    comparisons: list[dict[str, Any]] = []
    rows = []
    for name, median in medians.items():
        rows.append(
            [
                name,
                f"{median:,.0f}",
                f"{min(rates[name]):,.0f}",
                f"{max(rates[name]):,.0f}",
                f"{cpu[name]:,.0f}",
            ]
        )
        for base, target in COMPARE.get(name, []):
            r = ratio(median, medians[base])
            paired = statistics.median(a / b for a, b in zip(rates[name], rates[base], strict=True))
            met = None if target is None else bool(r >= target)
            comparisons.append(
                {
                    "method": name,
                    "vs": base,
                    "ratio_of_medians": r,
                    "target": target,
                    "median_paired_ratio": round(paired, 3),
                    "cpu_ratio_of_medians": ratio(cpu[name], cpu[base]),
                    "met": met,
                }
            )
    result["comparisons"] = comparisons
    text = table(
        f"AMQP throughput, one RabbitMQ node, 128-byte non-durable bodies, median of {reps} "
        "reps (msg/s)",
        ["method", "median", "min", "max", "client CPU µs/msg"],
        rows,
    )
    text += table(
        "AMQP throughput ratios (ratio of medians; median of the per-repetition ratios beside it)",
        [
            "method",
            "compared with",
            "ratio of medians",
            "paired ratio",
            "CPU/msg ratio",
            "target",
            "met",
        ],
        [
            [
                c["method"],
                c["vs"],
                f"{c['ratio_of_medians']:.2f}x",
                f"{c['median_paired_ratio']:.2f}x",
                f"{c['cpu_ratio_of_medians']:.2f}x",
                "" if c["target"] is None else f">= {c['target']}x",
                "" if c["met"] is None else ("yes" if c["met"] else "NO"),
            ]
            for c in comparisons
        ],
    )
    return text


# -- failover --------------------------------------------------------------------------------


def failover_tables(series: list[dict[str, Any]]) -> str:
    """The series side by side; adds each one's raw ``Backoff()`` median over its own."""
    backoff = next(
        (s["summary"].get("median_ms", 0) for s in series if s["label"] == "raw proton Backoff()"),
        0,
    )
    rows = []
    for s in series:
        summ, after = s["summary"], s["after_eof_summary"]
        s["raw_backoff_median_over_this"] = ratio(backoff, summ.get("median_ms", 0))
        rows.append(
            [
                s["label"],
                summ.get("n", 0),
                summ.get("median_ms", "-"),
                summ.get("p95_ms", "-"),
                summ.get("min_ms", "-"),
                summ.get("max_ms", "-"),
                s["eof_summary"].get("median_ms", "-"),
                after.get("median_ms", "-"),
                after.get("p95_ms", "-"),
                f"{s['raw_backoff_median_over_this']:.1f}x",
                s["confirmed"],
                s["lost"],
                s["duplicates"],
                len(s["unexpected_duplicates"]),
                s["error"] or "",
            ]
        )
    text = table(
        "AMQP failover after SIGKILL: kill -> first accepted delivery on the other node (ms)",
        FAILOVER_HEADER,
        rows,
    )
    text += (
        "\nEOF = kill -> a bare TCP socket to the killed node sees EOF/RST (no client can notice "
        "sooner).\n"
    )
    print(text.rsplit("\n", 2)[-2])
    each = [[s["label"], ", ".join(f"{x:.0f}" for x in s["samples_ms"])] for s in series]
    text += table("AMQP failover, each kill in order (ms)", ["series", "ms"], each)
    return text


# -- chaos -----------------------------------------------------------------------------------


def chaos_table(ch: dict[str, Any]) -> str:
    leaks = ch["leaks"]
    text = table(
        f"AMQP chaos: {len(ch['actions'])} faults in {ch['seconds']:g} s (2 RabbitMQ nodes, "
        "heartbeat=1000,1000)",
        [
            "accepted",
            "failed sends",
            "received live",
            "drained at end",
            "missing",
            "duplicates",
            "unknown ids",
            "producer failovers",
            "consumer failovers",
            "threads b/a",
            "fds b/a",
        ],
        [
            [
                ch["confirmed"],
                ch["failed_sends"],
                ch["received_live"],
                ch["drained_at_end"],
                ch["missing"],
                ch["duplicates"],
                ch["unknown"],
                len(ch["failover_ms"]["producer"]),
                len(ch["failover_ms"]["consumer"]),
                f"{leaks['threads_before']}/{leaks['threads_after']}",
                f"{leaks['fds_before']}/{leaks['fds_after']}",
            ]
        ],
    )
    if ch["duplicate_ids"]:
        text += (
            "\nduplicates (id x count): "
            + ", ".join(f"{i} x{c}" for i, c in ch["duplicate_ids"].items())
            + "\n"
        )
        print(text.rsplit("\n", 2)[-2])
    return text


# -- main ------------------------------------------------------------------------------------


def targets(result: dict[str, Any]) -> tuple[list[list[object]], bool]:
    rows: list[list[object]] = []
    for c in result.get("throughput", {}).get("comparisons", []):
        if c["target"] is not None:
            rows.append(
                [
                    f"{c['method']} / {c['vs']}",
                    f">= {c['target']}x",
                    f"{c['ratio_of_medians']:.2f}x",
                    c["met"],
                ]
            )
    series = {s["label"]: s for s in result.get("failover", [])}
    fo = series.get("failover", {}).get("summary", {})
    if fo.get("n"):
        rows.append(["failover median", "<= 20 ms", fo["median_ms"], fo["median_ms"] <= 20])
        rows.append(["failover p95", "<= 60 ms", fo["p95_ms"], fo["p95_ms"] <= 60])
        faster = series["failover"].get("raw_backoff_median_over_this", float("nan"))
        rows.append(
            ["raw Backoff() median / failover median", ">= 10x", f"{faster:.1f}x", faster >= 10]
        )
        default = series.get("raw proton default reconnect", {}).get("summary", {})
        if default.get("n"):
            # The like-for-like anchor: proton's own reconnect as a user gets it by default.
            share = ratio(fo["median_ms"], default["median_ms"])
            rows.append(
                [
                    "failover median / proton default reconnect median",
                    "<= 1.0x",
                    f"{share:.2f}x",
                    share <= 1.0,
                ]
            )
    if "chaos" in result:
        ch = result["chaos"]
        rows.append(["chaos: accepted messages lost", "0", ch["missing"], ch["missing"] == 0])
        rows.append(
            [
                "chaos: threads and fds before = after",
                "equal",
                "{threads_before}/{threads_after}, {fds_before}/{fds_after}".format(**ch["leaks"]),
                ch["leaks"]["threads_after"] <= ch["leaks"]["threads_before"]
                and ch["leaks"]["fds_after"] <= ch["leaks"]["fds_before"],
            ]
        )
    return [[*r[:3], "yes" if r[3] else "NO"] for r in rows], all(bool(r[3]) for r in rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="FailoverConnection kills")
    parser.add_argument("--raw-kills", type=int, default=5, help="kills per raw proton series")
    parser.add_argument("--settle", type=int, default=200, help="accepted messages between kills")
    parser.add_argument(
        "--blocks",
        type=int,
        default=1,
        help="turns the failover, default-reconnect and delay=0 series take (interleaved)",
    )
    parser.add_argument("--reps", type=int, default=6, help="throughput repetitions")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies message counts")
    parser.add_argument("--chaos-seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between faults")
    parser.add_argument("--down", type=float, default=1.5, help="seconds a node stays down")
    parser.add_argument("--rate", type=float, default=200.0, help="chaos messages per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="+", choices=["throughput", "failover", "chaos"])
    parser.add_argument(
        "--name", default="amqp", help="results file: benchmarks/results/<name>.json"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="6 kills, 2 reps at a quarter of the counts, 30 s of chaos",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.kills, args.reps, args.scale, args.chaos_seconds = 6, 2, 0.25, 30.0
    parts = args.only or ["throughput", "failover", "chaos"]
    started = time.time()
    result: dict[str, Any] = {"benchmark": "amqp", "machine": machine(), "args": vars(args)}
    text = ""
    with brokers(2, kind="rabbitmq", label="amqp", full_jit=False) as cluster:
        if "throughput" in parts:
            result["throughput"] = run_throughput(cluster, args.reps, args.scale)
            text += throughput_tables(result["throughput"], args.reps)
        if "failover" in parts:
            result["failover"] = run_failover(
                cluster, args.kills, args.raw_kills, args.settle, args.blocks
            )
            text += failover_tables(result["failover"])
        if "chaos" in parts:
            cluster.heal()
            result["chaos"] = run_chaos(cluster, args)
            text += chaos_table(result["chaos"])
    rows, met = targets(result)
    text += table("AMQP targets", ["what", "target", "measured", "met"], rows)
    lost = any(s["lost"] for s in result.get("failover", [])) or (
        "chaos" in result and not result["chaos"]["ok"]
    )
    result.update(
        table=text,
        targets_met=met,
        seconds=round(time.time() - started, 1),
        ok=not lost,
        notes="two independent RabbitMQ nodes; queues pre-declared durable on both and addressed "
        "as /amq/queue/<q>; throughput: non-durable 128-byte messages to a queue capped at "
        f"{CAP} (oldest dropped); failover: durable messages, sent one at a time, each "
        "confirmed; the killed node is restarted after every kill; client and brokers share "
        "the machine's cores, so compare within one run",
    )
    write_json(args.name, result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
