"""The demo run: brokers up, clients on, the scenario played, the results checked and drawn."""

from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from failover_client import Clock, FailoverConnection, SystemClock
from failover_client.cli._output import render_tables
from failover_client.testing.brokers import Broker, Cluster, ReceivedMessage
from failover_client.uri import parse

from ._clients import ClientEvents, Labeller, Producer, consumer_handler
from ._harness import (
    PROTOCOLS,
    BrokersUnavailable,
    broker_ports,
    client_destination,
    describe_brokers,
    start_brokers,
)
from ._live import BrokerRow, ClientRow, View, ViewState, make_view
from ._record import Recorder
from ._scenario import Scenario, Step, label
from ._summary import Summary, summarize, summary_tables
from ._timeline import build_timeline, plot_timeline

__all__ = ["DemoConfig", "run_demo"]

# Fast detection for a demo on loopback: 1 s heart-beats find a hung broker in about 2-3 s,
# a 1 s handshake deadline keeps a hung broker from holding up a reconnect, and the back-off
# stops at 1 s so a returning broker is noticed quickly.
_OPTIONS = "randomize=false&maxReconnectDelay=1000&connectTimeout=1000"
CLIENT_OPTIONS = f"{_OPTIONS}&heartbeat=1000"

AMQP_CLIENT_OPTIONS = f"{_OPTIONS}&heartbeat=2000"
"""Over AMQP the heart-beat is the idle timeout the client announces, and RabbitMQ's AMQP 1.0
plugin does not keep an idle connection busy often enough for 1 s: an idle consumer was
declared hung every 2 s. With 2 s none was, and a hung node is still found within 4 s."""

SETTLE_QUIET = 1.5
"""Seconds without a delivery after which the consumer counts as caught up. Messages a network
bridge left on a broker the consumer is not on never arrive by themselves; the drain finds
them."""

EXIT_OK, EXIT_LOST, EXIT_SETUP, EXIT_INTERRUPTED = 0, 1, 3, 130


@dataclass(frozen=True)
class DemoConfig:
    """What to run and where the results go."""

    scenario: Scenario
    out: Path = Path("demo-timeline.png")
    rate: float = 100.0
    backend: str | None = None
    styled: bool | None = None
    destination: str = "/queue/failover-demo"
    workdir: Path | None = None
    """Where the brokers keep their data (default: a temporary directory removed at the end)."""
    protocol: str = "stomp"
    """What the clients speak: ``stomp`` (ActiveMQ brokers) or ``amqp`` (RabbitMQ nodes)."""

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be > 0 messages per second, got {self.rate}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r}: choose one of {', '.join(PROTOCOLS)}")
        if not self.destination.startswith("/queue/"):
            raise ValueError(f"destination {self.destination!r}: use a /queue/<name>")


@dataclass
class _Brokers:
    """The cluster and what the scenario did to it (for resolving ``hung`` / ``dead``)."""

    cluster: Cluster
    labels: list[str]
    known: int
    hung: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)

    def broker(self, name: str) -> Broker:
        return self.cluster[self.labels.index(name)]

    def status(self, name: str) -> str:
        if self.labels.index(name) >= self.known and name in self.dead:
            return "not started"
        if name in self.hung:
            return "hung"
        return "dead" if name in self.dead else "up"


