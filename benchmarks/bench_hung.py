"""Hung brokers (SIGSTOP: connections stay open and go silent): FailoverConnection vs stomp.py.

Run: ``python benchmarks/bench_hung.py [--startups 5] [--hangs 10] [--cap 8] [--quick]``

Three ActiveMQ Classic brokers on loopback (the harness's fast-start JVM flags).

(a) Start-up with a hung broker FIRST in the list (SIGSTOPped before anyone connects; the TCP
    connect still succeeds through the listen backlog, CONNECTED never comes). Timed until the
    connection is up on another broker:

    * ``FailoverConnection.connect()`` with ``randomize=false`` (so the hung one is tried
      first) and the default ``connectTimeout`` (2 s);
    * stomp.py ``Connection12([hung, b, c]).connect(wait=True)``, the library's own way, in a
      thread capped at ``--cap`` seconds (it has no handshake timeout);
    * the careful hand-written recipe (``benchmarks/_raw.py``): CONNECT without waiting, wait
      for CONNECTED for 2 s per host, move on.

(b) 500 ms heart-beats both ways; SIGSTOP of the broker in use while a producer sends
    confirmed persistent messages; time from the SIGSTOP to the first confirmed send on
    another broker (target: within 1 s). The broker is resumed (SIGCONT) after each round.
    Compared with the raw recipe using stomp.py's heart-beats (500, 500). The queue exists on
    every broker. Every queue is drained at the end and compared with the confirmed ids.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import stomp  # type: ignore[import-untyped]
from stomp.exception import StompException

from benchmarks._common import (
    brokers,
    hosts,
    log,
    machine,
    port_of,
    ratio,
    summary_ms,
    table,
    warm,
    write_json,
)
from benchmarks._drivers import Driver, FailoverDriver, RawDriver
from benchmarks._raw import RawFailoverProducer
from benchmarks.bench_failover import WARM_QUEUE, check_delivery, run_series
from failover_client import FailoverConnection
from failover_client.testing.brokers import Cluster


def stomp_py_connect(cluster: Cluster, cap: float) -> tuple[float | None, str]:
    """stomp.py's own ``connect(wait=True)`` over all hosts; (seconds or None, outcome)."""
    conn = stomp.Connection12(hosts(cluster), heartbeats=(0, 0), reconnect_attempts_max=1)
    done: dict[str, Any] = {}

    def attempt() -> None:
        start = time.monotonic()
        try:
            conn.connect(wait=True)
            done["at"] = time.monotonic() - start
        except (StompException, OSError) as exc:
            done["error"] = repr(exc)

    thread = threading.Thread(target=attempt, name="stomp.py-connect", daemon=True)
    thread.start()
    thread.join(cap)
    if thread.is_alive():
        # Unblock it: stop the transport and close its socket (the thread then ends).
        conn.transport.stop()
        conn.transport.disconnect_socket()
        thread.join(10.0)
        return None, f"did not connect within {cap:g} s"
    if "at" in done:
        current = conn.transport.current_host_and_port
        conn.disconnect()
        return done["at"], f"connected to port {current[1]}"
    return None, f"failed: {done.get('error')}"


