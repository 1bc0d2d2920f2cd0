"""Failover onto a shared-storage ActiveMQ slave: our client, the ActiveMQ Java client, the slave.

Run: ``python benchmarks/bench_masterslave.py [--kills 7]``

Two ActiveMQ Classic 5.17 brokers on one KahaDB directory (the harness's
``ClusterSpec(shared_store=True)``, fast-start JVM flags, the slave retrying the lock every
200 ms). Producers send persistent messages, each confirmed before the next, paced 5 ms apart,
all at the same time on the same pair:

* ``ours``: ``FailoverConnection`` over STOMP, ``failover:(stomp://master,stomp://slave)``,
  with ``randomize=false`` and otherwise URI defaults (``initialReconnectDelay`` 10 ms doubling
  to 30 s, shortened at random by up to half), and ``masterslave:(...)`` the same way;
* ``ours tuned``: the same with ``maxReconnectDelay=100``;
* ``java`` / ``java tuned``: the ActiveMQ Java client's ``failover:(tcp://master,tcp://slave)``
  (OpenWire) with the same two option sets (``benchmarks/java/FailoverProducers.java``).

Each round SIGKILLs the master. Measured from just before the signal: the slave's own
start-up (until its STOMP port accepts a TCP connection: the physical limit, since no client
can be served sooner) and each producer's first send confirmed after the master was dead.
The old master is then started again; it waits on the lock as the new slave, and the next
round kills the new master. Medians over the rounds; ratios to the slave's start-up and
ours against Java.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import log, machine, ratio, summary_ms, table, write_json
from benchmarks._rebalance_java import JavaUnavailable, client_classpath, compile_clients, java_tool
from failover_client import FailoverConnection
from failover_client.testing.brokers import Broker, ClusterSpec, SharedStoreCluster, start_cluster

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "FailoverProducers.java"
PACE = 0.005
TUNED = "&initialReconnectDelay=10&maxReconnectDelay=100"
SAFETY = 120.0


class Producer(threading.Thread):
    """Confirmed sends in a loop; remembers its first confirmation after a mark."""

    def __init__(self, name: str, uri: str, destination: str) -> None:
        super().__init__(name=f"bench-{name}", daemon=True)
        self.label = name
        self.conn = FailoverConnection(uri)
        self.destination = destination
        self.cond = threading.Condition()
        self.mark = float("inf")
        self.first: float | None = None
        self.sent = 0
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                self.conn.send(self.destination, f"{self.label}-{self.sent}", timeout=SAFETY)
                done = time.monotonic()
                self.sent += 1
                with self.cond:
                    if done > self.mark and self.first is None:
                        self.first = done
                        self.cond.notify_all()
                self.halt.wait(PACE)  # pacing, as the Java producers pause
        except BaseException as exc:
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def arm(self, mark: float) -> None:
        with self.cond:
            self.first = None
            self.mark = mark

    def wait_first(self) -> float:
        with self.cond:
            self.cond.wait_for(lambda: self.first is not None or self.error is not None, SAFETY)
            if self.error is not None:
                raise RuntimeError(f"{self.label} failed: {self.error!r}")
            assert self.first is not None, f"{self.label}: no send confirmed after the kill"
            return self.first


class JavaProducers:
    """The Java child process holding the Java producers (see FailoverProducers.java)."""

    def __init__(self, classes: Path, log_path: Path) -> None:
        classpath = os.pathsep.join([str(classes), *(str(p) for p in client_classpath())])
        self._log = log_path.open("a")
        self._child = subprocess.Popen(
            [
                java_tool("java"),
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-Djava.net.preferIPv4Stack=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                classpath,
                "FailoverProducers",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="java-producers", daemon=True).start()
        self._expect("startup")

    def _read(self) -> None:
        assert self._child.stdout is not None
        for line in self._child.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _expect(self, what: str) -> list[str]:
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=SAFETY)
            except queue.Empty:
                raise RuntimeError(f"Java producers: no answer to {what}") from None
            if line is None:
                raise RuntimeError(f"Java producers ended during {what}; see {self._log.name}")
            if line.startswith("ok"):
                return lines
            if line.startswith("error"):
                raise RuntimeError(f"Java producers: {what}: {line}")
            lines.append(line)

    def command(self, line: str) -> list[str]:
        assert self._child.stdin is not None
        self._child.stdin.write(line + "\n")
        self._child.stdin.flush()
        return self._expect(line.split(" ", 1)[0])

    def firsts(self) -> dict[str, float]:
        """Each producer's first send confirmed after the mark (monotonic seconds)."""
        found = {}
        for line in self.command("wait"):
            _, name, nanos = line.split(" ")
            found[name] = int(nanos) / 1e9
        return found

    def close(self) -> None:
        try:
            self.command("quit")
        finally:
            self._child.wait(30)
            self._log.close()


