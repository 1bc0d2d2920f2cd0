"""Run every benchmark; write ``benchmarks/results/results.json``, ``results.md`` and plots.

Run: ``python benchmarks/run_all.py [--quick] [--only NAME ...] [--skip NAME ...]``;
``--replot`` redraws the plots and the markdown from an existing ``results.json``.

Each ``bench_*.py`` runs as its own subprocess (so one that crashes or leaks cannot disturb the
next, and each starts and stops its own brokers). The real-broker benchmarks write their result
dict as ``benchmarks/results/<name>.json``; the micro-benchmarks that only print are recorded by
their output. ``--quick`` passes ``--quick`` to the benchmarks that know it (reduced counts: the
whole run takes a few minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import RESULTS_DIR, machine
from benchmarks._plots import plot_all

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# name -> (script, writes results/<name>.json, understands --quick, arguments for --quick)
BENCHMARKS: dict[str, tuple[str, bool, list[str]]] = {
    "uri_parse": ("bench_uri_parse.py", False, []),
    "policies": ("bench_policies.py", False, ["--samples", "100"]),
    "throughput": ("bench_throughput.py", True, ["--quick"]),
    "failover": ("bench_failover.py", True, ["--quick"]),
    "hung": ("bench_hung.py", True, ["--quick"]),
    "chaos": ("bench_chaos.py", True, ["--quick"]),
    "poison": ("bench_poison.py", True, ["--quick"]),
    "amqp": ("bench_amqp.py", True, ["--quick"]),
    "rebalance": ("bench_rebalance.py", True, ["--quick"]),
    "spark_sink": ("bench_spark_sink.py", True, ["--quick"]),
    "spark_source": ("bench_spark_source.py", True, ["--quick"]),
    "consume": ("bench_consume.py", True, ["--quick"]),
    "topology": ("bench_topology.py", True, ["--rounds", "2", "--idle", "5", "--watchers", "5"]),
    "idle": ("bench_idle.py", True, ["--counts", "1,10", "--idle", "10"]),
}
TIMEOUT = {"quick": 900.0, "full": 3600.0}


def run_one(name: str, quick: bool) -> dict[str, Any]:
    script, writes_json, quick_args = BENCHMARKS[name]
    argv = [sys.executable, str(HERE / script), *(quick_args if quick else [])]
    result_file = RESULTS_DIR / f"{name}.json"
    if writes_json and result_file.exists():
        result_file.unlink()  # never report a previous run's figures as this one's
    started = time.monotonic()
    print(f"\n=== {name}: {shlex.join(argv[1:])}", flush=True)
    try:
        done = subprocess.run(
            argv,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT["quick" if quick else "full"],
            check=False,
        )
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout if isinstance(exc.stdout, str) else ""
        stderr = exc.stderr if isinstance(exc.stderr, str) else ""
        code = None
    print(stdout, end="", flush=True)
    entry: dict[str, Any] = {
        "command": shlex.join(["python", f"benchmarks/{script}", *argv[2:]]),
        "exit_code": code,
        "seconds": round(time.monotonic() - started, 1),
        "stdout": stdout,
        "stderr_tail": stderr[-3000:],
    }
    if writes_json and result_file.exists():
        entry["result"] = json.loads(result_file.read_text())
    if code != 0:
        print(f"--- {name} exited with {code}; stderr tail:\n{stderr[-2000:]}", flush=True)
    return entry


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']}",
        f"- machine: {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, {m['os']}",
        f"- Python {m['python']}, {m['java']}, ActiveMQ {m['activemq']}, "
        f"RabbitMQ {m['rabbitmq']}, libraries {m['libraries']}",
        f"- load average at start / end: {report['load_start']} / {report['load_end']}",
        "- brokers and clients share the machine; every figure is compared with raw stomp.py "
        "measured in the same run",
        "",
    ]
    for name, entry in report["benchmarks"].items():
        lines += [
            f"## {name}",
            "",
            f"`{entry['command']}` (exit {entry['exit_code']}, {entry['seconds']} s)",
            "",
        ]
        result = entry.get("result")
        if result and result.get("table"):
            lines.append(result["table"].strip())
            if result.get("notes"):
                lines += ["", f"Notes: {result['notes']}"]
        else:
            lines += ["```", entry["stdout"].strip(), "```"]
        lines.append("")
    if report.get("plots"):
        lines += ["Plots: " + ", ".join(f"`{p}`" for p in report["plots"]), ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced counts (a few minutes)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=None)
    parser.add_argument("--skip", nargs="+", choices=sorted(BENCHMARKS), default=[])
    parser.add_argument(
        "--replot", action="store_true", help="only redraw plots and markdown from results.json"
    )
    args = parser.parse_args(argv)
    if args.replot:
        report = json.loads((RESULTS_DIR / "results.json").read_text())
        _finish(report)
        return report
    names = [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/run_all.py", *(argv or sys.argv[1:])]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "benchmarks": {},
    }
    for name in names:
        report["benchmarks"][name] = run_one(name, args.quick)
    report["load_end"] = [round(x, 2) for x in os.getloadavg()]
    report["ok"] = all(e["exit_code"] == 0 for e in report["benchmarks"].values())
    _finish(report)
    return report


def _finish(report: dict[str, Any]) -> None:
    """Draw the plots, then write results.json and results.md."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results = {n: e["result"] for n, e in report["benchmarks"].items() if e.get("result")}
    drawn = plot_all(results, RESULTS_DIR)
    report["plots"] = [str(p.relative_to(ROOT)) for p in drawn]
    (RESULTS_DIR / "results.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (RESULTS_DIR / "results.md").write_text(markdown(report))
    print(f"\nwrote {RESULTS_DIR / 'results.json'}, {RESULTS_DIR / 'results.md'}", end="")
    print("".join(f", {p}" for p in drawn))


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
