"""The demo run: brokers up, clients on, the scenario played, the results checked and drawn."""

from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from failover_client import Clock, FailoverConnection, Listener, SystemClock
from failover_client.cli._output import render_tables
from failover_client.topology import TopologySource

from ._clients import ClientEvents, Labeller, Producer, consumer_handler
from ._fleet import FLEET_SIZE, FleetEvents, fleet_ids, homes
from ._harness import (
    PROTOCOLS,
    BrokersUnavailable,
    DemoBrokers,
    broker_ports,
    client_destination,
    describe_brokers,
    drain_all,
    start_brokers,
)
from ._live import BrokerRow, ClientRow, View, ViewState, make_view
from ._record import Recorder
from ._scenario import Scenario, Step, label
from ._sources import Discovery, check_source, default_source
from ._summary import Summary, summarize, summary_tables
from ._timeline import build_timeline, plot_timeline
from ._uris import client_uris, tier_of

__all__ = ["DemoConfig", "run_demo"]

SETTLE_QUIET = 1.5
"""Seconds without a delivery after which the consumer counts as caught up. Messages a network
bridge left on a broker the consumer is not on never arrive by themselves; the drain finds
them."""

FLEET_SETTLE = 20.0
"""Seconds a step waits at most for the fleet to finish the moves of the step before (on an
idle machine it has long finished; on a loaded one a step must not overtake them)."""

EXIT_OK, EXIT_LOST, EXIT_SETUP, EXIT_INTERRUPTED = 0, 1, 3, 130

_Opener = Callable[[str, str, Listener], FailoverConnection]
"""Builds one client connection from its URI, client id and listener."""


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
    fleet: int = FLEET_SIZE
    """Idle clients with ``rebalance=true`` that show where clients are placed (0: none)."""
    source: str | None = None
    """How clients learn of a joining broker: ``openwire``, ``advisory`` or ``file`` (see
    :mod:`._sources`); None picks the brokers' own push for STOMP, the file for AMQP."""

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be > 0 messages per second, got {self.rate}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol {self.protocol!r}: choose one of {', '.join(PROTOCOLS)}")
        if not self.destination.startswith("/queue/"):
            raise ValueError(f"destination {self.destination!r}: use a /queue/<name>")
        if not 0 <= self.fleet <= 99:
            raise ValueError(f"fleet must be 0..99 idle clients, got {self.fleet}")
        check_source(self.protocol, self.topology_source)

    @property
    def topology_source(self) -> str:
        return self.source or default_source(self.protocol)


