"""Blocking confirmed sends in fresh processes: FailoverConnection.send vs raw stomp.py.

Run: ``python benchmarks/bench_send_fresh.py [--rounds 8] [--messages 2000] [--stores memory disk]``

``bench_throughput.py`` runs every method in one long-lived process, where both clients are
warm and share the interpreter. An application that sends a few thousand confirmed messages
and exits pays its client's cold costs too, and a process of its own shows the client's CPU
alone. So here every measurement is a new process with one connection: it connects, sends 200
messages unrecorded (the broker's and the interpreter's caches), then ``--messages`` persistent
128-byte messages, each waiting for its confirmation, and reports messages per second and its
own CPU per message (every thread, user and system, during the recorded loop only).
Rounds alternate which client goes first; reported: medians over the rounds and the median of
the rounds' paired ratios.

* ``raw``: stomp.py ``send(..., receipt=...)``, then wait for that receipt (``_raw.RawSender``);
* ``ours``: ``FailoverConnection.send`` with URI defaults (one receipt per message when sends
  come one at a time, as here).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, table

BODY = b"x" * 128
PERSISTENT = {"persistent": "true"}
STORES = {"disk": None, "memory": "/dev/shm"}
WARM_UP = 200


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(which: str, host: str, port: int, uri: str, count: int) -> None:
    """One measurement (in a fresh process): prints a JSON line with rate and CPU/msg."""
    destination = "/queue/bench.fresh"
    if which == "ours":
        from failover_client import FailoverConnection  # noqa: PLC0415 - the child's own import

        conn = FailoverConnection(uri)
        conn.connect()

        def send() -> None:
            conn.send(destination, BODY, PERSISTENT)

        close = conn.close
    else:
        from benchmarks._raw import RawSender  # noqa: PLC0415 - the child's own import

        raw = RawSender((host, port))

        def send() -> None:
            raw.send_confirmed(destination, BODY, PERSISTENT)

        close = raw.close
    for _ in range(WARM_UP):
        send()
    cpu_start = _cpu()
    start = time.perf_counter()
    for _ in range(count):
        send()
    elapsed = time.perf_counter() - start
    cpu = _cpu() - cpu_start
    close()
    print(json.dumps({"rate": count / elapsed, "cpu_us": cpu / count * 1e6}))


def _spawn(which: str, host: str, port: int, uri: str, count: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", which, host, str(port), uri, str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--stores", nargs="+", choices=sorted(STORES), default=["memory", "disk"])
    parser.add_argument("--child", nargs=5, metavar=("WHICH", "HOST", "PORT", "URI", "COUNT"))
    args = parser.parse_args(argv)
    if args.child:
        which, host, port, uri, count = args.child
        child(which, host, int(port), uri, int(count))
        return {}
    result: dict[str, Any] = {}
    for store in args.stores:
        with brokers(1, label="fresh", full_jit=True, store=STORES[store]) as cluster:
            endpoint = cluster[0].endpoint("stomp")
            uri = cluster.failover_uri("stomp")
            runs: dict[str, list[dict[str, float]]] = {"raw": [], "ours": []}
            for which in ("raw", "ours"):  # unrecorded: the broker's JIT and the queue
                _spawn(which, endpoint.host, endpoint.port, uri, args.messages)
            for n in range(args.rounds):
                for which in ("raw", "ours") if n % 2 == 0 else ("ours", "raw"):
                    runs[which].append(
                        _spawn(which, endpoint.host, endpoint.port, uri, args.messages)
                    )
                    log(f"{store} round {n + 1}: {which:4} {runs[which][-1]['rate']:8,.0f} msg/s")
        rate = {w: statistics.median(r["rate"] for r in rs) for w, rs in runs.items()}
        cpu = {w: statistics.median(r["cpu_us"] for r in rs) for w, rs in runs.items()}
        paired = statistics.median(
            a["rate"] / b["rate"] for a, b in zip(runs["ours"], runs["raw"], strict=True)
        )
        result[store] = {"rate": rate, "cpu_us": cpu, "paired_ratio": paired, "runs": runs}
        text = table(  # printed by table()
            f"Blocking confirmed sends, fresh processes, store on {store}, "
            f"{args.messages} messages, median of {args.rounds} rounds",
            ["client", "msg/s", "CPU us/msg", "rate ratio (paired)", "CPU ratio"],
            [
                [
                    "raw stomp.py, receipt per message",
                    f"{rate['raw']:,.0f}",
                    f"{cpu['raw']:.1f}",
                    "",
                    "",
                ],
                [
                    "FailoverConnection.send",
                    f"{rate['ours']:,.0f}",
                    f"{cpu['ours']:.1f}",
                    f"{rate['ours'] / rate['raw']:.2f}x ({paired:.2f}x)",
                    f"{cpu['ours'] / cpu['raw']:.2f}x",
                ],
            ],
        )
        result[store]["table"] = text
    return result


if __name__ == "__main__":
    main()
