"""Failover time after SIGKILL of the broker in use: FailoverConnection vs a raw stomp.py recipe.

Run: ``python benchmarks/bench_failover.py [--kills 20] [--cold-kills 10] [--repeat 10] [--quick]``

Three ActiveMQ Classic brokers (independent, the harness's JVM flags) on loopback. A producer thread
sends confirmed persistent 128-byte messages in a loop to one queue. Each round: SIGKILL the
broker that confirmed the last message, and take the time from just before the signal to the
first confirmation that comes from another broker. The killed broker is then restarted (same
ports and store) and warmed up while the producer pauses, and the producer runs again for a
few hundred messages before the next kill.

Series (same brokers, same process, one after another):

* ``raw``: the hand-written stomp.py recipe (``benchmarks/_raw.py``): reconnect to the next host
  in ``on_disconnected``, receipt per message, in-doubt message re-sent with the same id;
* ``failover``: ``FailoverConnection.send`` (blocking until confirmed), URI defaults;
* ``failover+backup``: the same with ``backup=true`` (a pre-connected standby);
* ``warm`` case: the queue exists on every broker before the first kill (sent and drained
  once); ``cold`` case: every round switches to a new queue first, so the broker failed over to
  creates it on the first send;
* ``repeated``: consecutive kills of whichever broker is in use with the same connection, every
  time printed, to show the time does not drift;
* ``java``: the ActiveMQ Java client's ``failover:`` transport with its defaults (OpenWire, a
  persistent ``send`` returns once the broker stored it: ``java/FailoverProducer.java``), and
  ``java delay=0`` with ``initialReconnectDelay=0``: the reference implementation, on the same
  brokers and kills. ``median/java`` compares each series with the Java series of its options
  (defaults with defaults, ``initialReconnectDelay=0`` with the same).

``--series`` runs only the named series (e.g. ``--series failover java``).

At the end every queue is drained from every broker and the ids compared with the confirmed
ids: a confirmed message missing is a LOSS (the script exits 1); a duplicate must be a message
that was in flight at a kill (re-sent with its original id).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import (
    EofProbe,
    brokers,
    drain_ids,
    log,
    machine,
    precreate,
    ratio,
    summary_ms,
    table,
    warm,
    write_json,
)
from benchmarks._drivers import (
    Driver,
    FailoverDriver,
    ProducerLoop,
    RawDriver,
    wait_until,
)
from benchmarks._java_producer import JavaDriver
from failover_client.testing.brokers import Cluster

WARM_QUEUE = "/queue/bench.warmup"


def _fail(message: str) -> NoReturn:
    raise RuntimeError(message)


def run_series(
    cluster: Cluster,
    driver: Driver,
    *,
    label: str,
    kills: int,
    cold: bool,
    settle: int,
    standby: bool = False,
    action: str = "kill",
) -> dict[str, Any]:
    """``kills`` rounds of kill / measure / restart with one driver; returns raw samples.

    ``action="hang"`` SIGSTOPs the broker instead and SIGCONTs it after the measurement.
    """
    run = uuid.uuid4().hex[:6]
    destination = f"/queue/bench.failover.{label}.{run}"
    destinations = [destination]
    if not cold:
        precreate(cluster, destination)
    driver.connect()
    loop = ProducerLoop(driver, destination, prefix=f"{label}-{run}")
    loop.start()
    samples: list[float] = []
    eof: list[float] = []
    in_doubt: set[str] = set()
    standby_ready: list[bool] = []
    error: str | None = None
    try:
        if not loop.wait_count(1000, timeout=60):
            _fail(f"{label}: producer did not start: {loop.error!r}")
        for n in range(kills):
            if cold:
                loop.pause()
                destination = f"/queue/bench.failover.{label}.{run}.cold{n}"
                destinations.append(destination)
                loop.destination = destination
                loop.resume()
            if not loop.wait_count(settle, timeout=60):
                _fail(f"{label}: producer stalled: {loop.error!r}")
            if standby:
                ready = wait_until(lambda: driver.standbys() >= 1, 10.0)  # type: ignore[attr-defined]
                standby_ready.append(ready)
            victim = loop.last_broker
            assert victim is not None
            endpoint = cluster[victim].endpoint("stomp")
            probe = EofProbe(endpoint.host, endpoint.port) if action == "kill" else None
            sending = loop.sending_id
            t_kill = time.monotonic()
            if action == "kill":
                cluster[victim].kill()
            else:
                cluster[victim].hang()
            switch = loop.first_switch_after(t_kill, victim, timeout=30.0)
            if probe is not None:
                eof_at = probe.wait(5.0)
                probe.close()
                eof.append(eof_at - t_kill if eof_at is not None else float("nan"))
            # In doubt: what was being sent at the fault, and the first message confirmed after
            # it (a blocking sender's in-flight message, re-sent; with a hung broker the
            # receipts of earlier messages may still arrive, so it can be a later one).
            in_doubt.update({f"{label}-{run}-{sending}", f"{label}-{run}-{sending + 1}"})
            with loop.cond:
                in_doubt.update(loop.switch_ids[-1:])
            if switch is None:
                _fail(
                    f"{label}: no confirmation from another broker within 30 s "
                    f"of the {action} of broker {victim}: {loop.error!r}"
                )
            samples.append(switch[0] - t_kill)
            eof_note = f" (socket EOF after {eof[-1] * 1000:.2f} ms)" if eof else ""
            log(
                f"{label:>24} {action} {n + 1:>2}/{kills}: broker {victim} -> {switch[1]} "
                f"in {samples[-1] * 1000:7.2f} ms{eof_note}"
            )
            loop.pause()
            if action == "kill":
                cluster[victim].start()
            else:
                cluster[victim].resume()
                cluster[victim].wait_ready(30.0)
            warm(cluster[victim], WARM_QUEUE, 500)
            loop.resume()
    except Exception as exc:  # recorded and reported; the other series still run
        error = f"{type(exc).__name__}: {exc}"
        log(f"{label}: ERROR {error}")
    finally:
        loop.stop()
        extra = driver.extra()
        driver.close()
        cluster.heal()
    return {
        "label": label,
        "driver": driver.name,
        "case": "cold" if cold else "warm",
        "samples_s": samples,
        "summary": summary_ms(samples),
        "eof_summary": summary_ms([e for e in eof if e == e]),  # NaN: probe saw nothing
        "after_eof_summary": summary_ms(
            [s - e for s, e in zip(samples, eof, strict=False) if e == e]
        ),
        "confirmed": loop.all_confirmed(),
        "destinations": destinations,
        "in_doubt": sorted(in_doubt),
        "standby_ready": standby_ready,
        "client": extra,
        "error": error or (f"{loop.error!r}" if loop.error else None),
    }


def check_delivery(cluster: Cluster, series: dict[str, Any]) -> dict[str, Any]:
    """Drain the series' queues from every broker; compare with the confirmed ids."""
    confirmed: dict[str, list[str]] = series.pop("confirmed")
    received: list[str] = []
    for destination in series["destinations"]:
        received.extend(drain_ids(cluster, destination, idle=0.3))
    counts = Counter(received)
    wanted = {i for ids in confirmed.values() for i in ids}
    lost = sorted(wanted - counts.keys())
    if lost:  # a slow drain must not pass for a loss: look again, patiently
        for destination in series["destinations"]:
            counts.update(drain_ids(cluster, destination, idle=3.0))
        lost = sorted(wanted - counts.keys())
    duplicates = sorted(i for i, c in counts.items() if c > 1)
    unexpected = sorted(set(duplicates) - set(series["in_doubt"]))
    return {
        "confirmed": len(wanted),
        "received": sum(counts.values()),
        "lost": len(lost),
        "lost_ids": lost[:20],
        "duplicates": sum(counts[i] - 1 for i in duplicates),
        "duplicate_ids": duplicates[:20],
        "unexpected_duplicates": unexpected[:20],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per warm series")
    parser.add_argument("--cold-kills", type=int, default=10, help="kills per cold series")
    parser.add_argument("--repeat", type=int, default=10, help="consecutive kills, repeated run")
    parser.add_argument("--settle", type=int, default=300, help="messages between kills")
    parser.add_argument("--quick", action="store_true", help="4 / 2 / 4 kills")
    parser.add_argument(
        "--series",
        nargs="+",
        metavar="LABEL",
        help="run only these series (raw, failover, failover+backup, 'failover delay=0', "
        "java, 'java delay=0', repeated)",
    )
    parser.add_argument(
        "--full-jit",
        action="store_true",
        help="run the brokers with the full-JIT benchmark flags (default: the harness's "
        "fast-start flags, as BROKERS.md's failover baselines)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.kills, args.cold_kills, args.repeat = 4, 2, 4

    started = time.time()
    result: dict[str, Any] = {"benchmark": "failover", "machine": machine(), "args": vars(args)}
    series: list[dict[str, Any]] = []
    with brokers(3, label="failover", full_jit=args.full_jit) as cluster:
        for broker in cluster:
            warm(broker, WARM_QUEUE, 3000)

        def raw() -> Driver:
            return RawDriver(cluster)

        def fc() -> Driver:
            return FailoverDriver(cluster, {}, "FailoverConnection")

        def fc_backup() -> Driver:
            return FailoverDriver(cluster, {"backup": True}, "FailoverConnection backup=true")

        def fc_nodelay() -> Driver:
            return FailoverDriver(
                cluster, {"initialReconnectDelay": 0}, "FailoverConnection initialReconnectDelay=0"
            )

        def java() -> Driver:
            return JavaDriver(cluster, {}, "ActiveMQ Java client failover: defaults")

        def java_nodelay() -> Driver:
            return JavaDriver(cluster, {"initialReconnectDelay": 0}, "ActiveMQ Java client delay=0")

        plan = [
            ("raw", raw, args.kills, False, False),
            ("java", java, args.kills, False, False),
            ("failover", fc, args.kills, False, False),
            ("failover+backup", fc_backup, args.kills, False, True),
            ("java delay=0", java_nodelay, args.kills, False, False),
            ("failover delay=0", fc_nodelay, args.kills, False, False),
            ("raw", raw, args.cold_kills, True, False),
            ("failover", fc, args.cold_kills, True, False),
            ("failover+backup", fc_backup, args.cold_kills, True, True),
            ("repeated", fc, args.repeat, False, False),
        ]
        for label, make, kills, cold, standby in plan:
            if kills <= 0 or (args.series and label not in args.series):
                continue
            log(f"series {label} ({'cold' if cold else 'warm'}), {kills} kills")
            series.append(
                run_series(
                    cluster,
                    make(),
                    label=label,
                    kills=kills,
                    cold=cold,
                    settle=args.settle,
                    standby=standby,
                )
            )
        log("draining every queue from every broker")
        for s in series:
            s["delivery"] = check_delivery(cluster, s)

    raw_by_case = {s["case"]: s["summary"] for s in series if s["label"] == "raw"}
    java_by_label = {s["label"]: s["summary"] for s in series if s["label"].startswith("java")}
    rows = []
    for s in series:
        summ, base = s["summary"], raw_by_case.get(s["case"], {})
        s["ratio_median_vs_raw"] = ratio(summ.get("median_ms", 0), base.get("median_ms", 0))
        s["ratio_p95_vs_raw"] = ratio(summ.get("p95_ms", 0), base.get("p95_ms", 0))
        java_label = "java delay=0" if s["label"].endswith("delay=0") else "java"
        java_base = java_by_label.get(java_label, {}) if s["case"] == "warm" else {}
        s["ratio_median_vs_java"] = (
            ratio(summ.get("median_ms", 0), java_base.get("median_ms", 0)) if java_base else None
        )
        d = s["delivery"]
        rows.append(
            [
                s["label"],
                s["case"],
                summ.get("n", 0),
                summ.get("median_ms", "-"),
                summ.get("p95_ms", "-"),
                summ.get("min_ms", "-"),
                summ.get("max_ms", "-"),
                s["ratio_median_vs_raw"],
                s["ratio_p95_vs_raw"],
                "-" if s["ratio_median_vs_java"] is None else s["ratio_median_vs_java"],
                s["eof_summary"].get("median_ms", "-"),
                s["after_eof_summary"].get("median_ms", "-"),
                s["after_eof_summary"].get("p95_ms", "-"),
                d["confirmed"],
                d["lost"],
                d["duplicates"],
                len(d["unexpected_duplicates"]),
                s["error"] or "",
            ]
        )
    text = table(
        "Failover after SIGKILL: kill -> first confirmed send on another broker (ms)",
        [
            "series",
            "queue",
            "kills",
            "median",
            "p95",
            "min",
            "max",
            "median/raw",
            "p95/raw",
            "median/java",
            "EOF median",
            "after-EOF median",
            "after-EOF p95",
            "confirmed",
            "lost",
            "dups",
            "unexpected dups",
            "error",
        ],
        rows,
    )
    text += (
        "\nEOF = kill -> a bare TCP socket to the killed broker sees EOF/RST (the JVM's "
        "teardown; no client can notice sooner); after-EOF = the client's own part.\n"
    )
    print(text.rsplit("\n", 2)[-2])
    repeated = next((s for s in series if s["label"] == "repeated"), None)
    if repeated and repeated["samples_s"]:
        ms = [round(x * 1000, 2) for x in repeated["samples_s"]]
        half = len(ms) // 2
        drift = {
            "each_ms": ms,
            "first_half_median_ms": statistics.median(ms[:half]) if half else None,
            "second_half_median_ms": statistics.median(ms[half:]),
        }
        repeated["drift"] = drift
        text += table(
            "Repeated failovers, one FailoverConnection (ms per kill, in order)",
            ["kill", *[str(i + 1) for i in range(len(ms))], "1st half median", "2nd half median"],
            [["ms", *ms, drift["first_half_median_ms"], drift["second_half_median_ms"]]],
        )
    for s in series:
        s["samples_ms"] = [round(x * 1000, 2) for x in s.pop("samples_s")]
    result.update(
        series=series,
        table=text,
        seconds=round(time.time() - started, 1),
        ok=all(
            s["delivery"]["lost"] == 0
            and not s["delivery"]["unexpected_duplicates"]
            and s["error"] is None
            for s in series
        ),
        targets={"failover_median_ms": 15, "failover_p95_ms": 50},
        notes="queues exist on every broker in the warm case (sent + drained once before); "
        "cold: a new queue per kill, created by the first send after failover",
    )
    if not args.series:  # a partial run must not replace the full run's tracked result file
        write_json("failover", result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
