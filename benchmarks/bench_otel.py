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
FAKE_COUNTS = {"send": 30000, "async": 30000}


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
    count = (FAKE_COUNTS if uri == "fake" else COUNTS)[call]
    out = subprocess.run(
        [sys.executable, str(CHILD), tree, mode, call, uri, destination, str(count)],
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
    parser.add_argument(
        "--fake", action="store_true", help="no broker: the shipped fake connector confirms"
    )
    args = parser.parse_args()
    rates: dict[str, dict[str, list[float]]] = {c: {m: [] for m in METHODS} for c in COUNTS}
    with tempfile.TemporaryDirectory(prefix="fc-bench-otel-") as temp:
        trees = {"base": str(export_tree(args.base, Path(temp))), "head": "-"}
        if args.fake:
            for rep in range(args.reps):
                for call in COUNTS:
                    for name in (*METHODS, *reversed(METHODS)):
                        tree, mode = METHODS[name]
                        rates[call][name].append(run_one(trees[tree], mode, call, "fake", "/q"))
                log(f"rep {rep + 1}/{args.reps}: done")
            report(rates, args.base, "otel_overhead_fake", FAKE_COUNTS)
            return
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
    report(rates, args.base, "otel_overhead", COUNTS)


def report(
    rates: dict[str, dict[str, list[float]]], base: str, name: str, counts: dict[str, int]
) -> None:
    """Print and save medians, the ratio of medians, and the median of each repetition's
    paired ratio (runs of one repetition ran next to each other, in both orders)."""
    result: dict[str, Any] = {"machine": machine(), "base": base, "calls": {}}
    text = ""
    for call, by_method in rates.items():
        medians = {m: statistics.median(v) for m, v in by_method.items()}
        first = by_method["before the hook"]
        paired = {
            m: statistics.median(ratio(a, b) for a, b in zip(v, first, strict=True))
            for m, v in by_method.items()
        }
        rows = [
            (
                m,
                f"{medians[m]:,.0f}",
                f"{1e6 / medians[m]:.1f}",
                f"{ratio(medians[m], medians['before the hook']):.3f}",
                f"{paired[m]:.3f}",
            )
            for m in METHODS
        ]
        result["calls"][call] = {
            "medians": medians,
            "paired_ratio": paired,
            "runs": by_method,
            "count": counts[call],
        }
        label = "send()" if call == "send" else "send_async() + flush()"
        text += table(
            f"{label}, {counts[call]} messages",
            ["method", "msgs/s", "us/msg", "ratio of medians", "median paired ratio"],
            rows,
        )
    print(text)
    write_json(name, result)


if __name__ == "__main__":
    main()
