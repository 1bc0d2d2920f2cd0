"""What the observer hook and the OpenTelemetry instrumentation cost a confirmed send.

Run: ``python benchmarks/bench_otel.py [--reps 5] [--base 22b6625]``

One ActiveMQ Classic broker (full-JIT JVM flags, store in /dev/shm so the client's own cost
shows rather than the disk's) on loopback, warmed up first. Four methods, each a fresh process
(``_otel_child.py``) sending 128-byte persistent messages to one queue that already exists:

* ``before the hook``: the library as it was before the observer hook existed (``--base``, a
  commit, exported with ``git archive``): the baseline;
* ``no observer``: this tree, no observer set (the default: what every user runs);
* ``no-op observer``: this tree with an observer whose methods do nothing (the hooks' cost);
* ``instrumented``: ``failover_client.otel.instrument`` with the OpenTelemetry SDK, spans to an
  in-memory exporter through a BatchSpanProcessor (as in production), metrics to an in-memory
  reader.

Two calls: ``send()`` (one confirmed message at a time) and ``send_async()`` + ``flush()``
(pipelined in the confirmation window). Each repetition runs the methods down the list and back
up (A B C D D C B A), so every pair runs in both orders, and the queue is emptied after every
run; reported: median messages per second and the ratio to ``before the hook``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import (
    brokers,
    hosts,
    log,
    machine,
    precreate,
    ratio,
    table,
    warm,
    write_json,
)
from benchmarks._raw import purge

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("_otel_child.py")
METHODS = {
    "before the hook": ("base", "none"),
    "no observer": ("head", "none"),
    "no-op observer": ("head", "noop"),
    "instrumented": ("head", "otel"),
}
COUNTS = {"send": 3000, "async": 20000}


def export_tree(commit: str, into: Path) -> Path:
    """``commit``'s package as an importable tree (``policies``/``uri`` under the package, as
    setup.cfg installs them)."""
    source = into / "source"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    stage = into / "stage" / "failover_client"
    stage.mkdir(parents=True)
    for entry in (source / "failover_client").iterdir():
        (stage / entry.name).symlink_to(entry)
    (stage / "policies").symlink_to(source / "policies")
    (stage / "uri").symlink_to(source / "uri")
    return stage.parent


def run_one(tree: str, mode: str, call: str, uri: str, destination: str) -> float:
    out = subprocess.run(
        [sys.executable, str(CHILD), tree, mode, call, uri, destination, str(COUNTS[call])],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    expected = "stage" if tree != "-" else str(ROOT)
    assert expected in result["file"], f"{tree}: imported {result['file']}"
    return float(result["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--base", default="22b6625", help="a commit before the observer hook")
    args = parser.parse_args()
    rates: dict[str, dict[str, list[float]]] = {c: {m: [] for m in METHODS} for c in COUNTS}
    with tempfile.TemporaryDirectory(prefix="fc-bench-otel-") as temp:
        trees = {"base": str(export_tree(args.base, Path(temp))), "head": "-"}
        with brokers(1, label="otel", full_jit=True, store="/dev/shm") as cluster:
            broker = cluster[0]
            warm(broker, "/queue/bench.warmup", 5000)
            destination = "/queue/bench.otel"
            precreate(cluster, destination)
            uri = f"failover:({broker.uri('stomp')})"
            order = list(METHODS)
            for rep in range(args.reps):
                for call in COUNTS:
                    for name in (*order, *reversed(order)):
                        tree, mode = METHODS[name]
                        rate = run_one(trees[tree], mode, call, uri, destination)
                        rates[call][name].append(rate)
                        # Emptied after every run: a backlog slows the broker (and past its
                        # memory limit, flow control stops the producer).
                        purge(hosts(cluster)[0], destination)
                    log(f"rep {rep + 1}/{args.reps} {call}: done")
    result: dict[str, Any] = {"machine": machine(), "base": args.base, "calls": {}}
    text = ""
    for call, by_method in rates.items():
        medians = {m: statistics.median(v) for m, v in by_method.items()}
        base = medians["before the hook"]
        rows = [(m, f"{medians[m]:,.0f}", f"{ratio(medians[m], base):.3f}") for m in METHODS]
        result["calls"][call] = {"medians": medians, "runs": by_method, "count": COUNTS[call]}
        label = "send()" if call == "send" else "send_async() + flush()"
        text += table(f"{label}, {COUNTS[call]} messages", ["method", "msgs/s", "ratio"], rows)
    print(text)
    write_json("otel_overhead", result)


if __name__ == "__main__":
    main()