def _accepts_at(host: str, port: int, box: list[float], stop: threading.Event) -> None:
    """Record when ``port`` first accepts a TCP connection (a 1 ms poll: the port offers
    nothing to wait on; ``stop`` ends it)."""
    while not stop.is_set():
        try:
            with socket.create_connection((host, port), timeout=0.05):
                box.append(time.monotonic())
                return
        except OSError:
            stop.wait(0.001)


def _pair_uri(form: str, master: Broker, slave: Broker, endpoint: str, extra: str) -> str:
    return f"{form}:({master.uri(endpoint)},{slave.uri(endpoint)})?randomize=false{extra}"


def run(kills: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="fc-bench-ms-"))
    cluster = start_cluster(
        ClusterSpec("activemq", 2, shared_store=True, label="ms"), root, "local"
    )
    assert isinstance(cluster, SharedStoreCluster)
    java: JavaProducers | None = None
    producers: list[Producer] = []
    samples: dict[str, list[float]] = {}
    try:
        master = cluster.master()
        slave = next(b for b in cluster if b is not master)
        tag = uuid.uuid4().hex[:6]
        ours = {
            "ours failover:": _pair_uri("failover", master, slave, "stomp", ""),
            "ours masterslave:": _pair_uri("masterslave", master, slave, "stomp", ""),
            "ours tuned": _pair_uri("failover", master, slave, "stomp", TUNED),
        }
        producers = [
            Producer(n, u, f"/queue/ms-{tag}-{i}") for i, (n, u) in enumerate(ours.items())
        ]
        for producer in producers:
            producer.conn.connect()
            producer.start()
        try:
            classes = compile_clients(root / "java", JAVA_SOURCE)
            java = JavaProducers(classes, root / "java.log")
            for name, extra in (("java", ""), ("java-tuned", TUNED)):
                uri = _pair_uri("failover", master, slave, "tcp", extra)
                java.command(f"open {name} {uri} ms-{tag}-{name}")
        except JavaUnavailable as exc:
            log(f"no Java client: {exc}")
        for round_no in range(1, kills + 1):
            time.sleep(1.0)  # steady sending before the kill
            master = cluster.master()
            slave = next(b for b in cluster if b is not master)
            stomp = slave.endpoint("stomp")
            accepted: list[float] = []
            stop = threading.Event()
            prober = threading.Thread(
                target=_accepts_at, args=(stomp.host, stomp.port, accepted, stop), daemon=True
            )
            killed_at = time.monotonic()
            prober.start()
            master.kill()  # returns once its ports refuse: the process is gone
            dead_at = time.monotonic()
            for producer in producers:
                producer.arm(dead_at)
            if java is not None:
                java.command(f"mark {int(dead_at * 1e9)}")
            figures = {p.label: p.wait_first() - killed_at for p in producers}
            if java is not None:
                label = {"java": "java failover:", "java-tuned": "java tuned"}
                figures |= {label[n]: t - killed_at for n, t in java.firsts().items()}
            prober.join(SAFETY)
            stop.set()
            assert accepted, "the slave never opened its STOMP port"
            figures["slave start-up"] = accepted[0] - killed_at
            for name, value in figures.items():
                samples.setdefault(name, []).append(value)
            log(
                f"round {round_no}: "
                + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in figures.items())
            )
            cluster.start_slave(master)  # the old master waits on the lock as the new slave
    finally:
        for producer in producers:
            producer.halt.set()
        for producer in producers:
            producer.join(SAFETY)
            producer.conn.close()
        if java is not None:
            java.close()
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=7)
    args = parser.parse_args()
    samples = run(args.kills)
    limit = statistics.median(samples["slave start-up"])
    java = {"ours failover:": "java failover:", "ours masterslave:": "java failover:"}
    java["ours tuned"] = "java tuned"
    rows = []
    slave = samples["slave start-up"]
    for name, values in samples.items():
        median = statistics.median(values)
        against = java.get(name)
        versus = ratio(median, statistics.median(samples[against])) if against in samples else ""
        # The slave's start-up varies from kill to kill with the machine's load: the time a
        # client needs beyond it is read per kill, then its median taken.
        beyond = statistics.median(v - s for v, s in zip(values, slave, strict=True))
        rows.append(
            [
                name,
                round(median * 1000, 1),
                round(max(values) * 1000, 1),
                round(beyond * 1000, 1),
                ratio(median, limit),
                versus,
            ]
        )
    table(
        f"SIGKILL of the master to the first confirmed send ({args.kills} kills, median)",
        [
            "client",
            "median ms",
            "max ms",
            "after the slave's port accepted (median ms)",
            "/ slave start-up",
            "/ Java (same options)",
        ],
        rows,
    )
    path = write_json(
        "masterslave",
        {
            "kills": args.kills,
            "series": {name: summary_ms(values) for name, values in samples.items()},
            "samples_ms": {n: [round(v * 1000, 1) for v in vs] for n, vs in samples.items()},
            "machine": machine(),
        },
    )
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
