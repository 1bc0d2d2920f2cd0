"""What the canary costs: messages a minute and client CPU of an idle connection, on and off.

Run: ``python benchmarks/bench_canary.py [--seconds 60] [--interval 1.0]``

One broker of each kind the harness runs locally (ActiveMQ Classic over STOMP, RabbitMQ over
STOMP and AMQP 1.0). For each, one process per setting (canary off, canary every
``--interval`` s) connects a FailoverConnection with one idle subscription and 10 s
heart-beats, then sits idle for ``--seconds``; the process's own CPU time over that window
(``resource.getrusage``, the brokers are other processes) and the canaries sent and back are
printed. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, table
from failover_client import FailoverConnection
from failover_client.testing.brokers import Cluster

IDLE = "/queue/fc-canary-idle"
"""The idle subscription's queue (RabbitMQ: declared first, AMQP reads it as /amq/queue/)."""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def idle_run(uri: str, login: str | None, passcode: str | None, seconds: float) -> dict[str, float]:
    """One idle connection for ``seconds``: CPU, canaries sent and back (this process)."""
    conn = FailoverConnection(uri, login=login, passcode=passcode)
    conn.connect()
    try:
        queue = "/amq/queue/fc-canary-idle" if uri.startswith("failover:(amqp") else IDLE
        subscription = conn.subscribe(queue, lambda m: None)
        subscription.wait_active(30)
        time.sleep(2.0)  # settle: the first canary and the subscription's answer
        before_cpu, before = cpu_seconds(), conn._canary.reading()
        threading.Event().wait(seconds)  # the idle window being measured
        after_cpu, after = cpu_seconds(), conn._canary.reading()
        return {
            "cpu_s": after_cpu - before_cpu,
            "canaries_sent": after.sent - before.sent,
            "canaries_back": after.back - before.back,
            "last_round_trip_ms": 1000 * (after.round_trip or 0.0),
        }
    finally:
        conn.close()


def child(args: argparse.Namespace) -> None:
    print(json.dumps(idle_run(args.uri, args.login, args.passcode, args.seconds)))


def measure(cluster: Cluster, protocol: str, interval: float, seconds: float) -> dict[str, float]:
    broker = cluster[0]
    if hasattr(broker, "declare_queue"):
        broker.declare_queue(IDLE.removeprefix("/queue/"))
    member = broker.uri(protocol) + (f"?vhost={broker.vhost}" if broker.vhost else "")
    ms = int(interval * 1000)
    uri = f"failover:({member})?heartbeat=10000,10000&consumer.canaryInterval={ms}"
    login, passcode = broker.credentials or (None, None)
    argv = [sys.executable, __file__, "--child", "--uri", uri, "--seconds", str(seconds)]
    if login is not None:
        argv += ["--login", login, "--passcode", passcode or ""]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 120)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--login", help=argparse.SUPPRESS)
    parser.add_argument("--passcode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    rows = []
    for kind, protocols in (("activemq", ("stomp",)), ("rabbitmq", ("stomp", "amqp"))):
        with brokers(1, kind=kind, full_jit=False, label="canary") as cluster:
            for protocol in protocols:
                for interval in (0.0, args.interval):
                    log(f"{kind} {protocol} canary {interval:g} s: idle {args.seconds:g} s")
                    got = measure(cluster, protocol, interval, args.seconds)
                    per_min = 60 / args.seconds
                    rows.append(
                        (
                            f"{kind} {protocol}",
                            f"{interval:g}" if interval else "off",
                            f"{got['canaries_sent'] * per_min:.0f}",
                            f"{got['canaries_back'] * per_min:.0f}",
                            f"{got['cpu_s']:.3f}",
                            f"{100 * got['cpu_s'] / args.seconds:.2f}",
                            f"{got['last_round_trip_ms']:.1f}",
                        )
                    )
    print(
        table(
            f"Canary cost: an idle connection for {args.seconds:g} s",
            ("broker", "canary s", "sent/min", "back/min", "CPU s", "CPU %", "last RTT ms"),
            rows,
        )
    )


if __name__ == "__main__":
    main()