class _Demo:
    def __init__(self, config: DemoConfig, stream: TextIO, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.view: View = make_view(stream, styled=config.styled)
        self.recorder = Recorder(clock)
        self.stop = threading.Event()
        self.brokers: DemoBrokers | None = None
        self.discovery: Discovery | None = None
        self.connections: dict[str, FailoverConnection] = {}
        self.fleet: dict[str, FailoverConnection] = {}
        self.producer: Producer | None = None
        self.phase = "starting"
        self._ticker: threading.Thread | None = None
        self._rates: dict[str, tuple[float, int, float]] = {}

    # --- set-up ------------------------------------------------------------------------------

    def start_brokers(self, root: Path) -> DemoBrokers:
        config = self.config
        scenario = config.scenario
        size = scenario.total_brokers
        self.view.info(f"starting {describe_brokers(config.protocol, size)} ...")
        queue = config.destination.removeprefix("/queue/")
        cluster = start_brokers(config.protocol, size, root, config.backend, queue)
        labels = [label(i) for i in range(size)]
        brokers = DemoBrokers(cluster, labels, scenario.brokers, config.protocol)
        self.brokers = brokers
        # The harness starts a whole cluster; brokers that join later stop until their turn
        # (before any client connects, so no client or peer has heard of them yet).
        for name in labels[scenario.brokers :]:
            brokers.broker(name).stop()
            brokers.dead.append(name)
        for name in labels:
            b = brokers.broker(name)
            pid = b.pid if b.running() else None
            where = f"pid {pid}" if pid else "joins later"
            tier = tier_of(scenario, name)
            shown = f" ({tier})" if tier else ""
            self.view.info(f"broker {name}{shown}: {b.uri(config.protocol)} ({where})")
        if config.protocol == "amqp":
            self.view.info(
                "the nodes are independent: a message stays on the node it was sent to until "
                "the consumer (or the final drain) takes it there"
            )
        return brokers

    def open_clients(self, labeller: Labeller, root: Path) -> None:
        assert self.brokers is not None
        config, brokers = self.config, self.brokers
        producer_uri, consumer_uri, fleet_uri = client_uris(brokers, config.scenario)
        destination = client_destination(config.protocol, config.destination)
        # The brokers' own login (RabbitMQ's guest); ActiveMQ here takes anyone.
        login, passcode = brokers.cluster[0].credentials or (None, None)
        if config.scenario.added_labels():
            self.discovery = Discovery(
                config.topology_source,
                brokers.cluster,
                config.protocol,
                known=[brokers.broker(n) for n in brokers.labels[: brokers.known]],
                root=root,
                clock=self.clock,
                login=login,
                passcode=passcode,
            )
            self.view.info(self.discovery.describe())
        self.recorder.start()  # time zero: the clients connect, traffic follows at once
        self.view.info(f"producer: {producer_uri}")
        self.view.info(f"consumer: {consumer_uri}")

        def connection(uri: str, client_id: str, listener: Listener) -> FailoverConnection:
            sources: list[TopologySource] = []
            if self.discovery is not None:
                sources = self.discovery.sources(uri)
            return FailoverConnection(
                uri,
                clock=self.clock,
                client_id=client_id,
                login=login,
                passcode=passcode,
                listeners=[listener],
                topology=sources,
            )

        events = ClientEvents("consumer", self.recorder, self.view, labeller)
        consumer = self.connections["consumer"] = connection(consumer_uri, "demo-consumer", events)
        consumer.subscribe(
            destination, consumer_handler(self.recorder, labeller), ack="client-individual"
        )
        consumer.connect()
        events = ClientEvents("producer", self.recorder, self.view, labeller)
        producer = self.connections["producer"] = connection(producer_uri, "demo-producer", events)
        producer.connect()
        self.producer = Producer(
            producer, destination, self.recorder, labeller, self.clock, rate=config.rate
        )
        self._open_fleet(fleet_uri, labeller, connection)

    def _open_fleet(self, uri: str, labeller: Labeller, connection: _Opener) -> None:
        ids = fleet_ids(self.config.fleet)
        if not ids:
            return
        self.view.info(f"fleet: {len(ids)} idle clients {ids[0]}..{ids[-1]}: {uri}")
        for client in ids:
            listener = FleetEvents(client, self.recorder, self.view, labeller, len(ids))
            self.fleet[client] = connection(uri, client, listener)
        # Together: each connect waits for its handshake, and the brokers answer in parallel.
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda c: c.connect(), self.fleet.values()))
        assert self.brokers is not None
        candidates = self.brokers.balanced_over(self.config.scenario.priority)
        placed = Counter(homes(ids, candidates).values())
        spread = ", ".join(f"{n} {placed.get(n, 0)}" for n in candidates)
        self.view.info(f"fleet: their rendezvous homes: {spread}")

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
            self._wait_for_fleet()
            self.perform(step, labeller)
        self._wait_until(scenario.duration)
        self.phase = "settling"
        self.producer.stop()
        self.producer.join()
        confirmed = [m for _, m, _ in self.recorder.snapshot().confirmed]
        self.recorder.wait_settled(confirmed, quiet=SETTLE_QUIET, timeout=scenario.settle)
        # Moves still under way (a late join, a slow restart) finish before the count.
        self._wait_for_fleet()
        self.phase = "done"

    def _wait_for_fleet(self, timeout: float = FLEET_SETTLE) -> None:
        """Wait until each fleet client is at its rendezvous home among the brokers up now.

        The fleet's table is taken at each step: waiting for the moves the step before set off
        (not for a fixed time) makes each row show the fleet settled, however slow the machine.
        """
        if not self.fleet or self.brokers is None:
            return
        wanted = homes(self.fleet, self.brokers.balanced_over(self.config.scenario.priority))
        if not self.recorder.wait_placed(wanted, timeout=timeout):
            self.view.event(
                self.recorder.event("fleet", f"not every client home after {timeout:.0f} s")
            )

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
            # The fleet's row is taken before the start, as for a join: clients reach a broker
            # as soon as it listens, before start() has seen it answer.
            self.recorder.mark("start", name, step.note)
            broker.start()
            brokers.dead.remove(name)
            # Marked when it answers again: that is when clients can use it.
            self.recorder.mark("up", name, step.note)
            self.view.event(
                self.recorder.event("scenario", f"{name} is up again (pid {broker.pid})")
            )
        elif step.action == "add":
            self._join(name)

    def _join(self, name: str) -> None:
        """Start broker ``name`` that no client knows of yet, after saying who should move."""
        assert self.brokers is not None
        brokers = self.brokers
        broker = brokers.broker(name)
        candidates = brokers.balanced_over(self.config.scenario.priority)
        if not self.config.scenario.priority or name in self.config.scenario.priority:
            candidates[name] = brokers.key(name)
        # Recorded before the start: clients may hear of the broker before start() returns.
        predicted = self.recorder.join(name, homes(self.fleet, candidates)).predicted
        if self.fleet:
            stay = len(self.fleet) - len(predicted)
            self.view.event(
                self.recorder.event(
                    "scenario",
                    f"{name} will be the rendezvous home of {len(predicted)} of "
                    f"{len(self.fleet)} fleet clients ({', '.join(predicted) or 'none'}): only "
                    f"they should move, about 1/{len(candidates)} of the fleet; the other "
                    f"{stay} stay put",
                )
            )
        broker.start()
        brokers.dead.remove(name)
        brokers.known += 1
        self.recorder.mark("joined", name, "")
        self.view.event(self.recorder.event("scenario", f"{name} is up (pid {broker.pid})"))
        if self.discovery is not None:
            told = self.discovery.joined(broker)
            text = told or f"nobody tells the clients: they learn of {name} from the brokers"
            self.view.event(self.recorder.event("scenario", text))

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
        return ViewState(
            snap.t,
            self.config.scenario.duration,
            self.phase,
            tuple(clients),
            self._broker_rows(labeller),
            snap.events[-10:],
            self._note(),
        )

    def _broker_rows(self, labeller: Labeller) -> tuple[BrokerRow, ...]:
        if self.brokers is None:
            return ()
        brokers, protocol = self.brokers, self.config.protocol
        states = [(c.state, c.broker) for c in self.fleet.values()]
        on = Counter(labeller(b) for state, b in states if state in ("connected", "switching"))
        # Once the fleet is closed (the drain) its counts would only say nothing.
        shown = any(state != "closed" for state, _ in states)
        return tuple(
            BrokerRow(
                n,
                brokers.broker(n).uri(protocol),
                brokers.status(n),
                on.get(n, 0) if shown else None,
                tier_of(self.config.scenario, n),
            )
            for n in brokers.labels
        )

    def _note(self) -> str:
        if not self.fleet:
            return ""
        size, priority = len(self.fleet), self.config.scenario.priority
        if priority:
            return (
                f"fleet: {size} idle clients preferring {', '.join(priority)} (priorityBackup + "
                "rebalance): balanced over the live local brokers, on the remote ones only "
                "while no local one is up"
            )
        return (
            f"fleet: {size} idle clients with rebalance=true: a broker that joins takes only the "
            "clients whose rendezvous home it becomes, about 1/N of them; the others stay"
        )

    # --- results and tear-down ---------------------------------------------------------------

    def close_clients(self) -> None:
        self.recorder.end()
        clients = [*self.connections.values(), *self.fleet.values()]
        # Together: each close stops its topology source too, and waits for its threads.
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda c: c.close(), clients))

    def drain(self) -> list[str]:
        """Every message still on any broker (all brought back first), as failover ids."""
        assert self.brokers is not None
        self.phase = "draining"
        self.view.info("bringing every broker back and draining what they still hold ...")
        self.brokers.cluster.heal()
        return drain_all(self.brokers.cluster, self.config.destination, self.config.protocol)

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
        demo.open_clients(labeller, root)
        demo.play(labeller)
        demo.close_clients()
        summary = summarize(demo.recorder.snapshot(), demo.drain(), labels=brokers.labels)
        interrupted = False
    finally:
        demo.shutdown(interrupted=interrupted)
        if config.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return _report(demo, summary, config, stdout)


def _report(demo: _Demo, summary: Summary, config: DemoConfig, stdout: TextIO) -> int:
    render_tables(summary_tables(summary), stdout, styled=_styled(config, stdout))
    for join in summary.fleet.joins if summary.fleet is not None else ():
        stdout.write(join.describe() + "\n")
    snap = demo.recorder.snapshot()
    end = max((t for t, _, _ in snap.received), default=config.scenario.duration)
    ended = snap.ended if snap.ended is not None else snap.t
    timeline = build_timeline(
        [(t, b) for t, _, b in snap.confirmed],
        [(t, b) for t, _, b in snap.received],
        snap.marks,
        end=max(end, config.scenario.duration),
        fleet=[p for p in snap.positions if p[0] <= ended],
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
