"""Topology sources on a real ActiveMQ network: how fast a bridge change reaches the pool, and
what a watching connection costs.

Run: ``python benchmarks/bench_topology.py [--rounds 5] [--idle 20] [--sources advisory,openwire]``

Three ActiveMQ Classic brokers in a full-mesh network of brokers (``updateClusterClients``,
``rebalanceClusterClients``, ``updateClusterClientsOnRemove``, peers advertised as OpenWire
``tcp://`` URLs). One STOMP ``FailoverConnection`` per source, each with only broker 0 as seed,
learns the other two from:

* ``advisory``: network-bridge advisories over STOMP (:class:`AdvisorySource`);
* ``openwire``: ActiveMQ's own cluster push, ``ConnectionControl`` on an OpenWire control
  connection beside the data connection (:class:`OpenWireSource`).

**Latency** (target: <= 1 s): broker 2 is stopped (or SIGKILLed) and started again, ``--rounds``
times each. Measured from the line in broker 0's log that says its bridge to broker 2 stopped
(or was established) to the ``TopologyChanged`` event that removes (adds) broker 2 on the client:
both clocks are this machine's wall clock; the log has millisecond resolution.

**Cost**: ``--watchers`` more connections with a source of each kind, and as many without one,
idle for ``--idle`` seconds: the resident memory a source adds to this process, and the CPU time
per connection meanwhile (with heart-beats every 10 s), against the same idle time without them.
A negative latency means the push reached the client before the broker wrote its log line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import log, machine, percentile, table, write_json
from failover_client import BrokerAddress, Event, FailoverConnection, TopologyChanged
from failover_client.testing.brokers import Broker, Cluster, ClusterSpec, start_cluster
from failover_client.topology import AdvisorySource

SAFETY = 60.0
_STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d),(\d{3}) ")


class Changes:
    """Every TopologyChanged of one connection, with the wall-clock time it arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seen: list[tuple[float, TopologyChanged]] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, TopologyChanged):
            with self.cond:
                self.seen.append((time.time(), event))
                self.cond.notify_all()

    def wait(self, since: int, match: Callable[[TopologyChanged], bool]) -> float:
        """The time of the first matching change after index ``since``."""
        with self.cond:
            found: list[float] = []

            def ready() -> bool:
                found[:] = [t for t, e in self.seen[since:] if match(e)]
                return bool(found)

            if not self.cond.wait_for(ready, SAFETY):
                raise TimeoutError("no matching TopologyChanged")
            return found[0]


def stomp_address(broker: Broker) -> BrokerAddress:
    endpoint = broker.endpoint("stomp")
    return BrokerAddress("stomp", endpoint.host, endpoint.port)


def scheme_map(cluster: Cluster) -> Callable[[str, str, int], BrokerAddress | None]:
    """Advertised OpenWire URL -> that broker's STOMP address (the harness's ports differ)."""
    by_port = {b.endpoint("tcp").port: stomp_address(b) for b in cluster}
    return lambda _scheme, _host, port: by_port.get(port)


def make_source(kind: str, cluster: Cluster) -> Any:
    mapping = scheme_map(cluster)
    if kind == "advisory":
        return AdvisorySource([stomp_address(cluster[0])], scheme_map=mapping, settle=0.5)
    from failover_client.topology import OpenWireSource  # noqa: PLC0415 - optional at first

    ports = {stomp_address(b).key: b.endpoint("tcp").port for b in cluster}
    return OpenWireSource(openwire_port=ports, scheme_map=mapping)


def log_time(broker: Broker, pattern: str, after: float) -> float:
    """Wall-clock time of the first line of ``broker``'s log matching ``pattern`` at or after
    ``after`` (the log writes the time of day only: the date is today's, local time)."""
    deadline = time.monotonic() + SAFETY
    wanted = re.compile(pattern)
    day = dt.datetime.fromtimestamp(after).date()
    while time.monotonic() < deadline:
        for line in broker.log_path.read_text(errors="replace").splitlines():
            stamp = _STAMP.match(line)
            if stamp is None or not wanted.search(line):
                continue
            h, m, s, ms = (int(g) for g in stamp.groups())
            when = dt.datetime.combine(day, dt.time(h, m, s, ms * 1000)).timestamp()
            if when >= after - 0.001:
                return when
        time.sleep(0.05)
    raise TimeoutError(f"no log line {pattern!r} in {broker.name}")


