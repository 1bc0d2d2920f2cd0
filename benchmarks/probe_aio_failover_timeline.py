"""A fail-over step by step, the asyncio connection against the sync one, same run.

Run: ``python benchmarks/probe_aio_failover_timeline.py [--kills 6] [--json PATH]``

Two ActiveMQ Classic brokers as ``bench_aio.py`` starts them. Each round opens a fresh
connection (asyncio and sync take turns, so the machine's noise falls on both alike), sends
confirmed persistent 128-byte messages one by one, SIGKILLs the broker in use and stamps, as
``time.perf_counter()`` offsets from just before the signal, where the library is:

* the end of a bare TCP connection to the killed broker (read by a thread of its own: when
  the operating system closed the JVM's sockets) and the killed JVM reaped;
* the end of the killed session's stream read (``end_io_loop``: the loop's reader or the I/O
  thread), the reconnect loop's wake-up and its pass starting on its thread;
* the dial of the next broker, the loop's registration of the new socket (asyncio only),
  the wait for CONNECTED, CONNECTED read, the dial returned;
* the new session installed (unconfirmed sends replayed) and ``FailedOver`` emitted, and
  ``FailedOver`` at a listener (on the loop for asyncio, the dispatch thread for sync).

The steps are observed by wrapping library methods from this script (nothing in the library
is changed). Prints, per step, the median and range of its gap from the step before, for
both connections (docs/asyncio.md, "Where a fail-over and an awaited send spend their time").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks import bench_aio
from benchmarks._common import brokers, log, port_of, table
from failover_client import FailedOver, FailoverConnection
from failover_client._events import Event
from failover_client.aio import AsyncFailoverConnection
from failover_client.engine import _loop, _parking
from failover_client.stomp import _connector, _handshake, _ioloop, _loopread, _state
from failover_client.testing.brokers import Cluster

STEPS = (
    ("kill", "probe socket ended", "SIGKILL -> a bare socket to the broker ends"),
    ("kill", "kill returned", "SIGKILL -> the killed JVM reaped"),
    ("kill", "stream ended", "SIGKILL -> the killed session's stream ends"),
    ("stream ended", "dial", "-> the reconnect pass dials the next broker"),
    ("dial", "CONNECTED read", "dial -> CONNECTED read"),
    ("CONNECTED read", "dial returned", "-> handshake done"),
    ("dial returned", "announced", "-> installed, replayed, FailedOver emitted"),
    ("announced", "FailedOver heard", "-> FailedOver at the listener"),
    ("kill", "FailedOver heard", "SIGKILL -> FailedOver at the listener"),
)

_marks: list[tuple[float, str]] = []
_recording = threading.Event()


def mark(label: str) -> None:
    """Stamp ``label`` (its first stamp per round counts)."""
    if _recording.is_set():
        _marks.append((time.perf_counter(), label))


def _wrap(owner: Any, name: str, before: str, after: str | None = None) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mark(before)
        try:
            return original(*args, **kwargs)
        finally:
            if after is not None:
                mark(after)

    setattr(owner, name, wrapped)


def install_probes() -> None:
    end = _ioloop.end_io_loop

    def ended(transport: Any, **kwargs: Any) -> None:
        mark("stream ended")
        end(transport, **kwargs)

    _ioloop.end_io_loop = ended  # type: ignore[assignment]
    _loopread.end_io_loop = ended  # type: ignore[assignment]  # the loop reader's own import
    _wrap(_parking.WakeEvent, "set", "wake-up")
    _wrap(_parking.Parking, "_run", "pass running")
    _wrap(_connector.StompConnector, "connect", "dial", "dial returned")
    _wrap(_loopread.LoopReader, "_register", "socket registered with the loop")
    _wrap(_handshake.Handshake, "_await_connected", "awaiting CONNECTED")
    _wrap(_state.SessionState, "note_connected", "CONNECTED read")
    _wrap(_loop.ReconnectLoop, "_announce", "announcing", "announced")


def heard(event: Event) -> None:
    if isinstance(event, FailedOver):
        mark("FailedOver heard")


def round_marks(killed: float) -> dict[str, float]:
    """The round's first stamp of each label, in ms from the kill."""
    firsts: dict[str, float] = {"kill": 0.0}
    for at, label in _marks:
        firsts.setdefault(label, (at - killed) * 1000)
    return firsts