def startup_round(cluster: Cluster, cap: float) -> dict[str, Any]:
    """One round of (a): hang broker 0, try all three ways, resume it."""
    cluster[0].hang()
    out: dict[str, Any] = {}
    try:
        fc = FailoverConnection(cluster.failover_uri("stomp", {"randomize": False}))
        start = time.monotonic()
        try:
            fc.connect()
            out["failover_s"] = time.monotonic() - start
            out["failover_on"] = port_of(fc.broker)
        finally:
            fc.close()

        recipe = RawFailoverProducer(hosts(cluster), connect_timeout=2.0)
        start = time.monotonic()
        try:
            recipe.connect()
            out["recipe_s"] = time.monotonic() - start
        finally:
            recipe.close()

        seconds, outcome = stomp_py_connect(cluster, cap)
        out["stomp_py_s"], out["stomp_py_outcome"] = seconds, outcome
    finally:
        cluster[0].resume()
        cluster[0].wait_ready(30.0)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startups", type=int, default=5, help="rounds of (a)")
    parser.add_argument("--hangs", type=int, default=10, help="SIGSTOPs per series in (b)")
    parser.add_argument("--cap", type=float, default=8.0, help="seconds given to stomp.py")
    parser.add_argument("--settle", type=int, default=300, help="messages between hangs")
    parser.add_argument("--quick", action="store_true", help="2 start-ups, 3 hangs, 8 s cap")
    args = parser.parse_args(argv)
    if args.quick:
        args.startups, args.hangs = 2, 3
    started = time.time()
    result: dict[str, Any] = {"benchmark": "hung", "machine": machine(), "args": vars(args)}
    with brokers(3, label="hung", full_jit=False) as cluster:
        for broker in cluster:
            warm(broker, WARM_QUEUE, 2000)
        rounds = []
        for n in range(args.startups):
            rounds.append(startup_round(cluster, args.cap))
            log(f"start-up {n + 1}/{args.startups}: {rounds[-1]}")

        def fc() -> Driver:
            return FailoverDriver(cluster, {"heartbeat": "500,500"}, "FailoverConnection hb 500")

        def raw() -> Driver:
            return RawDriver(cluster, heartbeats=(500, 500))

        series = []
        for label, make in (("raw hb500", raw), ("failover hb500", fc)):
            log(f"series {label}: {args.hangs} hangs")
            series.append(
                run_series(
                    cluster,
                    make(),
                    label=label.replace(" ", "-"),
                    kills=args.hangs,
                    cold=False,
                    settle=args.settle,
                    action="hang",
                )
            )
        log("draining every queue from every broker")
        for s in series:
            s["delivery"] = check_delivery(cluster, s)

    fc_s = [r["failover_s"] for r in rounds if "failover_s" in r]
    recipe_s = [r["recipe_s"] for r in rounds if "recipe_s" in r]
    stomp_ok = [r["stomp_py_s"] for r in rounds if r.get("stomp_py_s") is not None]
    startup = {
        "failover": summary_ms(fc_s),
        "recipe": summary_ms(recipe_s),
        "stomp_py": summary_ms(stomp_ok),
        "stomp_py_outcomes": [r["stomp_py_outcome"] for r in rounds],
        "failover_connected_to_hung": sum(
            r.get("failover_on") == cluster[0].endpoint("stomp").port for r in rounds
        ),
        "rounds": rounds,
    }
    stuck = sum(r.get("stomp_py_s") is None for r in rounds)
    text = table(
        "(a) Start-up with a SIGSTOPped broker first in the list: time to connected (ms)",
        ["client", "rounds", "median", "p95", "max", "outcome"],
        [
            [
                "FailoverConnection (connectTimeout 2 s)",
                len(fc_s),
                startup["failover"].get("median_ms", "-"),
                startup["failover"].get("p95_ms", "-"),
                startup["failover"].get("max_ms", "-"),
                "connected to another broker",
            ],
            [
                "careful stomp.py recipe (2 s per host)",
                len(recipe_s),
                startup["recipe"].get("median_ms", "-"),
                startup["recipe"].get("p95_ms", "-"),
                startup["recipe"].get("max_ms", "-"),
                "connected to another broker",
            ],
            [
                "stomp.py connect(wait=True)",
                len(rounds),
                startup["stomp_py"].get("median_ms", "-"),
                "-",
                "-",
                f"{stuck}/{len(rounds)} did not connect within {args.cap:g} s",
            ],
        ],
    )
    base = next(s["summary"] for s in series if s["label"].startswith("raw"))
    rows = []
    for s in series:
        summ, d = s["summary"], s["delivery"]
        s["ratio_median_vs_raw"] = ratio(summ.get("median_ms", 0), base.get("median_ms", 0))
        rows.append(
            [
                s["label"],
                summ.get("n", 0),
                summ.get("median_ms", "-"),
                summ.get("p95_ms", "-"),
                summ.get("max_ms", "-"),
                s["ratio_median_vs_raw"],
                d["confirmed"],
                d["lost"],
                d["duplicates"],
                len(d["unexpected_duplicates"]),
                s["error"] or "",
            ]
        )
    text += table(
        "(b) SIGSTOP of the broker in use, 500 ms heart-beats: -> first confirmed send "
        "elsewhere (ms)",
        [
            "series",
            "hangs",
            "median",
            "p95",
            "max",
            "median/raw",
            "confirmed",
            "lost",
            "dups",
            "unexpected dups",
            "error",
        ],
        rows,
    )
    for s in series:
        s["samples_ms"] = [round(x * 1000, 2) for x in s.pop("samples_s")]
    result.update(
        startup=startup,
        series=series,
        table=text,
        seconds=round(time.time() - started, 1),
        ok=all(s["delivery"]["lost"] == 0 and s["error"] is None for s in series),
        targets={"startup_ms": 2000, "hung_in_use_ms": 1000},
    )
    write_json("hung", result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
