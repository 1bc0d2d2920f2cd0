"""A 5 ms ticker's delay during a burst of deliveries: the library's share and the machine's.

Run: ``python benchmarks/probe_burst_ticker.py [--rounds 3] [--burst 10000]``

``bench_aio.py`` records the ticker's delay while the asyncio connection consumes a burst in the
same loop. On a 2-core machine that delay also counts the time the operating system gives the
CPU to the broker, which is sending the burst at the same moment. This probe separates the two,
with one ActiveMQ broker (store in memory) and the same queued burst in each arm, alternating
between rounds:

* ``asyncio connection``: ``AsyncFailoverConnection`` consumes the burst with ``async for`` in
  the loop the ticker runs in (as ``bench_aio.py`` does), the loop's longest step in CPU time
  beside it (the library's own work, whatever the load);
* ``idle loop, stomp.py in another process``: the ticker in a loop that does nothing else while
  a separate process consumes the same burst with plain stomp.py (auto acknowledgement, the
  same prefetch): what the broker's sending alone does to an idle loop on this machine;
* ``idle loop, nothing consuming``: the ticker alone (the machine's floor).

The library's share of a delay is what the first arm shows beyond the second.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, machine, port_of, table, write_json
from benchmarks.bench_aio import BODY, METER, OPTIONS, Ticker, queue
from failover_client.aio import AsyncFailoverConnection
from failover_client.testing.brokers import Cluster

PREFETCH = 1000
CHILD_DEADLINE = 120.0
"""Seconds the stomp.py consumer process may take for the burst before it is killed."""

CHILD = """
import sys, threading, stomp
host, port, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
count, prefetch, deadline = int(sys.argv[4]), sys.argv[5], float(sys.argv[6])
done = threading.Event()
seen = [0]
class Listener(stomp.ConnectionListener):
    def on_message(self, frame):
        seen[0] += 1
        if seen[0] == count:
            done.set()
conn = stomp.Connection12([(host, port)], heartbeats=(0, 0), auto_decode=False)
conn.set_listener("probe", Listener())
conn.connect(wait=True)
print("ready", flush=True)
sys.stdin.readline()
prefetched = {"activemq.prefetchSize": prefetch, "prefetch-count": prefetch}
conn.subscribe(dest, id="1", ack="auto", headers=prefetched)
print("done" if done.wait(deadline) else f"timeout after {seen[0]}", flush=True)
conn.disconnect()
"""
"""The stomp.py consumer process: argv host, port, destination, count, prefetch, deadline."""


def summary(ticker: Ticker, elapsed: float, got: int) -> dict[str, Any]:
    return {"messages": got, "seconds": round(elapsed, 3), **ticker.summary()}


async def ours(cluster: Cluster, count: int) -> dict[str, Any]:
    dest = queue()
    await asyncio.to_thread(cluster[0].send, dest, [BODY] * count)
    conn = AsyncFailoverConnection(f"failover:({cluster[0].uri()})?{OPTIONS}")
    await conn.connect()
    try:
        with Ticker() as ticker:
            start = time.perf_counter()
            sub = await conn.subscribe(dest, prefetch=PREFETCH)
            got = 0
            async for _message in sub:
                got += 1
                if got == count:
                    break
            elapsed = time.perf_counter() - start
    finally:
        await conn.close()
    return summary(ticker, elapsed, got)


async def other_process(cluster: Cluster, count: int) -> dict[str, Any]:
    dest = queue()
    await asyncio.to_thread(cluster[0].send, dest, [BODY] * count)
    broker = cluster[0]
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            "127.0.0.1",
            str(port_of(broker.uri())),
            dest,
            str(count),
            str(PREFETCH),
            str(CHILD_DEADLINE),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        ready = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30.0)
        if ready.strip() != "ready":
            raise RuntimeError(f"the stomp.py consumer did not start: {ready!r}")
        with Ticker() as ticker:
            start = time.perf_counter()
            child.stdin.write("go\n")
            child.stdin.flush()
            # The child's own deadline ends it first; this one only guards a hung pipe.
            line = await asyncio.wait_for(
                asyncio.to_thread(child.stdout.readline), CHILD_DEADLINE + 10.0
            )
            elapsed = time.perf_counter() - start
        if line.strip() != "done":
            raise RuntimeError(f"the stomp.py consumer did not get the burst: {line!r}")
    finally:
        child.kill()
        child.wait(10.0)
    return summary(ticker, elapsed, count)


async def floor(seconds: float) -> dict[str, Any]:
    with Ticker() as ticker:
        await asyncio.sleep(seconds)
    return summary(ticker, seconds, 0)


ARMS = ("asyncio connection", "idle loop, stomp.py in another process", "idle loop, nothing")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    with brokers(1, label="burst", full_jit=True, store="/dev/shm") as cluster:
        await ours(cluster, args.burst)  # warm-up: the broker's JIT, the library's imports
        for round_ in range(args.rounds):
            order = [ours, other_process] if round_ % 2 == 0 else [other_process, ours]
            for arm in order:
                result = await arm(cluster, args.burst)
                name = ARMS[0] if arm is ours else ARMS[1]
                runs[name].append(result)
                log(f"round {round_ + 1} {name}: {result}")
            runs[ARMS[2]].append(await floor(runs[ARMS[0]][-1]["seconds"]))
    return {"machine": machine(), "command": " ".join(sys.argv), "burst": args.burst, "runs": runs}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burst", type=int, default=10000)
    args = parser.parse_args(argv)
    METER.install()
    result = asyncio.run(main_async(args))
    keys = ("max_ms", "p99_ms", "median_ms", "longest_step_cpu_ms")
    rows = [
        [arm, *(run[k] for k in keys), run["seconds"]]
        for arm, runs in result["runs"].items()
        for run in runs
    ]
    table(
        f"5 ms ticker delay during a burst of {args.burst:,} deliveries (ms)",
        ["arm", "max", "p99", "median", "longest step CPU", "burst s"],
        rows,
    )
    medians = {
        arm: {k: statistics.median(r[k] for r in runs) for k in keys}
        for arm, runs in result["runs"].items()
    }
    result["medians"] = medians
    for arm, values in medians.items():
        print(f"median over rounds, {arm}: {values}")
    path = write_json("burst-ticker", result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