def kill(victim: Any) -> float:
    """SIGKILL ``victim``, with a bare TCP connection to it read by a thread of its own: its
    end (``probe socket ended``) is when the operating system closed the killed JVM's sockets,
    which no client can notice sooner."""
    probe = socket.create_connection(("127.0.0.1", victim.endpoint("stomp").port), timeout=5)
    probe.settimeout(None)

    def watch() -> None:
        with contextlib.suppress(OSError):  # a reset is an end as good as EOF
            while probe.recv(4096):  # ends: the broker dies (EOF or reset)
                pass
        mark("probe socket ended")
        probe.close()

    watcher = threading.Thread(target=watch, name="probe-eof", daemon=True)
    watcher.start()
    at = time.perf_counter()
    _recording.set()
    victim.kill()
    mark("kill returned")
    watcher.join(5)  # ends: the killed broker's sockets are closed by now
    return at


async def aio_round(cluster: Cluster) -> dict[str, float]:
    dest = bench_aio.queue()
    conn = AsyncFailoverConnection(bench_aio.uri(cluster), listeners=[heard])
    await conn.connect()
    stop = False

    async def produce() -> None:
        while not stop:
            await conn.send(dest, bench_aio.BODY, bench_aio.HEADERS)

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0.5)
    victim = next(b for b in cluster if b.endpoint("stomp").port == port_of(conn.broker))
    _marks.clear()
    killed = await asyncio.to_thread(kill, victim)
    await asyncio.sleep(0.3)  # the fail-over and the sends after it (it takes 5-80 ms here)
    _recording.clear()
    stop = True
    await producer
    await conn.close()
    await asyncio.to_thread(victim.start)
    return round_marks(killed)


def sync_round(cluster: Cluster) -> dict[str, float]:
    dest = bench_aio.queue()
    conn = FailoverConnection(bench_aio.uri(cluster), listeners=[heard])
    conn.connect()
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            conn.send(dest, bench_aio.BODY, bench_aio.HEADERS)

    thread = threading.Thread(target=produce, name="producer")
    thread.start()
    time.sleep(0.5)
    victim = next(b for b in cluster if b.endpoint("stomp").port == port_of(conn.broker))
    _marks.clear()
    killed = kill(victim)
    time.sleep(0.3)  # as in aio_round
    _recording.clear()
    stop.set()
    thread.join(60)  # ends: the producer's next send returns (it is confirmed at once now)
    conn.close()
    victim.start()
    return round_marks(killed)


def gaps(rounds: list[dict[str, float]], start: str, end: str) -> list[float]:
    return [r[end] - r[start] for r in rounds if start in r and end in r]


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


async def main_async(kills: int) -> dict[str, list[dict[str, float]]]:
    rounds: dict[str, list[dict[str, float]]] = {"aio": [], "sync": []}
    with brokers(2, label="aio-timeline", full_jit=True, store="/dev/shm") as cluster:
        runs: dict[str, Callable[[], Any]] = {
            "aio": lambda: aio_round(cluster),
            "sync": lambda: asyncio.to_thread(sync_round, cluster),
        }
        await runs["aio"]()  # warm-up rounds, not recorded
        await runs["sync"]()
        for n in range(kills):
            for who in ("aio", "sync") if n % 2 == 0 else ("sync", "aio"):
                rounds[who].append(await runs[who]())
            log(
                f"kill {n + 1}/{kills}: aio {rounds['aio'][-1].get('FailedOver heard')} ms, "
                f"sync {rounds['sync'][-1].get('FailedOver heard')} ms"
            )
    return rounds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=6, help="kills per connection")
    parser.add_argument("--json", type=Path, help="write every round's stamps here")
    args = parser.parse_args(argv)
    install_probes()
    rounds = asyncio.run(main_async(args.kills))
    rows = [
        [what, cell(gaps(rounds["aio"], a, b)), cell(gaps(rounds["sync"], a, b))]
        for a, b, what in STEPS
    ]
    table("fail-over steps, ms: median (range)", ["step", "asyncio", "sync"], rows)
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    if args.json is not None:
        args.json.write_text(json.dumps(rounds, indent=1))


if __name__ == "__main__":
    main()