class _Demo:
    def __init__(self, config: DemoConfig, stream: TextIO, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.view: View = make_view(stream, styled=config.styled)
        self.recorder = Recorder(clock)
        self.stop = threading.Event()
        self.brokers: _Brokers | None = None
        self.connections: dict[str, FailoverConnection] = {}
        self.producer: Producer | None = None
        self.phase = "starting"
        self._ticker: threading.Thread | None = None
        self._rates: dict[str, tuple[float, int, float]] = {}

    # --- set-up ------------------------------------------------------------------------------

    def start_brokers(self, root: Path) -> _Brokers:
        config = self.config
        scenario = config.scenario
        size = scenario.total_brokers
        self.view.info(f"starting {describe_brokers(config.protocol, size)} ...")
        queue = config.destination.removeprefix("/queue/")
        cluster = start_brokers(config.protocol, size, root, config.backend, queue)
        labels = [label(i) for i in range(size)]
        brokers = _Brokers(cluster, labels, scenario.brokers)
        self.brokers = brokers
        # The harness starts a whole cluster; brokers that join later go down until their turn.
        for name in labels[scenario.brokers :]:
            brokers.broker(name).kill()
            brokers.dead.append(name)
        for name in labels:
            b = brokers.broker(name)
            pid = b.pid if b.running() else None
            where = f"pid {pid}" if pid else "joins later"
            self.view.info(f"broker {name}: {b.uri(config.protocol)} ({where})")
        if config.protocol == "amqp":
            self.view.info(
                "the nodes are independent: a message stays on the node it was sent to until "
                "the consumer (or the final drain) takes it there"
            )
        return brokers

    def uri(self, order: list[str], extra: str = "") -> str:
        assert self.brokers is not None
        protocol = self.config.protocol
        members = ",".join(self.brokers.broker(n).uri(protocol) for n in order)
        options = AMQP_CLIENT_OPTIONS if protocol == "amqp" else CLIENT_OPTIONS
        return f"failover:({members})?{options}{extra}"

    def open_clients(self, labeller: Labeller) -> None:
        assert self.brokers is not None
        known = self.brokers.labels[: self.config.scenario.brokers]
        # The producer prefers A (priorityBackup); the consumer starts at the other end, so
        # messages cross the network bridges and the two clients fail over at different times.
        producer_uri = self.uri(known, "&priorityBackup=true")
        consumer_uri = self.uri(list(reversed(known)))
        destination = client_destination(self.config.protocol, self.config.destination)
        # The brokers' own login (RabbitMQ's guest); ActiveMQ here takes anyone.
        login, passcode = self.brokers.cluster[0].credentials or (None, None)
        self.recorder.start()  # time zero: the clients connect, traffic follows at once
        self.view.info(f"producer: {producer_uri}")
        self.view.info(f"consumer: {consumer_uri}")
        consumer = FailoverConnection(
            consumer_uri,
            clock=self.clock,
            client_id="demo-consumer",
            login=login,
            passcode=passcode,
            listeners=[ClientEvents("consumer", self.recorder, self.view, labeller)],
        )
        self.connections["consumer"] = consumer
        consumer.subscribe(
            destination,
            consumer_handler(self.recorder, labeller),
            ack="client-individual",
        )
        consumer.connect()
        producer = FailoverConnection(
            producer_uri,
            clock=self.clock,
            client_id="demo-producer",
            login=login,
            passcode=passcode,
            listeners=[ClientEvents("producer", self.recorder, self.view, labeller)],
        )
        self.connections["producer"] = producer
        producer.connect()
        self.producer = Producer(
            producer,
            destination,
            self.recorder,
            labeller,
            self.clock,
            rate=self.config.rate,
        )

    # --- the run -----------------------------------------------------------------------------

    def play(self, labeller: Labeller) -> None:
        scenario = self.config.scenario
        assert self.producer is not None
        self.phase = "traffic"
        self.view.info(f"traffic started: {self.config.rate:.0f} msg/s, scenario {scenario.name}")
        self._ticker = threading.Thread(target=self._tick, args=(labeller,), name="demo-view")
        self._ticker.daemon = True
        self._ticker.start()
        self.producer.start()
        for step in scenario.steps:
            self._wait_until(step.at)
            self.perform(step, labeller)
        self._wait_until(scenario.duration)
        self.phase = "settling"
        self.producer.stop()
        self.producer.join()
        confirmed = [m for _, m, _ in self.recorder.snapshot().confirmed]
        self.recorder.wait_settled(confirmed, quiet=SETTLE_QUIET, timeout=scenario.settle)
        self.phase = "done"

    def _wait_until(self, at: float) -> None:
        remaining = at - self.recorder.now()
        if remaining > 0:
            self.clock.wait(self.stop, remaining)

    def resolve(self, step: Step, labeller: Labeller) -> str:
        assert self.brokers is not None
        brokers = self.brokers
        if step.target in self.connections:
            return labeller(self.connections[step.target].broker)
        if step.target == "hung":
            return brokers.hung[-1]
        if step.target == "dead":
            return next(n for n in brokers.dead if brokers.labels.index(n) < brokers.known)
        return step.target

    def perform(self, step: Step, labeller: Labeller) -> None:
        assert self.brokers is not None
        brokers = self.brokers
        name = self.resolve(step, labeller)
        broker = brokers.broker(name)
        self.view.event(self.recorder.event("scenario", f"{step.action} {name}: {step.note}"))
        if step.action not in ("start", "add"):
            self.recorder.mark(step.action, name, step.note)
        if step.action == "kill":
            broker.kill()
            brokers.dead.append(name)
        elif step.action == "hang":
            broker.hang()
            brokers.hung.append(name)
        elif step.action == "resume":
            broker.resume()
            brokers.hung.remove(name)
        elif step.action == "start":
            broker.start()
            brokers.dead.remove(name)
            # Marked when it answers again: that is when clients can use it.
            self.recorder.mark("up", name, step.note)
            self.view.event(
                self.recorder.event("scenario", f"{name} is up again (pid {broker.pid})")
            )
        elif step.action == "add":
            broker.start()
            brokers.dead.remove(name)
            brokers.known += 1
            self.recorder.mark("joined", name, step.note)
            self.view.event(self.recorder.event("scenario", f"{name} is up (pid {broker.pid})"))
            address = parse(broker.uri(self.config.protocol)).members
            for connection in self.connections.values():
                connection.update_brokers(address, source="demo", action="add")

    def _tick(self, labeller: Labeller) -> None:
        while not self.stop.is_set():
            self.view.refresh(self.state(labeller))
            self.clock.wait(self.stop, 0.25)

    def state(self, labeller: Labeller) -> ViewState:
        snap = self.recorder.snapshot()
        totals = {"producer": len(snap.confirmed), "consumer": len(snap.received)}
        clients = []
        for name, connection in self.connections.items():
            total = totals[name]
            # msgs/s over the last half second or more, so the figure does not flicker.
            since, counted, rate = self._rates.get(name, (snap.t, total, 0.0))
            if snap.t - since >= 0.5:
                rate = (total - counted) / (snap.t - since)
                since, counted = snap.t, total
            self._rates[name] = (since, counted, rate)
            clients.append(
                ClientRow(name, labeller(connection.broker), connection.state, rate, total)
            )
        brokers: tuple[BrokerRow, ...] = ()
        if self.brokers is not None:
            brokers = tuple(
                BrokerRow(
                    n, self.brokers.broker(n).uri(self.config.protocol), self.brokers.status(n)
                )
                for n in self.brokers.labels
            )
        return ViewState(
            snap.t,
            self.config.scenario.duration,
            self.phase,
            tuple(clients),
            brokers,
            snap.events[-10:],
        )

    # --- results and tear-down ---------------------------------------------------------------

    def close_clients(self) -> None:
        for connection in self.connections.values():
            connection.close()

    def drain(self) -> list[str]:
        """Every message still on any broker (all brought back first), as failover ids."""
        assert self.brokers is not None
        cluster = self.brokers.cluster
        self.phase = "draining"
        self.view.info("bringing every broker back and draining what they still hold ...")
        cluster.heal()
        ids: list[str] = []
        destination, protocol = self.config.destination, self.config.protocol

        def drain(broker: Broker) -> list[ReceivedMessage]:
            # With the clients' protocol: RabbitMQ hands AMQP messages to STOMP still encoded.
            return broker.drain(destination, timeout=10.0, idle=1.0, protocol=protocol)

        # Rounds until one finds nothing: a network bridge can move a message to a broker
        # whose drain has just finished.
        for _ in range(4):
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(cluster)) as pool:
                found = list(pool.map(drain, list(cluster)))
            batch = [m.headers.get("failover-message-id", "?") for msgs in found for m in msgs]
            ids += batch
            if not batch:
                break
        return ids

    def shutdown(self, *, interrupted: bool) -> None:
        self.stop.set()
        if self.producer is not None:
            self.producer.stop()
        self.close_clients()
        ticker = self._ticker
        # Ctrl-C can land between creating the view thread and starting it (right after the
        # "traffic started" line); joining a thread that never started would raise and turn
        # the interrupt into a crash. A thread still starting sees ``stop`` and ends alone.
        if ticker is not None and ticker.ident is not None:
            ticker.join()
        self.view.close()
        if self.brokers is not None:
            if interrupted:
                for broker in self.brokers.cluster:
                    if broker.running():
                        broker.kill()
            self.brokers.cluster.close()


