"""What an idle connection costs: threads, resident memory and CPU, 1 to 200 connections.

Run: ``python benchmarks/bench_idle.py [--counts 1,10,50,200] [--idle 30] [--rounds 1]``

Starts one ActiveMQ Classic and one RabbitMQ broker, then, for each count and round, opens that
many idle connections with heart-beats on (10 s both ways, the URI default) in a fresh process
per client and count, so no client's threads, imports or garbage are counted for another:

* ``ours-stomp``: ``FailoverConnection`` to ActiveMQ over STOMP;
* ``stomp.py``: raw ``stomp.Connection(heartbeats=(10000, 10000))`` to the same broker;
* ``stomp.py-5s``: the like-for-like anchor, raw ``stomp.Connection(heartbeats=(5000, 5000))``:
  the same heart-beat traffic on the wire as ours, one beat each way every 5 s. Ours asks the
  broker for beats at half the wanted 10 s (ActiveMQ may stay silent for almost two of its
  intervals, see ``failover_client/stomp/_heartbeat.py``) and sends at half the negotiated
  10 s, so it beats twice as often as ``stomp.py`` with 10 s; this row prices the beat itself
  (why half: ``probe_broker_beats.py``);
* ``ours-amqp``: ``FailoverConnection`` to RabbitMQ over AMQP 1.0;
* ``proton``: raw python-qpid-proton, a ``Container`` per connection on a thread of its own
  (``idle_timeout=10``): one independent connection object each, like ``FailoverConnection``.

Each child first opens and closes one connection (imports and first-use set-up are not a
connection's cost), then opens the N connections, waits for start-up threads to end, and
measures: threads added per connection, resident memory added per connection, and process
CPU time over ``--idle`` seconds, in ms per connection per minute (in the JSON also split by
kind of thread, from ``/proc/self/task/*/schedstat``). Clients are interleaved
within each round; with several rounds the medians are reported. Where a STOMP connection's
memory goes (stacks, Python objects, malloc; the allocation sites): ``probe_idle_memory.py``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import brokers, log, machine, ratio, table, write_json

SETTLE = 3.0
"""Seconds after the last connect before measuring: start-up threads (the dispatch thread of
the connect events, a writer thread) end after their one-second linger."""

CLIENTS = ("ours-stomp", "stomp.py", "stomp.py-5s", "ours-amqp", "proton")
ANCHORS = (
    ("ours-stomp", "stomp.py-5s", "same beats on the wire (5 s each way)"),
    ("ours-stomp", "stomp.py", "heartbeats=(10000, 10000): half our beats"),
    ("ours-amqp", "proton", "idle_timeout=10"),
)
HEARTBEATS = {"stomp.py": (10000, 10000), "stomp.py-5s": (5000, 5000)}


# --- the child: one client, N connections ----------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _thread_cpu_ns() -> collections.Counter[str]:
    """CPU time so far of each kind of thread of this process (``/proc/self/task/*/schedstat``,
    in ns), keyed by thread name without its number or connection."""
    names = {t.native_id: t.name.split(" ")[0].rstrip("-0123456789") for t in threading.enumerate()}
    spent: collections.Counter[str] = collections.Counter()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                spent[names.get(int(tid), "other")] += int(stat.read().split()[0])
        except FileNotFoundError:
            continue  # the thread ended meanwhile
    return spent


def _ours(uri: str) -> Any:
    from failover_client import FailoverConnection  # noqa: PLC0415 - a child imports only the client it measures

    conn = FailoverConnection(f"failover:({uri})")
    conn.connect(timeout=30)
    return conn


def _stomp_py(uri: str, heartbeats: tuple[int, int]) -> Any:
    import stomp  # noqa: PLC0415 - a child imports only the client it measures

    host, port = uri.split("://", 1)[1].rsplit(":", 1)
    conn = stomp.Connection([(host, int(port))], heartbeats=heartbeats)
    conn.connect(wait=True)
    return conn


def _proton(uri: str) -> Any:
    from proton.handlers import MessagingHandler  # noqa: PLC0415 - a child imports only the client it measures
    from proton.reactor import Container  # noqa: PLC0415 - a child imports only the client it measures

    opened = threading.Event()

    class Idle(MessagingHandler):  # type: ignore[misc]
        def on_start(self, event: Any) -> None:
            event.container.connect(
                uri, reconnect=False, idle_timeout=10.0, allowed_mechs="ANONYMOUS PLAIN"
            )

        def on_connection_opened(self, event: Any) -> None:
            opened.set()

    container = Container(Idle())
    thread = threading.Thread(target=container.run, name="proton-container", daemon=True)
    thread.start()
    if not opened.wait(30):  # the broker answers in milliseconds; 30 s means it is not there
        raise TimeoutError(f"proton: no connection to {uri} within 30 s")
    return container


def _close(client: str, conn: Any) -> None:
    if client.startswith("ours"):
        conn.close()
    elif client.startswith("stomp.py"):
        conn.disconnect()
    else:
        conn.stop()


def child(client: str, uri: str, count: int, idle: float) -> dict[str, Any]:
    """Open ``count`` idle connections of ``client`` and measure them."""
    open_one = {"ours-stomp": _ours, "ours-amqp": _ours, "proton": _proton}
    opener = open_one.get(client) or functools.partial(_stomp_py, heartbeats=HEARTBEATS[client])
    _close(client, opener(uri))  # imports and first-use set-up are nobody's per-connection cost
    gc.collect()
    time.sleep(SETTLE)
    threads0, rss0 = threading.active_count(), _rss()
    conns = [opener(uri) for _ in range(count)]
    time.sleep(SETTLE)
    gc.collect()
    threads1, rss1 = threading.active_count(), _rss()
    names = collections.Counter(
        t.name.split(" ")[0].rstrip("-0123456789") for t in threading.enumerate()
    )
    cpu0, by_thread0 = time.process_time(), _thread_cpu_ns()
    time.sleep(idle)
    cpu = time.process_time() - cpu0
    by_thread = _thread_cpu_ns()
    by_thread.subtract(by_thread0)
    threads2 = threading.active_count()
    return {
        "client": client,
        "connections": len(conns),  # held open until measured
        "threads_per_connection": (threads1 - threads0) / count,
        "threads_per_connection_at_end": (threads2 - threads0) / count,
        "rss_kib_per_connection": (rss1 - rss0) / count / 1024,
        "idle_cpu_ms_per_connection_per_min": cpu / count / idle * 60e3,
        "threads": dict(names),
        # Where the idle CPU goes: the timer or heart-beat thread, the readers, the main thread.
        "idle_cpu_ms_per_connection_per_min_by_thread": {
            name: round(ns / 1e6 / count / idle * 60, 3) for name, ns in by_thread.items() if ns > 0
        },
        "idle_seconds": idle,
    }


# --- the parent: brokers, interleaved rounds, table ------------------------------------------


def run_child(client: str, uri: str, count: int, idle: float) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", client, uri, str(count), str(idle)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=idle + 300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{client} x{count} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1,10,50,200")
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    clients = [c for c in args.clients.split(",") if c]
    runs: dict[tuple[str, int], list[dict[str, Any]]] = collections.defaultdict(list)
    with (
        brokers(1, kind="activemq", full_jit=False, label="idle") as amq,
        brokers(1, kind="rabbitmq", label="idle-rmq") as rmq,
    ):
        uris = {
            "ours-stomp": amq[0].uri("stomp"),
            "stomp.py": amq[0].uri("stomp"),
            "stomp.py-5s": amq[0].uri("stomp"),
            "ours-amqp": rmq[0].uri("amqp"),
            "proton": rmq[0].uri("amqp"),
        }
        for round_no in range(args.rounds):
            for count in counts:
                for client in clients:
                    log(f"round {round_no + 1}: {client} x{count}")
                    runs[(client, count)].append(run_child(client, uris[client], count, args.idle))
    keys = (
        "threads_per_connection",
        "rss_kib_per_connection",
        "idle_cpu_ms_per_connection_per_min",
    )
    medians = {
        f"{client} x{count}": {k: statistics.median(r[k] for r in rs) for k in keys}
        | {"threads": rs[-1]["threads"]}
        | {
            "idle_cpu_by_thread": {
                name: statistics.median(
                    r["idle_cpu_ms_per_connection_per_min_by_thread"].get(name, 0.0) for r in rs
                )
                for name in rs[-1]["idle_cpu_ms_per_connection_per_min_by_thread"]
            }
        }
        for (client, count), rs in runs.items()
    }
    rows = []
    for ours, anchor, label in ANCHORS:
        if ours not in clients or anchor not in clients:
            continue
        for count in counts:
            a, b = medians[f"{ours} x{count}"], medians[f"{anchor} x{count}"]
            rows.append(
                [
                    f"{ours} / {anchor} ({label})",
                    count,
                    f"{a[keys[0]]:.2f} / {b[keys[0]]:.2f}",
                    f"{a[keys[1]]:.0f} / {b[keys[1]]:.0f}",
                    f"{a[keys[2]]:.2f} / {b[keys[2]]:.2f}",
                    f"{ratio(a[keys[1]], b[keys[1]])} / {ratio(a[keys[2]], b[keys[2]])}",
                ]
            )
    text = table(
        f"Idle connections with heart-beats (10 s wanted; stomp.py-5s: 5 s), {args.idle:g} s idle, "
        f"median of {args.rounds} round(s), each client and count in a fresh process",
        [
            "clients (ours / anchor)",
            "connections",
            "threads per connection",
            "RSS KiB per connection",
            "idle CPU ms per connection per min",
            "ratio RSS / CPU",
        ],
        rows,
    )
    path = write_json(
        "idle",
        {
            "command": " ".join(["python", "benchmarks/bench_idle.py", *sys.argv[1:]]),
            "machine": machine(),
            "table": text,
            "medians": medians,
            "runs": {f"{c} x{n}": rs for (c, n), rs in runs.items()},
        },
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        client, uri, count, idle = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
        print(json.dumps(child(client, uri, count, idle)), flush=True)
        os._exit(0)  # daemon threads of 200 connections: no orderly teardown to measure
    main()
