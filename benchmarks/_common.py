"""Shared pieces of the real-broker benchmarks: brokers, statistics, tables, machine facts.

Every benchmark starts its brokers through the broker harness
(``failover_client.testing.brokers``), on loopback ports, and stops every one of them at the end
(``brokers()`` is a context manager; the harness also kills leftovers at interpreter exit).
Figures are ratios against raw stomp.py measured in the same run, with the absolute numbers
beside them.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from failover_client.testing.brokers import (
    FAST_JVM_OPTIONS,
    Broker,
    Cluster,
    ClusterSpec,
    start_cluster,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# Benchmarks run the broker with the JIT's full tier (no TieredStopAtLevel=1) and a bigger
# heap than the functional tests: the first run on a C1-only, cold broker was half as fast.
BENCH_JVM_OPTIONS = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-XX:-UsePerfData",
    "-XX:+UseTransparentHugePages",  # see FAST_JVM_OPTIONS in failover_client.testing.brokers
    "-Djava.net.preferIPv4Stack=true",
)


@contextlib.contextmanager
def brokers(
    size: int,
    *,
    network: bool = False,
    advertise: str = "stomp",
    label: str = "bench",
    kind: str = "activemq",
    full_jit: bool = True,
    store: str | None = None,
    extra_jvm_options: Sequence[str] = (),
) -> Iterator[Cluster]:
    """Start ``size`` brokers; stop all of them on exit.

    ``full_jit`` runs ActiveMQ with ``BENCH_JVM_OPTIONS`` (for throughput); otherwise with the
    harness's fast-start flags (small heap, C1 only), which the failover figures of BROKERS.md
    were measured with and which restart a killed broker fastest. ``store`` is the parent
    directory of the brokers' directories (message stores included); default the system's
    temporary directory (a disk here); ``/dev/shm`` puts the stores in memory.
    ``extra_jvm_options`` are appended to ActiveMQ's flags (experiments with the JVM).
    ``advertise`` (with ``network``) is the connector whose address peers advertise:
    ``"tcp"`` (OpenWire) when Java clients must follow the brokers' push.
    """
    root = Path(tempfile.mkdtemp(prefix=f"fc-{label}-", dir=store))
    spec = ClusterSpec(
        kind,
        size,
        network=network,
        advertise=advertise,
        label=label,
        jvm_options=_jvm_options(kind, full_jit, extra_jvm_options),
    )
    cluster = start_cluster(spec, root, "local")
    try:
        yield cluster
    finally:
        try:
            cluster.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _jvm_options(kind: str, full_jit: bool, extra: Sequence[str]) -> tuple[str, ...]:
    """The ActiveMQ JVM flags for ``brokers()``; () means the harness's own defaults."""
    if kind != "activemq":
        return ()
    if full_jit:
        return (*BENCH_JVM_OPTIONS, *extra)
    return (*FAST_JVM_OPTIONS, *extra) if extra else ()


def broker_by_port(cluster: Cluster, port: int) -> int:
    """Index of the broker whose STOMP endpoint listens on ``port``."""
    for i, broker in enumerate(cluster):
        if broker.endpoint("stomp").port == port:
            return i
    raise KeyError(f"no broker of the cluster listens on STOMP port {port}")


def port_of(uri: str | None) -> int:
    """The port of ``stomp://host:port`` (as FailoverConnection.broker prints it)."""
    if uri is None:
        raise ValueError("not connected to any broker")
    return int(uri.rsplit(":", 1)[1].split("?", 1)[0].rstrip("/"))


def hosts(cluster: Cluster) -> list[tuple[str, int]]:
    """(host, port) of every broker's STOMP endpoint, in broker order."""
    return [(b.endpoint("stomp").host, b.endpoint("stomp").port) for b in cluster]


def precreate(cluster: Cluster, destination: str, count: int = 1) -> None:
    """Make ``destination`` exist on every broker: send ``count`` messages, drain them."""
    for broker in cluster:
        if broker.running() and not broker.hung:
            broker.send(destination, [b"precreate"] * count)
            broker.drain(destination, timeout=10.0, idle=0.3, expect=count)