def rounds(
    cluster: Cluster, watchers: dict[str, tuple[FailoverConnection, Changes]], count: int
) -> dict[str, dict[str, list[float]]]:
    first, victim = cluster[0], cluster[2]
    name = victim.name
    target = str(stomp_address(victim))
    lat: dict[str, dict[str, list[float]]] = {
        k: {"down": [], "up": [], "kill": []} for k in watchers
    }
    for n in range(count):
        for how in ("down", "kill"):
            marks = {k: len(ch.seen) for k, (_, ch) in watchers.items()}
            started = time.time()
            if how == "down":
                victim.stop()
            else:
                victim.kill()
            logged = log_time(first, rf"bridge to {re.escape(name)} stopped", started)
            for kind, (_, changes) in watchers.items():
                at = changes.wait(marks[kind], lambda e: target in e.removed)
                lat[kind][how].append(at - logged)
            marks = {k: len(ch.seen) for k, (_, ch) in watchers.items()}
            started = time.time()
            victim.start()
            logged = log_time(first, rf"\({re.escape(name)}\) has been established", started)
            for kind, (_, changes) in watchers.items():
                at = changes.wait(marks[kind], lambda e: target in e.added)
                lat[kind]["up"].append(at - logged)
        log(f"round {n + 1}/{count}: " + ", ".join(f"{k} {v}" for k, v in _last(lat).items()))
    return lat


def _last(lat: dict[str, dict[str, list[float]]]) -> dict[str, str]:
    return {
        k: " ".join(f"{how}={v[-1] * 1000:.0f}ms" for how, v in d.items() if v)
        for k, d in lat.items()
    }


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def idle_cost(kind: str, cluster: Cluster, watchers: int, idle: float) -> dict[str, float]:
    """RSS added by ``watchers`` idle watching connections, and the CPU they burn idling."""
    cpu0 = time.process_time()
    time.sleep(idle)
    baseline_cpu = time.process_time() - cpu0
    rss0 = rss_bytes()
    conns = []
    for _ in range(watchers):
        conn = FailoverConnection(
            f"failover:({cluster[0].uri('stomp')})?heartbeat=10000",
            topology=[] if kind == "none" else [make_source(kind, cluster)],
        )
        conn.connect()
        conns.append(conn)
    try:
        time.sleep(3.0)  # the sources connected and heard the network
        rss1 = rss_bytes()
        cpu1 = time.process_time()
        time.sleep(idle)
        cpu = time.process_time() - cpu1
    finally:
        for conn in conns:
            conn.close()
    return {
        "watchers": watchers,
        "rss_per_watcher_kib": (rss1 - rss0) / watchers / 1024,
        "idle_cpu_ms_per_watcher_per_min": max(0.0, cpu - baseline_cpu) / watchers / idle * 60e3,
        "baseline_cpu_ms_per_min": baseline_cpu / idle * 60e3,
    }


def summarize(values: Iterable[float]) -> str:
    ms = [v * 1000 for v in values]
    if not ms:
        return "-"
    return f"{statistics.median(ms):.0f} / {percentile(ms, 0.95):.0f} / {max(ms):.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle", type=float, default=20.0)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--sources", default="advisory,openwire")
    args = parser.parse_args()
    kinds = [k for k in args.sources.split(",") if k]
    root = Path(tempfile.mkdtemp(prefix="fc-topology-"))
    spec = ClusterSpec("activemq", 3, network=True, advertise="tcp", label="topology")
    cluster = start_cluster(spec, root, "local")
    try:
        watchers: dict[str, tuple[FailoverConnection, Changes]] = {}
        everyone = {str(stomp_address(b)) for b in cluster}
        for kind in kinds:
            changes = Changes()
            conn = FailoverConnection(
                f"failover:({cluster[0].uri('stomp')})?heartbeat=2000",
                listeners=[changes],
                topology=[make_source(kind, cluster)],
            )
            conn.connect()
            watchers[kind] = (conn, changes)
            deadline = time.monotonic() + SAFETY
            while {str(s.address) for s in conn.pool.states()} != everyone:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{kind}: the network never arrived")
                time.sleep(0.05)
        lat = rounds(cluster, watchers, args.rounds)
        for conn, _ in watchers.values():
            conn.close()
        # "none": the same connections without a source, so the source's own cost shows.
        costs = {k: idle_cost(k, cluster, args.watchers, args.idle) for k in ["none", *kinds]}
    finally:
        cluster.close()
    rows = [
        [
            kind,
            summarize(lat[kind]["down"]),
            summarize(lat[kind]["kill"]),
            summarize(lat[kind]["up"]),
            f"{costs[kind]['rss_per_watcher_kib'] - costs['none']['rss_per_watcher_kib']:.0f}",
            f"{costs[kind]['idle_cpu_ms_per_watcher_per_min']:.1f}"
            f" ({costs['none']['idle_cpu_ms_per_watcher_per_min']:.1f} without)",
        ]
        for kind in kinds
    ]
    text = table(
        f"Pool update latency from broker 0's log line to the client's TopologyChanged "
        f"(median / p95 / max ms, {args.rounds} rounds each), and the cost of one idle watcher "
        f"({args.watchers} watchers, {args.idle:g} s idle)",
        [
            "source",
            "bridge stopped",
            "peer SIGKILLed",
            "bridge established",
            "RSS of one source (KiB)",
            "idle CPU per connection (ms/min)",
        ],
        rows,
    )
    write_json(
        "topology",
        {"machine": machine(), "latency_s": lat, "cost": costs, "table": text},
    )


if __name__ == "__main__":
    main()
