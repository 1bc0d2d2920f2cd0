"""Rebalancing on a real ActiveMQ network of brokers: our clients and the ActiveMQ Java client.

Run: ``python benchmarks/bench_rebalance.py [--clients 60] [--runs 3] [--source advisory|openwire]
[--quick]``

Four ActiveMQ Classic 5.17 brokers (harness, loopback) in a full-mesh network with
``updateClusterClients`` / ``rebalanceClusterClients`` / ``updateClusterClientsOnRemove``,
advertising their OpenWire ``tcp://`` addresses (a broker advertises one URI: the Java clients
need OpenWire ones; our sources map them to the same broker's STOMP port). One cluster serves
both kinds of client at once: ours speak STOMP, the Java clients OpenWire, every step hits both.

Per run, with client ids ``run<r>-client-<n>`` (ours) and ``run<r>-java-client-<n>`` (Java:
ActiveMQ refuses a client id twice on one broker), so each run is another fleet:

* **ours**: ``FailoverConnection`` s with ``rebalance=true`` (rendezvous hash of the client id,
  moves spread over ``rebalanceDrainWindow`` = 2 s), each with its own topology source:
  ``advisory`` (network-bridge advisories over STOMP) or ``openwire`` (the brokers' own
  ``ConnectionControl`` push on an OpenWire control connection).
* **Java**: ``java/RebalanceClients.java``, compiled now against the Debian package's client
  jars, one ``ActiveMQConnection`` per client on ``failover:(...)`` with the transport's
  defaults, following the brokers' push (``updateURIsSupported``, ``rebalanceUpdateURIs``).

Steps (``_rebalance_scenarios``): (a) a 4th broker joins 3; (b) one broker stopped gracefully,
then restarted; (c) another SIGKILLed, then restarted; (d) new fleets with 2 "local" priority
brokers and 2 "remote" ones (ours ``priorityBackup=true&priorityURIs=<locals>&rebalance=true``,
Java ``priorityBackup=true&priorityURIs=<locals>``): both locals killed, then back one by one.
Meanwhile one producer of ours (confirmed persistent sends, stable ids) and one consumer run
through everything (``_rebalance_loss``); lost = confirmed but never received nor left on a
broker. Writes ``results/rebalance.json``.

With independent placement by hashing, N clients over 4 brokers spread like N independent
draws (the new broker's count at 60 clients has a standard deviation of about 3.4): the table
gives medians and ranges over runs, per run in the JSON.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import brokers, log, machine, write_json
from benchmarks._rebalance_fleet import (
    SOURCES,
    BrokerIndex,
    Fleet,
    OurFleet,
    openwire_available,
    source_factory,
)
from benchmarks._rebalance_java import JavaFleet, JavaUnavailable, compile_clients
from benchmarks._rebalance_loss import LossCheck
from benchmarks._rebalance_report import render
from benchmarks._rebalance_scenarios import LOCALS, Stage
from failover_client.testing.brokers import Cluster

DRAIN_WINDOW_MS = 2000
OUR_OPTIONS = (
    f"rebalance=true&rebalanceDrainWindow={DRAIN_WINDOW_MS}&initialReconnectDelay=10&heartbeat=1000"
)
QUIET = DRAIN_WINDOW_MS / 1000 + 1.0  # still for longer than a drain window: settled
LIMIT = 30.0
# A returning broker may still be in a client's quarantine, which grows with every failed
# connect up to maxReconnectDelay (30 s, both clients' default): wait that long for returns.
RETURN_LIMIT = 40.0


def _members(cluster: Cluster, endpoint: str, indexes: range | tuple[int, ...]) -> str:
    return ",".join(cluster[i].uri(endpoint) for i in indexes)


def _without_movers(result: Any) -> Any:
    """The result without the per-client lists (kept out of the JSON)."""
    if isinstance(result, dict):
        return {k: _without_movers(v) for k, v in result.items() if k != "movers"}
    if isinstance(result, list):
        return [_without_movers(v) for v in result]
    return result


class _Count(logging.Handler):
    """Counts the records it sees (warnings of our clients: broker losses are expected)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _log_to(path: Path) -> _Count:
    """Our clients' warnings (one per lost session: hundreds) to a file and a count; errors
    still to stderr."""
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    to_file = logging.FileHandler(path)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    errors = logging.StreamHandler()
    errors.setLevel(logging.ERROR)
    counter = _Count()
    for handler in (to_file, errors, counter):
        root.addHandler(handler)
    return counter