def warm(broker: Broker, destination: str, count: int = 2000) -> None:
    """Exercise a (re)started broker's send path so its JIT is not cold, then empty the queue."""
    broker.send(destination, [b"w" * 64] * count)
    broker.drain(destination, timeout=30.0, idle=0.3, expect=count)


def drain_ids(
    cluster: Cluster, destination: str, header: str = "bench-id", idle: float = 1.0
) -> list[str]:
    """Every ``header`` value left in ``destination`` on every broker (duplicates kept)."""
    found: list[str] = []
    for broker in cluster:
        if not broker.running() or broker.hung:
            continue
        for message in broker.drain(destination, timeout=120.0, idle=idle):
            value = message.headers.get(header)
            if value is not None:
                found.append(value)
    return found


_PROBE_PROGRAM = """
import socket, sys, time
sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5.0)
sock.settimeout(None)
print("ready", flush=True)
try:
    while sock.recv(4096):
        pass
except OSError:
    pass
print(time.monotonic(), flush=True)
time.sleep(60)  # exit only when told: a process exiting now would take CPU from the failover
"""


class EofProbe:
    """A bare TCP connection, in a child process, that reports when it reads EOF or a reset.

    Opened just before a kill, it measures how long the operating system takes to tell *any*
    client that the broker is gone (the JVM's teardown), which no client can beat. A child
    process, not a thread: a thread of ours woken by the same kill would compete for the GIL
    with the client being timed (an exiting child cost 2-3 ms, so it waits to be killed).
    ``time.monotonic`` is CLOCK_MONOTONIC on Linux: one clock for every process.
    """

    def __init__(self, host: str, port: int) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-S", "-c", _PROBE_PROGRAM, host, str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.child.stdout is not None
        if self.child.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"the EOF probe could not connect to {host}:{port}")
        time.sleep(0.005)  # let it reach recv() before anything is killed

    def wait(self, timeout: float) -> float | None:
        """When the child saw the end (monotonic), or None."""
        assert self.child.stdout is not None
        ready, _, _ = select.select([self.child.stdout], [], [], timeout)
        if not ready:
            return None
        text = self.child.stdout.readline().strip()
        return float(text) if text else None

    def close(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
        self.child.communicate()


# -- statistics ----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary_ms(samples_s: Sequence[float]) -> dict[str, float | int]:
    """median / p95 / min / max in milliseconds of samples in seconds."""
    ms = [s * 1000.0 for s in samples_s]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p95_ms": round(percentile(ms, 0.95), 2),
        "min_ms": round(min(ms), 2),
        "max_ms": round(max(ms), 2),
    }


def ratio(a: float, b: float) -> float:
    """a / b rounded, NaN when b is 0."""
    return round(a / b, 3) if b else float("nan")


# -- output ----------------------------------------------------------------------------------


def table(title: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A plain-text table (also valid markdown) printed and returned."""
    cells = [[str(c) for c in header]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [f"\n### {title}", ""]
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_json(name: str, result: dict[str, Any]) -> Path:
    """Write ``result`` to ``benchmarks/results/<name>.json``."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


# -- machine ---------------------------------------------------------------------------------


def _first_line(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc.__class__.__name__})"
    out = (done.stdout or done.stderr).strip().splitlines()
    return out[0] if out else "unknown"


def machine() -> dict[str, Any]:
    """Cores, RAM, OS, Python, Java, stomp.py and broker versions."""
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    versions: dict[str, str] = {}
    for dist in ("stomp.py", "python-qpid-proton", "failover-client"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    activemq = _first_line(["dpkg-query", "-W", "-f=${Version}", "activemq"])
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "other_brokers_running": _foreign_brokers(),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _first_line(["java", "-version"]),
        "activemq": activemq,
        "rabbitmq": _first_line(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"]),
        "libraries": versions,
        "broker_jvm_options": list(BENCH_JVM_OPTIONS),
    }


def _foreign_brokers() -> int:
    """Broker JVMs / Erlang VMs on the machine not started by this process (they share CPU)."""
    count = 0
    mine = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if b"activemq" not in cmd and b"beam.smp" not in cmd:
            continue
        ppid = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("PPid:")), "")
        if ppid != mine:
            count += 1
    return count


# -- leaks -----------------------------------------------------------------------------------


def open_fds() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def thread_names() -> list[str]:
    return sorted(t.name for t in threading.enumerate())
