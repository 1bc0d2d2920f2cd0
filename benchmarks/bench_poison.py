"""Poison frames on real brokers: fail-overs per poison frame, and ordinary traffic meanwhile.

Run: ``python benchmarks/bench_poison.py [--rounds 5] [--seconds 10] [--quick]``

A poison frame is one the broker answers by ending the session without naming it:

* ActiveMQ Classic: a SEND with a 64 KB header ("maximum header length exceeded");
* RabbitMQ: a SEND, and a SUBSCRIBE, to an exchange that does not exist;
* ActiveMQ with a bad selector on a SUBSCRIBE, for contrast: the broker names the frame in its
  ERROR and keeps the connection, so nothing needs finding.

(a) Fail-overs per poison frame: a fresh ``FailoverConnection`` (two brokers) sends, or
    subscribes, one poison frame among ordinary confirmed sends; counted until the verdict
    (``SendRejected`` / ``SubscriptionRefused``). Target: at most 2.

(b) Ordinary traffic while a poison frame is in flight: ``--seconds`` of confirmed persistent
    sends, the window kept full through ``send_async`` (a consumer reads the queue meanwhile),
    the rate counting every confirmation
    up to the last; once clean, once with a poison frame sent half-way. Rounds alternate so
    drift hits both alike. The figure is the ratio of rates (poisoned / clean; target: at
    least 0.9). A poison frame costs its fail-overs plus one round trip for each frame that
    was in flight before it (the suspects, replayed one at a time): a fixed price, so the
    ratio says how much of ``--seconds`` of traffic it took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, machine, ratio, table, write_json
from failover_client import (
    Disconnected,
    Event,
    FailoverClientError,
    FailoverConnection,
    SendRejected,
    SubscriptionRefused,
)
from failover_client.testing.brokers import BrokerKind, Cluster

SAFETY = 60.0
"""Seconds any one wait lasts at most (a hung benchmark ends, it does not stall the run)."""


class Failovers:
    """Counts Disconnected events (the listener runs on the dispatch thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, Disconnected):
            with self._lock:
                self.count += 1


def poison_send(destination: str, headers: dict[str, str]) -> Callable[..., Any]:
    def start(conn: FailoverConnection) -> Callable[[], None]:
        future = conn.send_async(destination, "poison", headers=headers, timeout=SAFETY)
        return lambda: future.result(SAFETY)

    return start


def poison_subscribe(destination: str, headers: dict[str, str]) -> Callable[..., Any]:
    def start(conn: FailoverConnection) -> Callable[[], None]:
        subscription = conn.subscribe(destination, lambda message: None, headers=headers)
        return lambda: subscription.wait_active(SAFETY)

    return start


def queue_for(cluster: Cluster) -> str:
    name = f"fc-poison-{uuid.uuid4().hex[:10]}"
    if cluster[0].kind is BrokerKind.RABBITMQ:
        for broker in cluster:
            broker.declare_queue(name)  # type: ignore[attr-defined]
        return f"/amq/queue/{name}"
    return f"/queue/{name}"


def credentials(cluster: Cluster) -> dict[str, Any]:
    login, passcode = cluster[0].credentials or (None, None)
    return {"login": login, "passcode": passcode}


def uri(cluster: Cluster) -> str:
    members = [b.uri("stomp") + (f"?vhost={b.vhost}" if b.vhost else "") for b in cluster]
    # Loopback brokers: a short first reconnect delay, as the functional tests use.
    return f"failover:({','.join(members)})?randomize=false&initialReconnectDelay=10"


def one_verdict(cluster: Cluster, start: Callable[..., Any], destination: str) -> dict[str, Any]:
    """(a): fail-overs and time until the poison frame's verdict, ordinary sends around it."""
    failovers = Failovers()
    with FailoverConnection(uri(cluster), listeners=[failovers], **credentials(cluster)) as conn:
        conn.connect()
        conn.send(destination, "warm", timeout=SAFETY)
        around = [conn.send_async(destination, f"a{n}", timeout=SAFETY) for n in range(20)]
        started = time.monotonic()
        verdict = start(conn)
        around += [conn.send_async(destination, f"b{n}", timeout=SAFETY) for n in range(20)]
        try:
            verdict()
            outcome = "accepted (not poison?)"
        except (SendRejected, SubscriptionRefused) as exc:
            outcome = type(exc).__name__
        elapsed = time.monotonic() - started
        for future in around:
            future.result(SAFETY)
        conn.send(destination, "after", timeout=SAFETY)
        return {"failovers": failovers.count, "seconds": elapsed, "outcome": outcome}