class Run:
    """One run: fleets of both kinds through steps (a)-(d) with the loss check around them."""

    def __init__(
        self, cluster: Cluster, classes: Path, workdir: Path, args: argparse.Namespace, run: int
    ) -> None:
        self.cluster = cluster
        self.classes = classes
        self.workdir = workdir
        self.args = args
        self.run = run
        self.index = BrokerIndex(cluster)
        self.new_source = source_factory(args.source, cluster)
        self.ours_ids = [f"run{run}-client-{n}" for n in range(args.clients)]
        self.java_ids = [f"run{run}-java-client-{n}" for n in range(args.clients)]

    def _fleets(self, ours_uri: str, java_uri: str) -> list[Fleet]:
        ours = OurFleet(ours_uri, self.ours_ids, self.new_source, self.index)
        java = JavaFleet(self.classes, self.index, self.workdir / "java-clients.log")
        fleets: list[Fleet] = [ours, java]
        try:
            ours.open()
            java.open(java_uri, self.java_ids)
        except BaseException:
            for fleet in fleets:
                fleet.close()
            raise
        return fleets

    def _stage(self, fleets: list[Fleet]) -> Stage:
        stage = Stage(self.cluster, fleets, quiet=QUIET, limit=LIMIT, return_limit=RETURN_LIMIT)
        took = stage.settle(time.monotonic())
        log(f"fleets of {self.args.clients} connected and settled after {took:.1f} s")
        return stage

    def join_stop_kill(self) -> dict[str, Any]:
        cluster = self.cluster
        ours_uri = f"failover:({_members(cluster, 'stomp', range(3))})?{OUR_OPTIONS}"
        java_uri = f"failover:({_members(cluster, 'tcp', range(3))})"
        fleets = self._fleets(ours_uri, java_uri)
        try:
            stage = self._stage(fleets)
            stop_victim, kill_victim = (self.run + 1) % 4, (self.run + 2) % 4
            names = [f.name for f in fleets]
            return {
                "join": dict(zip(names, stage.join(3), strict=True)),
                "stop": {"broker": stop_victim}
                | dict(zip(names, stage.lose(stop_victim, "stop"), strict=True)),
                "kill": {"broker": kill_victim}
                | dict(zip(names, stage.lose(kill_victim, "kill"), strict=True)),
            }
        finally:
            for fleet in fleets:
                fleet.close()

    def tiers(self) -> dict[str, Any]:
        cluster = self.cluster
        locals_stomp = _members(cluster, "stomp", LOCALS)
        locals_tcp = _members(cluster, "tcp", LOCALS)
        ours_uri = (
            f"failover:({_members(cluster, 'stomp', range(4))})?{OUR_OPTIONS}"
            f"&priorityBackup=true&priorityURIs={locals_stomp}"
        )
        java_uri = (
            f"failover:({_members(cluster, 'tcp', range(4))})"
            f"?priorityBackup=true&priorityURIs={locals_tcp}"
        )
        fleets = self._fleets(ours_uri, java_uri)
        try:
            stage = self._stage(fleets)
            results = stage.tiers()
            return {"tiers": dict(zip([f.name for f in fleets], results, strict=True))}
        finally:
            for fleet in fleets:
                fleet.close()

    def __call__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(figures of steps (a)-(d), the loss check's counts)."""
        log(f"run {self.run + 1}: broker 3 stopped, {self.args.clients} clients of each kind")
        self.cluster[3].stop()
        time.sleep(2.0)  # the other brokers drop their bridges to it and tell their clients
        loss_uri = f"failover:({_members(self.cluster, 'stomp', range(3))})?{OUR_OPTIONS}"
        loss = LossCheck(loss_uri, self.run, self.args.rate, self.new_source)
        try:
            loss.start()
            figures = {"run": self.run, **self.join_stop_kill()}
            figures.update(self.tiers())
        except BaseException:
            loss.close()
            self.cluster.heal()
            raise
        counts = loss.finish(self.cluster)
        log(f"run {self.run + 1}: {counts['confirmed']} confirmed, {counts['lost']} lost")
        return figures, counts


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=60, help="clients of each kind")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0, help="producer messages per second")
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="openwire" if openwire_available() else "advisory",
        help="our clients' topology source (default: openwire where it exists)",
    )
    parser.add_argument("--quick", action="store_true", help="1 run of 20 clients of each kind")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.runs = 20, 1
    started = time.time()
    runs: list[dict[str, Any]] = []
    losses: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="fc-rebalance-") as tmp:
        workdir = Path(tmp)
        warnings = _log_to(workdir / "clients.log")
        try:
            classes = compile_clients(workdir)
        except JavaUnavailable as exc:
            sys.exit(f"bench_rebalance: cannot run the Java clients: {exc}")
        with brokers(
            4, network=True, advertise="tcp", kind="activemq", full_jit=False, label="rebalance"
        ) as cluster:
            for run in range(args.runs):
                figures, counts = Run(cluster, classes, workdir, args, run)()
                runs.append(_without_movers(figures))
                losses.append(counts)
    text = render(runs, args.clients, args.source, losses)
    result = {
        "benchmark": "rebalance",
        "machine": machine(),
        "args": vars(args),
        "our_options": OUR_OPTIONS,
        "runs": runs,
        "loss": losses,
        "lost": sum(x["lost"] for x in losses),
        "client_log_warnings": warnings.count,
        "notes": [
            "Both kinds of client run at once on the same brokers: every step hits both.",
            "Java clients use the failover: transport's defaults (randomize, updateURIsSupported,"
            " rebalanceUpdateURIs, maxReconnectDelay 30 s); brokers push rebalanceClusterClients.",
            "Times are from the step's start (broker launch, stop or kill) to a client's arrival"
            " on its last broker; a broker needs about 1 s to start (broker_ready_s).",
            "Ours wait a random part of the 2 s drain window before moving, by design.",
        ],
        "table": text,
        "seconds": round(time.time() - started, 1),
    }
    write_json("rebalance", result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["lost"] == 0 else 1)
