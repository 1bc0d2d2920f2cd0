"""Consumption: bounded memory, close() under a backlog, consumer throughput, vs raw clients.

Run: ``python benchmarks/bench_consume.py [--quick] [--only slow close throughput]
[--targets activemq-stomp rabbitmq-stomp rabbitmq-amqp] [--seconds 60] [--rate 2000]``

One ActiveMQ Classic broker (STOMP) and then one RabbitMQ node (STOMP and AMQP 1.0) on
loopback, started by the harness and stopped at the end. Every consumer runs in its own
process (``_consume_child.py``), so the resident memory sampled from ``/proc/<pid>/status``
every 0.5 s is the consumer's alone; growth is the largest sample minus the one taken right
after it connected and subscribed. Every message carries its number (``bench-id``); every run
uses a fresh queue, and what is left on the broker at the end is counted by draining it with a
raw consumer after the measured one has gone, id by id.

1. Slow handler: 20 ms per message while a producer (raw stomp.py, or raw proton over AMQP)
   offers 2,000 x 4 KiB messages per second for ``--seconds`` (60; ``--quick`` 15). Measured for
   our library with ``ack=auto``, ``client`` and ``client-individual`` (``prefetch`` 100 where
   the library takes it), raw stomp.py (``ack=auto``; ``client-individual`` with the brokers'
   prefetch headers at 100) and raw proton (``MessagingHandler``'s default prefetch of 10; a
   credit of 100 given back as each message is accepted after its handler). The consumer then
   exits without closing (what it held and had not acknowledged goes back to the queue). Target:
   growth <= prefetch x 4 KiB + 10 MB; lost = sent - (handled or left on the broker) = 0.
2. close() under that backlog: the producer fills for a few seconds, then the consumer times
   ``close()`` (target <= 1 s plus the running 20 ms handler) and ``close(drain=5)`` (target: no
   id lost, none acknowledged unhandled; every id handled or still on the broker, duplicates
   allowed). A close that has not returned after 20 s (``--quick`` 10 s) is reported as such
   and the process ends.
3. Throughput with a no-op handler: 20,000 (``--quick`` 10,000) 1 KiB messages queued first,
   then consumed; rate from the first message handled to the last; ours vs the raw client with
   the same ack mode and prefetch, both in each repetition in alternating order, median of 3.
   Target >= 0.9x. Beside the rates, the consumer process's CPU time per message (all its
   threads, first message to last): on shared cores the rate swings with the neighbours' load,
   the CPU a consumer spends per message much less; and the broker's (``/proc/<pid>/stat`` of
   its process, from the consumer's start to its last message), which shows what the ack mode
   costs the broker. Over STOMP our ``auto`` is also compared with raw stomp.py doing what it
   does on the wire (``client`` mode, the prefetch, one cumulative ACK per half window). The
   one-minute load average is recorded after every repetition.

The machine's cores are shared: read the ratios and counts, not the absolute times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, machine, table, write_json
from benchmarks._consume_runs import (
    BIG,
    PREFETCH,
    SLOW_HANDLER,
    Target,
    run_close,
    run_slow,
    run_throughput,
    slow_cases,
    throughput_pairs,
)

TARGETS = ("activemq-stomp", "rabbitmq-stomp", "rabbitmq-amqp")
SCENARIOS = ("slow", "close", "throughput")
MEMORY_TARGET_MB = round(PREFETCH * BIG / 1e6 + 10, 1)
CLOSE_TARGET_S = 1.0 + SLOW_HANDLER
THROUGHPUT_TARGET = 0.9


def targets(names: list[str]) -> Iterator[list[Target]]:
    """The targets of one broker at a time (ActiveMQ, then RabbitMQ); each broker is stopped
    before the next starts (and by the harness at exit if the run fails)."""
    if "activemq-stomp" in names:
        with brokers(1, kind="activemq", label="consume", full_jit=True) as cluster:
            yield [Target("ActiveMQ STOMP", cluster[0], "stomp")]
    wanted = [n for n in names if n.startswith("rabbitmq")]
    if wanted:
        with brokers(1, kind="rabbitmq", label="consume", full_jit=False) as cluster:
            out = []
            if "rabbitmq-stomp" in wanted:
                out.append(Target("RabbitMQ STOMP", cluster[0], "stomp"))
            if "rabbitmq-amqp" in wanted:
                out.append(Target("RabbitMQ AMQP", cluster[0], "amqp"))
            yield out


def slow_rows(results: list[dict[str, Any]]) -> list[list[object]]:
    rows = []
    for r in results:
        bounded = r["case"].startswith("ours")
        ok = r["growth_mb"] <= MEMORY_TARGET_MB and r["lost"] == 0
        rows.append(
            [
                r["target"],
                r["case"],
                r["growth_mb"],
                f"{MEMORY_TARGET_MB}" if bounded else "",
                ("pass" if ok else "FAIL") if bounded else "",
                r["held_in_client"] if r["held_in_client"] is not None else "?",
                r["sent"],
                r["handled"],
                r["left_on_broker"],
                r["lost"],
            ]
        )
    return rows


def close_rows(results: list[dict[str, Any]]) -> list[list[object]]:
    rows = []
    for r in results:
        returned = r["close_returned"]
        took = r["close_seconds"]
        shown = f"{took:.2f}" if returned else f"> {took:.0f} (did not return)"
        if r["close_error"]:
            shown = "not supported" if "unsupported" in r["close_error"] else r["close_error"]
        if r["drain"]:
            limit = r["drain"] + CLOSE_TARGET_S
            ok = returned and not r["close_error"] and took <= limit and r["lost"] == 0
            target = f"<= {limit:.2f} s, 0 lost"
        else:
            ok = returned and took <= CLOSE_TARGET_S and r["lost"] == 0
            target = f"<= {CLOSE_TARGET_S:.2f} s, 0 lost"
        rows.append(
            [
                r["target"],
                r["case"],
                "close()" if not r["drain"] else f"close(drain={r['drain']:.0f})",
                r["held_at_close"] if r["held_at_close"] is not None else "?",
                shown,
                r["sent"],
                r["handled"],
                r["left_on_broker"],
                r["lost"],
                r["acknowledged_unhandled"],
                target,
                "pass" if ok else "FAIL",
            ]
        )
    return rows


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def measure_throughput(
    target: Target, count: int, reps: int, prefetch: int = PREFETCH
) -> list[dict[str, Any]]:
    out = []
    # A fresh broker's JIT (ActiveMQ's) speeds up over its first rounds, which would favour
    # whichever client runs later: one unmeasured round of every case first.
    for pair in throughput_pairs(target.protocol, prefetch):
        for case in pair:
            run_throughput(target, case, count)
    for ours, raw in throughput_pairs(target.protocol, prefetch):
        labels = (ours.label, raw.label)
        rates: dict[str, list[float]] = {label: [] for label in labels}
        cpus: dict[str, list[float]] = {label: [] for label in labels}
        brokers: dict[str, list[float]] = {label: [] for label in labels}
        ratios = []
        loads = []
        for rep in range(reps):
            order = (ours, raw) if rep % 2 == 0 else (raw, ours)
            runs = {case.label: run_throughput(target, case, count) for case in order}
            loads.append(os.getloadavg()[0])
            for label, run in runs.items():
                for values, value in (
                    (rates, run.rate),
                    (cpus, run.cpu_us),
                    (brokers, run.broker_cpu_us),
                ):
                    if value is not None:
                        values[label].append(value)
            mine, theirs = runs[ours.label].rate, runs[raw.label].rate
            if mine and theirs:
                ratios.append(mine / theirs)
        med = {k: _median(v) for k, v in rates.items()}
        ratio = round(med[ours.label] / med[raw.label], 3) if all(med.values()) else None  # type: ignore[operator]
        out.append(
            {
                "target": target.name,
                "ours": ours.label,
                "raw": raw.label,
                "rates": rates,
                "median_ours": med[ours.label],
                "median_raw": med[raw.label],
                "ratio_of_medians": ratio,
                "median_paired_ratio": round(statistics.median(ratios), 3) if ratios else None,
                "cpu_us_per_message": cpus,
                "median_cpu_us_ours": _median(cpus[ours.label]),
                "median_cpu_us_raw": _median(cpus[raw.label]),
                "broker_cpu_us_per_message": brokers,
                "median_broker_cpu_us_ours": _median(brokers[ours.label]),
                "median_broker_cpu_us_raw": _median(brokers[raw.label]),
                "load_average_1min": loads,
                "met": None if ratio is None else ratio >= THROUGHPUT_TARGET,
            }
        )
    return out


def _cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def throughput_rows(results: list[dict[str, Any]]) -> list[list[object]]:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}"

    return [
        [
            r["target"],
            r["ours"],
            fmt(r["median_ours"]),
            r["raw"],
            fmt(r["median_raw"]),
            "-" if r["ratio_of_medians"] is None else f"{r['ratio_of_medians']:.2f}x",
            "-" if r["median_paired_ratio"] is None else f"{r['median_paired_ratio']:.2f}x",
            "pass" if r["met"] else "FAIL",
            _cpu(r.get("median_cpu_us_ours")),
            _cpu(r.get("median_cpu_us_raw")),
            _cpu(r.get("median_broker_cpu_us_ours")),
            _cpu(r.get("median_broker_cpu_us_raw")),
            _cpu(_median(r.get("load_average_1min") or [])),
        ]
        for r in results
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="15 s runs, 10,000-message reps")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--seconds", type=float, default=60.0, help="slow-handler run length")
    parser.add_argument("--rate", type=float, default=2000.0, help="messages offered per second")
    parser.add_argument("--fill", type=float, default=10.0, help="backlog seconds before close")
    parser.add_argument(
        "--close-deadline", type=float, default=20.0, help="seconds before a close is given up"
    )
    parser.add_argument("--count", type=int, default=20000, help="throughput messages per run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--prefetch",
        type=int,
        default=PREFETCH,
        help="prefetch (and raw clients' window) of the throughput runs",
    )
    parser.add_argument(
        "--out",
        default="consume",
        help="results file under benchmarks/results/ (without .json)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.fill, args.count, args.close_deadline = 15.0, 3.0, 10000, 10.0
    started = time.time()
    slow: list[dict[str, Any]] = []
    closes: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    errors: list[str] = []

    def attempt(what: str, run: Callable[[], Any]) -> Any:
        """One run; a failure is logged and recorded, and the other runs go on."""
        try:
            return run()
        except Exception as exc:  # reported in the result
            errors.append(f"{what}: {exc!r}")
            log(f"FAILED {what}: {exc!r}")
            return None

    for group in targets(args.targets):
        for target in group:
            log(f"target: {target.name}")
            if "slow" in args.only:
                for case in slow_cases(target.protocol):
                    got = attempt(
                        f"slow {target.name} {case.label}",
                        lambda t=target, c=case: run_slow(t, c, args.rate, args.seconds),
                    )
                    slow += [got] if got else []
            if "close" in args.only:
                for drain in (0.0, 5.0):
                    for ack in ("auto", "client-individual"):
                        got = attempt(
                            f"close {target.name} {ack} drain={drain}",
                            lambda t=target, a=ack, d=drain: run_close(
                                t, a, d, args.rate, args.fill, args.close_deadline
                            ),
                        )
                        closes += [got] if got else []
            if "throughput" in args.only:
                got = attempt(
                    f"throughput {target.name}",
                    lambda t=target: measure_throughput(t, args.count, args.reps, args.prefetch),
                )
                throughput += got or []
    text = ""
    if slow:
        text += table(
            f"Slow handler ({SLOW_HANDLER * 1000:.0f} ms/message), {args.rate:,.0f} x 4 KiB "
            f"messages/s offered for {args.seconds:.0f} s",
            [
                "broker",
                "consumer",
                "growth MB",
                "target MB",
                "result",
                "held in client",
                "sent",
                "handled",
                "left on broker",
                "lost",
            ],
            slow_rows(slow),
        )
    if closes:
        text += table(
            f"close() with the slow handler busy and a backlog ({args.fill:.0f} s offered)",
            [
                "broker",
                "consumer",
                "call",
                "held",
                "seconds",
                "sent",
                "handled",
                "left on broker",
                "lost",
                "acked unhandled",
                "target",
                "result",
            ],
            close_rows(closes),
        )
    if throughput:
        text += table(
            f"Throughput, no-op handler, {args.count:,} x 1 KiB pre-queued, "
            f"median of {args.reps}, prefetch {args.prefetch} (msg/s)",
            [
                "broker",
                "ours",
                "msg/s",
                "raw",
                "msg/s",
                "ratio",
                "paired ratio",
                "result",
                "CPU us/msg ours",
                "CPU us/msg raw",
                "broker CPU us/msg (ours)",
                "broker CPU us/msg (raw)",
                "load average",
            ],
            throughput_rows(throughput),
        )
    result = {
        "benchmark": "consume",
        "machine": machine(),
        "args": vars(args),
        "targets": {
            "memory_growth_mb": MEMORY_TARGET_MB,
            "close_seconds": CLOSE_TARGET_S,
            "throughput_ratio": THROUGHPUT_TARGET,
        },
        "slow_handler": slow,
        "close": closes,
        "throughput": throughput,
        "errors": errors,
        "table": text,
        "seconds": round(time.time() - started, 1),
    }
    path = write_json(args.out, result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
