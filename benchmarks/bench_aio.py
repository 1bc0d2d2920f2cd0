"""The asyncio connection: event-loop responsiveness, throughput against the sync API, resources.

Run: ``python benchmarks/bench_aio.py [--reps 5] [--quick]``

Two ActiveMQ Classic brokers on loopback, stores in memory (/dev/shm: the client's own cost
shows, not the broker's fsync), 128-byte persistent bodies.

* Responsiveness: a ticker task in the same loop asks to wake every 5 ms; its delay past each
  due time is recorded while the library works: 2,000 awaited confirmed sends; a fail-over
  (SIGKILL of the broker in use) under an awaited-send producer; a burst of 10,000 deliveries
  (queued on the broker first, then consumed with ``async for`` and acknowledged). Reported:
  the worst delay, p99 and p99.9, per phase and repetition (the machine is shared: the worst
  includes the operating system's and the garbage collector's pauses).
* Throughput, same run, interleaved (A B B A per repetition): ``await conn.send()`` one by one
  against the sync ``send()``; ``await conn.submit()`` + ``await conn.flush()`` (pipelined)
  against the sync ``send_async()`` + ``flush()``. Medians and ratios. The rate rounds run
  without the ticker and the step meter (costs only the asyncio side would pay); the
  responsiveness phases follow them.
* Fail-over time: kill of the broker in use to the ``FailedOver`` event, the asyncio and the
  sync connection under the same producer pattern, alternating, same run. Also the event's
  own ``duration`` (the engine's clock, from the reconnect loop seeing the session lost to the
  next broker's session up): the kill's first part, the killed JVM's exit until its sockets
  close (4-55 ms here, the same for both clients), is not in it.
* Resources: 100 asyncio connections in one loop: threads and resident memory per connection.

The asyncio connection's plain TCP STOMP sessions are read on the event loop itself (one
``recv`` and its frames per readiness, ``failover_client.stomp._loopread``): no reader thread,
and confirmations and deliveries reach the loop without a hand-off between threads (the
``handoffs`` counters count only those left: events, the reconnect loop's state changes).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import itertools

from benchmarks._common import brokers, log, machine, port_of, ratio, table, write_json
from failover_client import FailedOver, FailoverConnection
from failover_client._events import Event
from failover_client.aio import AsyncFailoverConnection
from failover_client.stomp import _loopread
from failover_client.testing.brokers import Broker, Cluster

BODY = b"x" * 128
HEADERS = {"persistent": "true"}
OPTIONS = "randomize=false&initialReconnectDelay=10&maxReconnectDelay=1000"
PERIOD = 0.005
COLUMNS = (
    "ticks",
    "max_ms",
    "p99_ms",
    "median_ms",
    "longest_step_cpu_ms",
    "longest_step_wall_ms",
)


def uri(cluster: Cluster) -> str:
    return f"failover:({','.join(b.uri() for b in cluster)})?{OPTIONS}"


def queue() -> str:
    return f"/queue/bench-aio-{uuid.uuid4().hex[:8]}"


class StepMeter:
    """The longest single step of the event loop (one callback or task step), in wall time and
    in the loop thread's CPU time.

    The ticker's delay is what an application sees, but on a shared machine it also counts the
    time the operating system gave the CPU to other processes. A step's CPU time is the loop
    thread's own work in it: how long the library's code held the loop, whatever the load.
    """

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0
        self.reads: list[float] = []
        """CPU seconds of each readiness of a STOMP socket read on the loop (``_loopread``)."""
        self.enabled = False
        """Measuring (while a :class:`Ticker` runs): the throughput rounds run without it, as
        its two CPU-clock reads per loop step would be a cost only the asyncio side pays."""
        self._original = asyncio.events.Handle._run

    def reset(self) -> None:
        self.cpu = self.wall = 0.0
        self.reads = []

    def install(self) -> None:
        original = self._original
        meter = self
        on_readable = _loopread.LoopReader.on_readable

        def timed(handle: asyncio.events.Handle) -> None:
            if not meter.enabled:
                original(handle)
                return
            cpu, wall = time.thread_time(), time.perf_counter()
            original(handle)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            meter.cpu = max(meter.cpu, cpu)
            meter.wall = max(meter.wall, wall)
            if getattr(handle._callback, "__func__", None) is on_readable:
                meter.reads.append(cpu)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]


METER = StepMeter()


class Ticker:
    """A task that wants to run every ``PERIOD``; records how late it ran (seconds)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self.step_cpu = self.step_wall = 0.0
        self.reads: list[float] = []

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + PERIOD
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            now = loop.time()
            self.delays.append(max(0.0, now - due))
            due = now + PERIOD

    def __enter__(self) -> Ticker:
        METER.reset()
        METER.enabled = True
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        METER.enabled = False
        self.step_cpu, self.step_wall = METER.cpu, METER.wall
        self.reads = sorted(METER.reads)

    def summary(self) -> dict[str, float | int]:
        ordered = sorted(self.delays) or [0.0]

        def at(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

        return {
            "ticks": len(self.delays),
            "max_ms": at(1.0),
            "p99_ms": at(0.99),
            "p999_ms": at(0.999),
            "median_ms": at(0.5),
            "longest_step_cpu_ms": round(self.step_cpu * 1000, 3),
            "longest_step_wall_ms": round(self.step_wall * 1000, 3),
            **self._read_steps(),
        }

    def _read_steps(self) -> dict[str, float | int]:
        """CPU of the loop's reads of STOMP sockets, one readiness each (a subset of steps)."""
        reads = self.reads
        if not reads:
            return {}

        def at(q: float) -> float:
            return round(reads[min(len(reads) - 1, int(q * len(reads)))] * 1000, 3)

        return {
            "read_steps": len(reads),
            "read_step_cpu_median_ms": at(0.5),
            "read_step_cpu_p99_ms": at(0.99),
            "read_step_cpu_max_ms": at(1.0),
        }


async def idle(seconds: float) -> dict[str, float | int]:
    """The ticker alone, the library idle: what the machine itself delays it by."""
    with Ticker() as ticker:
        await asyncio.sleep(seconds)
    return ticker.summary()


# --- throughput and the sends' responsiveness ---------------------------------------------


def sync_blocking(conn: FailoverConnection, dest: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        conn.send(dest, BODY, HEADERS)
    return n / (time.perf_counter() - start)


def sync_pipelined(conn: FailoverConnection, dest: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        conn.send_async(dest, BODY, HEADERS)
    conn.flush()
    return n / (time.perf_counter() - start)


async def aio_awaited_rate(conn: AsyncFailoverConnection, dest: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await conn.send(dest, BODY, HEADERS)
    return n / (time.perf_counter() - start)


async def aio_pipelined_rate(conn: AsyncFailoverConnection, dest: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await conn.submit(dest, BODY, HEADERS)
    await conn.flush()
    return n / (time.perf_counter() - start)


async def aio_awaited(conn: AsyncFailoverConnection, dest: str, n: int) -> tuple[float, Ticker]:
    with Ticker() as ticker:
        rate = await aio_awaited_rate(conn, dest, n)
    return rate, ticker


async def aio_pipelined(conn: AsyncFailoverConnection, dest: str, n: int) -> tuple[float, Ticker]:
    with Ticker() as ticker:
        rate = await aio_pipelined_rate(conn, dest, n)
    return rate, ticker


async def throughput(cluster: Cluster, reps: int, awaited_n: int, piped_n: int) -> dict[str, Any]:
    dest = queue()
    sync = FailoverConnection(uri(cluster))
    sync.connect()
    conn = AsyncFailoverConnection(uri(cluster))
    await conn.connect()
    loop = asyncio.get_running_loop()
    rates: dict[str, list[float]] = {
        k: [] for k in ("sync send", "aio send", "sync pipe", "aio pipe")
    }
    ticks: dict[str, list[dict[str, float | int]]] = {
        "idle (baseline)": [],
        "2000 awaited sends": [],
        "pipelined sends": [],
    }
    # Warm-up round, not recorded.
    await loop.run_in_executor(None, sync_blocking, sync, dest, 200)
    await aio_awaited(conn, dest, 200)
    for rep in range(reps):
        order = ("sync", "aio") if rep % 2 == 0 else ("aio", "sync")
        for who in (*order, *reversed(order)):
            if who == "sync":
                # On a worker thread: the sync API would stop the loop (that is the point).
                rates["sync send"].append(
                    await loop.run_in_executor(None, sync_blocking, sync, dest, awaited_n // 2)
                )
                rates["sync pipe"].append(
                    await loop.run_in_executor(None, sync_pipelined, sync, dest, piped_n // 2)
                )
            else:
                rates["aio send"].append(await aio_awaited_rate(conn, dest, awaited_n // 2))
                rates["aio pipe"].append(await aio_pipelined_rate(conn, dest, piped_n // 2))
        log(
            f"throughput rep {rep + 1}/{reps}: "
            + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
        )
    # The responsiveness phases, after the rates (measured, so not counted in them): the
    # idle baseline, 2,000 awaited sends in one go (the figure the issue names), pipelined.
    for _ in range(max(2, reps // 2)):
        ticks["idle (baseline)"].append(await idle(1.0))
        _, ticker = await aio_awaited(conn, dest, 2000)
        ticks["2000 awaited sends"].append(ticker.summary())
        _, ticker = await aio_pipelined(conn, dest, piped_n // 2)
        ticks["pipelined sends"].append(ticker.summary())
    await conn.close()
    sync.close()
    await asyncio.to_thread(cluster[0].drain, dest, 60.0, 0.5)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "rates_per_s": rates,
        "medians_per_s": medians,
        "awaited_vs_sync_send": ratio(medians["aio send"], medians["sync send"]),
        "pipelined_vs_sync_send_async": ratio(medians["aio pipe"], medians["sync pipe"]),
        "ticker": ticks,
    }


# --- fail-over ---------------------------------------------------------------------------


def kill(victim: Broker) -> float:
    """SIGKILL ``victim``; the monotonic time just before the signal went (both sides start
    their fail-over clocks here, not before a hand-off to the thread that kills)."""
    at = time.monotonic()
    victim.kill()
    return at


def outage(confirmed_at: list[float], killed: float) -> float:
    """The producer's longest wait between two confirmations from the kill on: what the
    application sees of the fail-over (detection, reconnect, replay)."""
    times = [killed] + [t for t in confirmed_at if t > killed]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


async def aio_failover(cluster: Cluster) -> tuple[dict[str, float], dict[str, float | int]]:
    dest = queue()
    events: list[tuple[float, Event]] = []
    conn = AsyncFailoverConnection(
        uri(cluster), listeners=[lambda e: events.append((time.monotonic(), e))]
    )
    await conn.connect()
    stop = False
    confirmed_at: list[float] = []

    async def produce() -> None:
        while not stop:
            await conn.send(dest, BODY, HEADERS)
            confirmed_at.append(time.monotonic())

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0.5)
    victim = next(b for b in cluster if b.endpoint("stomp").port == port_of(conn.broker))
    with Ticker() as ticker:
        # Timed where the signal is sent, on the thread that sends it (as the sync side's).
        killed = await asyncio.to_thread(kill, victim)
        while not any(isinstance(e, FailedOver) for _, e in events):
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.5)  # the replay and the sends after it, under the ticker
    moved, event = next((t, e) for t, e in events if isinstance(e, FailedOver))
    assert isinstance(event, FailedOver)
    stop = True
    await producer
    await conn.close()
    await asyncio.to_thread(victim.start)
    measured = {
        "event_s": moved - killed,
        "outage_s": outage(confirmed_at, killed),
        "reconnect_s": event.duration,
    }
    return measured, ticker.summary()


def sync_failover(cluster: Cluster) -> dict[str, float]:
    dest = queue()
    moved = threading.Event()
    at: list[float] = []
    durations: list[float] = []

    def listener(event: Event) -> None:
        if isinstance(event, FailedOver):
            at.append(time.monotonic())
            durations.append(event.duration)
            moved.set()

    conn = FailoverConnection(uri(cluster), listeners=[listener])
    conn.connect()
    stop = threading.Event()
    confirmed_at: list[float] = []

    def produce() -> None:
        while not stop.is_set():
            conn.send(dest, BODY, HEADERS)
            confirmed_at.append(time.monotonic())

    thread = threading.Thread(target=produce)
    thread.start()
    time.sleep(0.5)
    victim = next(b for b in cluster if b.endpoint("stomp").port == port_of(conn.broker))
    killed = kill(victim)
    moved.wait(60)  # a safety net: a fail-over takes well under a second here
    time.sleep(0.5)
    stop.set()
    thread.join(60)
    conn.close()
    victim.start()
    return {
        "event_s": at[0] - killed,
        "outage_s": outage(confirmed_at, killed),
        "reconnect_s": durations[0],
    }


# --- deliveries --------------------------------------------------------------------------


async def burst(cluster: Cluster, count: int) -> dict[str, Any]:
    dest = queue()
    await asyncio.to_thread(cluster[0].send, dest, [BODY] * count)
    conn = AsyncFailoverConnection(f"failover:({cluster[0].uri()})?{OPTIONS}")
    await conn.connect()
    with Ticker() as ticker:
        start = time.perf_counter()
        sub = await conn.subscribe(dest, prefetch=1000)
        got = 0
        async for _message in sub:
            got += 1
            if got == count:
                break
        elapsed = time.perf_counter() - start
    handoffs = conn.handoffs
    await conn.close()
    return {"messages": got, "per_s": got / elapsed, "handoffs": handoffs, **ticker.summary()}


# --- resources ---------------------------------------------------------------------------


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def resources(cluster: Cluster, count: int) -> dict[str, Any]:
    gc.collect()
    threads_before, rss_before = threading.active_count(), rss_kib()
    conns = [
        AsyncFailoverConnection(f"failover:({cluster[0].uri()})?{OPTIONS}") for _ in range(count)
    ]
    await asyncio.gather(*(c.connect() for c in conns))
    # Idle: threads that exist only while they have work (dispatch of the Connected events,
    # a reconnect-loop pass) end within moments.
    await asyncio.sleep(2.0)
    gc.collect()
    threads_after, rss_after = threading.active_count(), rss_kib()
    names = dict(
        collections.Counter(
            t.name.split("-")[2]
            if t.name.startswith("failover-client-")
            else t.name.split(" ")[0].rstrip("0123456789-_")
            for t in threading.enumerate()
        )
    )
    await asyncio.gather(*(c.close() for c in conns))
    return {
        "connections": count,
        "threads_per_connection": (threads_after - threads_before) / count,
        "rss_kib_per_connection": (rss_after - rss_before) / count,
        "thread_kinds": names,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with brokers(2, label="aio", full_jit=True, store="/dev/shm") as cluster:
        result: dict[str, Any] = {
            "machine": machine(),
            "command": " ".join(sys.argv),
            "loop_read_bytes": _loopread.LOOP_READ_BYTES,
        }
        # First: resident memory grows by what the connections take, not shrinks by what the
        # phases before freed.
        result["resources"] = await resources(cluster, args.connections)
        result["throughput"] = await throughput(cluster, args.reps, args.awaited, args.piped)
        runs: dict[str, list[dict[str, float]]] = {"aio": [], "sync": []}
        failover_ticks = []
        for rep in range(args.failovers):
            if rep % 2 == 0:
                measured, ticks = await aio_failover(cluster)
                runs["sync"].append(await asyncio.to_thread(sync_failover, cluster))
            else:
                runs["sync"].append(await asyncio.to_thread(sync_failover, cluster))
                measured, ticks = await aio_failover(cluster)
            runs["aio"].append(measured)
            failover_ticks.append(ticks)
            log(f"failover rep {rep + 1}: aio {measured}, sync {runs['sync'][-1]}, ticker {ticks}")
        failover: dict[str, Any] = {"runs": runs, "ticker": failover_ticks}
        for key in ("event_s", "outage_s", "reconnect_s"):
            aio_median = statistics.median(r[key] for r in runs["aio"])
            sync_median = statistics.median(r[key] for r in runs["sync"])
            failover[key] = {
                "aio_median": aio_median,
                "sync_median": sync_median,
                "aio_vs_sync": ratio(aio_median, sync_median),
            }
        result["failover"] = failover
        result["deliveries"] = [await burst(cluster, args.burst) for _ in range(args.bursts)]
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--awaited", type=int, default=2000, help="awaited sends per repetition")
    parser.add_argument("--piped", type=int, default=8000, help="pipelined sends per repetition")
    parser.add_argument("--failovers", type=int, default=4)
    parser.add_argument("--burst", type=int, default=10000)
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="1 repetition, 2 fail-overs")
    parser.add_argument(
        "--loop-read",
        type=int,
        default=_loopread.LOOP_READ_BYTES,
        help="bytes of one read on the event loop at most (to compare step sizes)",
    )
    args = parser.parse_args(argv)
    _loopread.LOOP_READ_BYTES = args.loop_read
    if args.quick:
        args.reps, args.failovers, args.bursts = 1, 2, 1
    METER.install()
    result = asyncio.run(main_async(args))
    tp = result["throughput"]
    med = tp["medians_per_s"]
    table(
        "throughput (messages/s, medians)",
        ["method", "asyncio", "sync", "ratio"],
        [
            [
                "awaited one by one vs send()",
                f"{med['aio send']:,.0f}",
                f"{med['sync send']:,.0f}",
                tp["awaited_vs_sync_send"],
            ],
            [
                "pipelined vs send_async()",
                f"{med['aio pipe']:,.0f}",
                f"{med['sync pipe']:,.0f}",
                tp["pipelined_vs_sync_send_async"],
            ],
        ],
    )
    rows = [[name, *(t[k] for k in COLUMNS)] for name, runs in tp["ticker"].items() for t in runs]
    rows += [
        ["fail-over (SIGKILL)", *(t[k] for k in COLUMNS)] for t in result["failover"]["ticker"]
    ]
    rows += [
        [f"burst of {d['messages']} deliveries", *(d[k] for k in COLUMNS)]
        for d in result["deliveries"]
    ]
    header = ["phase", "ticks", "max", "p99", "median", "longest step CPU", "longest step wall"]
    table("5 ms ticker delay and longest loop step (ms)", header, rows)
    fo = result["failover"]
    for key, what in (
        ("event_s", "kill -> FailedOver"),
        ("outage_s", "producer's longest wait"),
        ("reconnect_s", "loss seen -> reconnected (FailedOver.duration)"),
    ):
        print(
            f"fail-over, {what}: asyncio {fo[key]['aio_median'] * 1000:.0f} ms, "
            f"sync {fo[key]['sync_median'] * 1000:.0f} ms (ratio {fo[key]['aio_vs_sync']})"
        )
    print(f"resources: {result['resources']}")
    path = write_json("aio", result)
    log(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
