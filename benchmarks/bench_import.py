"""Import time in fresh processes: ``import failover_client`` vs ``import stomp`` (and proton).

Run: ``python benchmarks/bench_import.py [--rounds 21]``. Prints figures; asserts nothing.

Each round starts one fresh interpreter per statement, in an order that alternates between
rounds (ours first, then the anchors first), and each child times its own import with
``time.perf_counter`` around the statement, so interpreter start-up (the same for all) is not
counted. Reported: the median over the rounds and the ratio of medians, plus the median of
each round's paired ratio (ours / ``import stomp``), which is less exposed to load that comes
and goes on a shared machine.

Byte code is compiled first (``compileall``) and the children may write it, as an installed
package has it: without it every import compiles the sources and measures the compiler.

Statements:

* ``import failover_client``: what the issue counts;
* ``import failover_client; failover_client.FailoverConnection``: the package with its engine
  (a lazily imported piece counts here);
* ``import failover_client.stomp`` : the package with the STOMP adapter (which imports
  stomp.py itself);
* ``import stomp`` and ``import proton``: the libraries a user would otherwise import.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STATEMENTS = {
    "import failover_client": "import failover_client",
    "... + FailoverConnection": "import failover_client; failover_client.FailoverConnection",
    "import failover_client.stomp": "import failover_client.stomp",
    "import stomp": "import stomp",
    "import proton": "import proton",
}
OURS = "import failover_client"
ANCHOR = "import stomp"

_CHILD = (
    "import time, sys\n"
    "start = time.perf_counter()\n"
    "exec(sys.argv[1])\n"
    "print(time.perf_counter() - start)\n"
)


def _compile() -> None:
    for folder in ("failover_client", "policies", "uri"):
        compileall.compile_dir(str(ROOT / folder), quiet=1)


def _once(statement: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, statement],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(Path.home()),  # not the repository: the installed package is what is imported
        timeout=120,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args(argv)
    _compile()
    names = list(STATEMENTS)
    for name in names:  # one unrecorded round: every cache warm
        _once(STATEMENTS[name])
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(args.rounds):
        for name in names if round_number % 2 == 0 else names[::-1]:
            times[name].append(_once(STATEMENTS[name]))
    medians = {name: statistics.median(t) for name, t in times.items()}
    anchor = medians[ANCHOR]
    print(f"Import time, fresh processes, median of {args.rounds} rounds (seconds)\n")
    print(f"| statement | median | min | max | / {ANCHOR} |")
    print("|---|---|---|---|---|")
    for name in names:
        t = times[name]
        print(
            f"| {name} | {medians[name]:.4f} | {min(t):.4f} | {max(t):.4f} "
            f"| {medians[name] / anchor:.2f}x |"
        )
    paired = statistics.median(a / b for a, b in zip(times[OURS], times[ANCHOR], strict=True))
    print(f"\nmedian of paired ratios, {OURS} / {ANCHOR}: {paired:.2f}x")
    result = {
        "benchmark": "import",
        "rounds": args.rounds,
        "medians_s": medians,
        "paired_ratio_vs_stomp": paired,
        "times_s": times,
    }
    print(json.dumps({"medians_s": {k: round(v, 4) for k, v in medians.items()}}))
    return result


if __name__ == "__main__":
    main()
