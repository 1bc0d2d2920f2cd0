"""ActiveMQ multicast discovery: a broker start (and SIGKILL) to the client's TopologyChanged.

Run (as root: it creates a network namespace):
``python benchmarks/bench_discovery.py [--rounds 7] [--settle 2]``

Everything runs in a network namespace made for the run (a veth pair with the multicast route on
it alone; nothing reaches the host's interfaces): two ActiveMQ Classic 5.17 brokers announcing
their OpenWire connector with ``discoveryUri="multicast://default"`` (keep-alive 500 ms), a
``FailoverConnection`` on ``discovery:(multicast://default)`` sitting on broker 0, and beside it
the ActiveMQ Java client's own ``MulticastDiscoveryAgent`` (``java/DiscoveryWatch.java``) on the
same group: the strongest alternative, the code a Java client on the same URI runs. Broker 1 is
started and, ``--settle`` seconds after, SIGKILLed, ``--rounds`` times; the figures are medians
(milliseconds) from the spawn of its JVM (or the SIGKILL) to:

* ``ready``: its STOMP port answering a CONNECT (a 50 ms poll; the broker's own start-up);
* ``ours``: our connection's ``TopologyChanged`` adding (removing) it;
* ``java``: the Java agent calling its listener's ``onServiceAdd`` (``onServiceRemove``).

A broker announces itself as soon as its connector started, so ``ours`` can precede ``ready``;
after a SIGKILL nothing is announced and both listeners wait ten keep-alive intervals (5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import log, machine, ratio, table, write_json
from benchmarks._rebalance_java import _tool, client_classpath
from failover_client.testing.brokers._netns import NetworkNamespace, netns_missing

ADDRESSES = ("10.213.0.11", "10.213.0.12")
HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "DiscoveryWatch.java"


def _java_argv(workdir: Path) -> list[str]:
    classes = workdir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join(str(p) for p in client_classpath())
    subprocess.run(
        [_tool("javac"), "-nowarn", "-d", str(classes), "-cp", classpath, str(SOURCE)],
        check=True,
        timeout=300,
    )
    return [
        _tool("java"),
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        os.pathsep.join([str(classes), classpath]),
        "DiscoveryWatch",
        "multicast://default",
    ]


def _ms(rows: list[dict[str, Any]], what: str, key: str) -> float | None:
    values = [(r[key] - r["at"]) * 1000 for r in rows if r["what"] == what and r.get(key)]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--settle", type=float, default=2.0)
    args = parser.parse_args()
    reason = netns_missing()
    if reason is not None:
        sys.exit(f"bench_discovery: {reason}")
    with tempfile.TemporaryDirectory() as work, NetworkNamespace(ADDRESSES) as namespace:
        settings = {
            "addresses": list(ADDRESSES),
            "rounds": args.rounds,
            "settle": args.settle,
            "java": _java_argv(Path(work)),
        }
        log(f"running {args.rounds} rounds in namespace {namespace.name}")
        done = subprocess.run(
            namespace.argv(
                [sys.executable, str(HERE / "_discovery_child.py"), json.dumps(settings)]
            ),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if done.returncode != 0:
        sys.exit(f"bench_discovery: the measuring child failed:\n{done.stderr[-4000:]}")
    rows = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    missing = [r for r in rows if r.get("ours") is None or r.get("java") is None]
    figures = {
        "start": {k: _ms(rows, "start", k) for k in ("ready", "ours", "java")},
        "kill": {k: _ms(rows, "kill", k) for k in ("ours", "java")},
    }
    start, kill = figures["start"], figures["kill"]
    table(
        f"multicast://default, median of {args.rounds} rounds (ms)",
        ["event", "broker ready", "ours", "Java agent", "ours / Java"],
        [
            [
                "start -> added",
                start["ready"],
                start["ours"],
                start["java"],
                ratio(start["ours"] or 0.0, start["java"] or 0.0),
            ],
            [
                "SIGKILL -> removed",
                "-",
                kill["ours"],
                kill["java"],
                ratio(kill["ours"] or 0.0, kill["java"] or 0.0),
            ],
        ],
    )
    if missing:
        print(f"{len(missing)} events were never seen by one side: {missing}")
    write_json(
        "discovery",
        {"machine": machine(), "rounds": args.rounds, "figures": figures, "rows": rows},
    )


if __name__ == "__main__":
    main()