def timed_run(
    cluster: Cluster, destination: str, seconds: float, start: Callable[..., Any] | None
) -> float:
    """(b): confirmed sends per second over ``seconds`` of steady traffic (poison half-way).

    The producer keeps the window full with ``send_async`` and a consumer on the same
    connection reads the queue; the rate counts what was confirmed over the whole time, the
    drain at the end included.
    """
    with FailoverConnection(uri(cluster), **credentials(cluster)) as conn:
        conn.connect()
        # A consumer keeps the queue short: ActiveMQ slows producers (flow control) once a
        # queue nobody reads fills its memory limit, which would swamp the figure.
        conn.subscribe(destination, lambda message: None).wait_active(SAFETY)
        conn.send(destination, "warm", timeout=SAFETY)
        futures: list[Future[None]] = []
        verdict: Callable[[], None] | None = None
        began = time.monotonic()
        half, end = began + seconds / 2, began + seconds
        n = 0
        while (now := time.monotonic()) < end:
            if start is not None and verdict is None and now >= half:
                verdict = start(conn)
            futures.append(conn.send_async(destination, f"m{n}", timeout=SAFETY))
            n += 1
        for future in futures:
            future.result(SAFETY)
        rate = len(futures) / (time.monotonic() - began)
        if verdict is not None:
            try:
                verdict()
            except (SendRejected, SubscriptionRefused):
                return rate  # the verdict expected; (a) reports its figures
            log("the poison frame was accepted: this case does not poison this broker")
        return rate


CASES: list[tuple[str, str, Callable[[str], Callable[..., Any]]]] = [
    (
        "ActiveMQ SEND, 64 KB header",
        "activemq",
        lambda q: poison_send(q, {"x-big": "x" * 65536}),
    ),
    (
        "ActiveMQ SUBSCRIBE, bad selector (named)",
        "activemq",
        lambda q: poison_subscribe(q, {"selector": "not a selector((("}),
    ),
    (
        "RabbitMQ SEND, unknown exchange",
        "rabbitmq",
        lambda q: poison_send("/exchange/no-such-exchange/rk", {}),
    ),
    (
        "RabbitMQ SUBSCRIBE, unknown exchange",
        "rabbitmq",
        lambda q: poison_subscribe("/exchange/no-such-exchange/rk", {}),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="traffic per timed run")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 4 s runs")
    args = parser.parse_args()
    rounds, seconds = (3, 4.0) if args.quick else (args.rounds, args.seconds)

    rows: list[list[object]] = []
    details: dict[str, Any] = {}
    for kind in ("activemq", "rabbitmq"):
        with brokers(2, kind=kind, full_jit=False, label=f"poison-{kind}") as cluster:
            destination = queue_for(cluster)
            for label, case_kind, make in CASES:
                if case_kind != kind:
                    continue
                start = make(destination)
                log(f"{label}: {rounds} verdicts, {rounds} x 2 timed runs of {seconds:g} s")
                verdicts, clean, poisoned = [], [], []
                for _ in range(rounds):
                    try:
                        verdicts.append(one_verdict(cluster, start, destination))
                        clean.append(timed_run(cluster, destination, seconds, None))
                        poisoned.append(timed_run(cluster, destination, seconds, start))
                    except FailoverClientError as exc:
                        log(f"{label}: round failed: {exc!r}")
                failovers = [v["failovers"] for v in verdicts]
                clean_rate = statistics.median(clean) if clean else 0.0
                poisoned_rate = statistics.median(poisoned) if poisoned else 0.0
                rows.append(
                    [
                        label,
                        max(failovers, default="-"),
                        statistics.median(failovers) if failovers else "-",
                        round(statistics.median(v["seconds"] for v in verdicts) * 1000, 1)
                        if verdicts
                        else "-",
                        ", ".join(sorted({v["outcome"] for v in verdicts})),
                        round(clean_rate),
                        round(poisoned_rate),
                        ratio(poisoned_rate, clean_rate),
                    ]
                )
                details[label] = {
                    "verdicts": verdicts,
                    "clean_s": clean,
                    "poisoned_s": poisoned,
                }
    text = table(
        f"Poison frames: {rounds} rounds, {seconds:g} s of confirmed sends per timed run",
        [
            "case",
            "fail-overs (max)",
            "fail-overs (median)",
            "verdict (median ms)",
            "verdict",
            "clean msgs/s",
            "with poison msgs/s",
            "ratio",
        ],
        rows,
    )
    write_json(
        "poison",
        {
            "machine": machine(),
            "rounds": rounds,
            "seconds": seconds,
            "table": text,
            "details": details,
            "notes": "targets: at most 2 fail-overs per poison frame; ratio at least 0.9",
        },
    )


if __name__ == "__main__":
    main()