def run_demo(
    config: DemoConfig, *, stdout: TextIO, stderr: TextIO, clock: Clock | None = None
) -> int:
    """Run the demo; return 0 when no confirmed message was lost, 1 otherwise.

    3 when brokers cannot run here, 130 when interrupted (every broker is killed first).
    """
    demo = _Demo(config, stdout, clock or SystemClock())
    root = config.workdir or Path(tempfile.mkdtemp(prefix="failover-demo-"))
    interrupted = True
    try:
        try:
            brokers = demo.start_brokers(root)
        except BrokersUnavailable as exc:
            interrupted = False
            stderr.write(f"failover-client demo: cannot start brokers: {exc}\n")
            return EXIT_SETUP
        ports = broker_ports(brokers.cluster, config.protocol)
        labeller = Labeller(dict(zip(ports, brokers.labels, strict=True)))
        demo.open_clients(labeller)
        demo.play(labeller)
        demo.close_clients()
        summary = summarize(demo.recorder.snapshot(), demo.drain())
        interrupted = False
    finally:
        demo.shutdown(interrupted=interrupted)
        if config.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return _report(demo, summary, config, stdout)


def _report(demo: _Demo, summary: Summary, config: DemoConfig, stdout: TextIO) -> int:
    render_tables(summary_tables(summary), stdout, styled=_styled(config, stdout))
    snap = demo.recorder.snapshot()
    end = max((t for t, _, _ in snap.received), default=config.scenario.duration)
    timeline = build_timeline(
        [(t, b) for t, _, b in snap.confirmed],
        [(t, b) for t, _, b in snap.received],
        snap.marks,
        end=max(end, config.scenario.duration),
    )
    path = plot_timeline(
        timeline, config.out, title=f"failover-client demo ({config.scenario.name} scenario)"
    )
    stdout.write(f"timeline written to {path.resolve()}\n")
    if summary.lost:
        shown = ", ".join(summary.lost[:10])
        stdout.write(f"LOST {len(summary.lost)} confirmed messages: {shown}\n")
        return EXIT_LOST
    stdout.write(
        f"no confirmed message lost ({summary.confirmed} confirmed, "
        f"{summary.duplicates} duplicates delivered)\n"
    )
    return EXIT_OK


def _styled(config: DemoConfig, stream: TextIO) -> bool:
    if config.styled is not None:
        return config.styled
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
