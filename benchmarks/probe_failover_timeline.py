"""Where the time goes in a fail-over after SIGKILL: one timeline per kill, step by step.

Run: ``python benchmarks/probe_failover_timeline.py [--kills 20] [--variants nodelay,backup]``

Three ActiveMQ Classic brokers, started as ``bench_failover.py`` starts them (the harness's
fast-start JVM flags, warmed up). Each round opens a fresh ``FailoverConnection`` of one
variant (the variants take turns, so machine noise falls on all of them alike), sends
confirmed persistent 128-byte messages in a loop on a producer thread, SIGKILLs the broker in
use and records, as ``time.perf_counter()`` offsets from just before the signal:

* ``probe EOF``: a bare TCP socket to the killed broker reads EOF/RST (the operating system's
  and the JVM's part; no client can notice sooner);
* on the session to the killed broker: its I/O thread reads EOF, stomp.py calls
  ``on_disconnected``, the session's ``lose`` runs (the step ``_lose``), the connection hears
  ``on_lost``, and the reconnect loop wakes (``Dialer.lost``);
* on the session that takes over: dial start, TCP connected, CONNECT written, CONNECTED read,
  ``open`` returned, ``install`` started, the replayed (or next) SEND handed to the session and
  put on the socket, its RECEIPT read, the confirmation callback, and ``send()`` returning.

The steps are observed by wrapping library methods from this script (nothing in the library
is changed); each wrapper costs about a microsecond. With ``backup=true`` the session that
takes over was opened before the kill, so its dial steps do not occur.

Prints medians / p95 per step (offset from the kill, and the gap from the previous step);
``--json PATH`` writes every timeline.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import (
    EofProbe,
    broker_by_port,
    brokers,
    log,
    percentile,
    port_of,
    precreate,
    table,
    warm,
)
from failover_client import FailoverConnection
from failover_client.engine import _dial as engine_dial
from failover_client.engine import _outbox as engine_outbox
from failover_client.engine import _sender as engine_sender
from failover_client.engine import _slot as engine_slot
from failover_client.engine import _state as engine_state
from failover_client.stomp import _inbound as stomp_inbound
from failover_client.stomp import _outbound as stomp_outbound
from failover_client.stomp import _session as stomp_session
from failover_client.stomp import _transport as stomp_transport
from failover_client.testing.brokers import Cluster

WARM_QUEUE = "/queue/bench.warmup"
BODY = b"x" * 128

VARIANTS: dict[str, dict[str, str | int | bool]] = {
    "nodelay": {"initialReconnectDelay": 0},
    "backup": {"backup": True},
    "defaults": {},
}

# (step, which session: "old" = the killed broker's, "new" = the one that takes over, "" = none)
STEPS: tuple[tuple[str, str], ...] = (
    ("probe EOF", ""),
    ("I/O thread reads EOF", "old"),
    ("on_disconnected", "old"),
    ("_lose", "old"),
    ("on_lost (manager)", "old"),
    ("loop wakes", "old"),
    ("dial start", "new"),
    ("TCP connected", "new"),
    ("CONNECT written", "new"),
    ("CONNECTED read", "new"),
    ("open() returned", "new"),
    ("install", "new"),
    ("SEND to session", "new"),
    ("SEND on socket", "new"),
    ("RECEIPT read", "new"),
    ("confirm callback", "new"),
    ("send() returns", "new"),
    ("refill dial start", "third"),
    ("refill CONNECTED", "third"),
)
DIAL_STEPS = frozenset(
    {"dial start", "TCP connected", "CONNECT written", "CONNECTED read", "open() returned"}
)


# -- recording ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """One observed step: when, which step, which broker port, on which thread."""

    at: float
    step: str
    port: int
    thread: str


class Recorder:
    """Marks from every thread (``list.append`` is atomic under the GIL: no lock needed)."""

    def __init__(self) -> None:
        self.marks: list[Mark] = []

    def mark(self, step: str, port: int) -> None:
        self.marks.append(Mark(time.perf_counter(), step, port, threading.current_thread().name))

    def since(self, start: float) -> list[Mark]:
        return [m for m in list(self.marks) if m.at >= start]

    def clear(self) -> None:
        self.marks = []


Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def _patch(owner: object, name: str, make: Wrapper) -> None:
    """Replace ``owner.name`` by ``make(original)``; say so when the name is gone."""
    original = getattr(owner, name, None)
    if original is None:
        log(f"instrumentation: {getattr(owner, '__name__', owner)}.{name} not found; step skipped")
        return
    setattr(owner, name, functools.wraps(original)(make(original)))


def _session_port(session: Any) -> int:
    return int(session.address.port)


def instrument(rec: Recorder) -> None:
    """Wrap the library's methods so that each step of a fail-over leaves a mark."""

    def before(step: str, port_of_call: Callable[..., int]) -> Wrapper:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                rec.mark(step, port_of_call(*args, **kwargs))
                return original(*args, **kwargs)

            return wrapper

        return make

    def after(step: str, port_of_call: Callable[..., int]) -> Wrapper:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                rec.mark(step, port_of_call(*args, **kwargs))
                return result

            return wrapper

        return make

    transport = stomp_transport.BoundTransport
    session = stomp_session.StompSession
    events = stomp_inbound.FrameEvents

    def transport_port(self: Any, *_: Any, **__: Any) -> int:
        return int(self._address[1])

    def session_port(self: Any, *_: Any, **__: Any) -> int:
        return _session_port(self)

    def events_port(self: Any, *_: Any, **__: Any) -> int:
        return int(self._state.address.port)

    def state_port(state: Any, *_: Any, **__: Any) -> int:
        return int(state.address.port)

    def receive(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any) -> Any:
            data = original(self)
            if not data:
                rec.mark("I/O thread reads EOF", transport_port(self))
            return data

        return wrapper

    _patch(transport, "receive", receive)
    _patch(transport, "attempt_connection", after("TCP connected", transport_port))
    _patch(transport, "write_quietly", after("CONNECT written", transport_port))

    def start_writer(original: Callable[..., Any]) -> Callable[..., Any]:
        # The writer thread (or a caller writing inline) calls the socket's sendall it was
        # given: wrap that callable to see when bytes reach the socket.
        def wrapper(self: Any, **kwargs: Any) -> Any:
            started = original(self, **kwargs)
            writer = getattr(self, "_writer", None)
            if started and writer is not None and hasattr(writer, "_write"):
                write = writer._write
                port = transport_port(self)

                def timed(data: bytes) -> Any:
                    result = write(data)
                    if b"SEND\n" in data:
                        rec.mark("SEND on socket", port)
                    return result

                writer._write = timed
            return started

        return wrapper

    _patch(transport, "start_writer", start_writer)
    _patch(events, "on_disconnected", before("on_disconnected", events_port))
    # The inbound and outbound sides import ``lose`` by name: wrap it where each looks it up.
    _patch(stomp_inbound, "lose", before("_lose", state_port))
    _patch(stomp_outbound, "lose", before("_lose", state_port))
    _patch(events, "on_connected", before("CONNECTED read", events_port))
    _patch(session, "open", after("open() returned", session_port))
    _patch(session, "send", before("SEND to session", session_port))
    _patch(events, "on_receipt", before("RECEIPT read", events_port))

    def slot_port(self: Any, slot: Any, *_: Any, **__: Any) -> int:
        return int(slot.address.port)

    def listener_port(self: Any, *_: Any, **__: Any) -> int:
        return int(self._slot.address.port)

    def address_port(self: Any, *args: Any, **kwargs: Any) -> int:
        address = args[0] if args else kwargs["address"]
        return int(address.port)

    _patch(engine_slot.SlotListener, "on_lost", before("on_lost (manager)", listener_port))
    _patch(engine_dial.Dialer, "lost", before("loop wakes", slot_port))
    _patch(engine_dial.Dialer, "open", before("dial start", address_port))
    _patch(engine_state.ConnectionState, "install", before("install", slot_port))

    def confirmed(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, message: Any, slot: Any, error: Any) -> Any:
            if error is None:
                rec.mark("confirm callback", int(slot.address.port))
            return original(self, message, slot, error)

        return wrapper

    _patch(engine_sender.Sender, "_confirmed", confirmed)

    def take_for(original: Callable[..., Any]) -> Callable[..., Any]:
        # The outbox is keyed by the engine's slot, which carries the broker's address.
        def wrapper(self: Any, slot: Any) -> Any:
            replay = original(self, slot)
            if replay:
                rec.mark(f"replay x{len(replay)}", int(slot.address.port))
            return replay

        return wrapper

    _patch(engine_outbox.Outbox, "take_for", take_for)


# -- the raw probe and the producer ----------------------------------------------------------


class Producer:
    """Blocking confirmed sends in a loop; notes each return (time, port, duration)."""

    def __init__(self, conn: FailoverConnection, destination: str, rec: Recorder) -> None:
        self.conn = conn
        self.destination = destination
        self.rec = rec
        self.cond = threading.Condition()
        self.returns: list[tuple[float, int, float]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60.0)

    def _run(self) -> None:
        n = 0
        try:
            while not self._stop.is_set():
                began = time.perf_counter()
                self.conn.send(self.destination, BODY, {"probe-id": str(n)}, timeout=30.0)
                port = port_of(self.conn.broker)
                done = time.perf_counter()
                with self.cond:
                    self.returns.append((done, port, done - began))
                    self.cond.notify_all()
                n += 1
        except BaseException as exc:  # reported by the round, which then stops
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def wait_count(self, count: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(
                lambda: len(self.returns) >= count or self.error is not None, timeout
            )

    def first_return_after(
        self, since: float, away_from: int, timeout: float
    ) -> tuple[float, int] | None:
        """(time, port) of the first return after ``since`` confirmed by another broker."""

        def found() -> tuple[float, int] | None:
            for at, port, _ in self.returns:
                if at >= since and port != away_from:
                    return at, port
            return None

        with self.cond:
            self.cond.wait_for(lambda: found() is not None or self.error is not None, timeout)
            return found()


# -- noise -----------------------------------------------------------------------------------


def _system_busy() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _process_jiffies(pid: int) -> int:
    """user + system jiffies of ``pid`` (all its threads); 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _broker_jiffies(cluster: Cluster) -> dict[int, int]:
    return {b.pid: _process_jiffies(b.pid) for b in cluster if b.pid is not None}


class Noise:
    """CPU used on the machine during a round by processes that are not this benchmark's."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.system = _system_busy()
        self.own = _process_jiffies(os.getpid())
        self.brokers_start = _broker_jiffies(cluster)
        self.brokers_kill: dict[int, int] = {}

    def at_kill(self) -> None:
        self.brokers_kill = _broker_jiffies(self.cluster)

    def foreign_share(self) -> tuple[float, float]:
        """(busy share of both CPUs, share used by other processes), 0..1, since start."""
        busy, total = _system_busy()
        own = _process_jiffies(os.getpid()) - self.own
        brokers = sum(self.brokers_kill.get(p, j) - j for p, j in self.brokers_start.items())
        brokers += sum(
            _process_jiffies(p) - j for p, j in self.brokers_kill.items() if _process_jiffies(p)
        )
        span = max(1, total - self.system[1])
        used = busy - self.system[0]
        return used / span, max(0, used - own - brokers) / span


# -- one round -------------------------------------------------------------------------------


@dataclass
class Round:
    variant: str
    victim: int
    new: int | None
    offsets_ms: dict[str, float] = field(default_factory=dict)
    steady_send_ms: float = float("nan")
    dials_to_victim: int = 0
    replayed: int = 0
    threads: dict[str, str] = field(default_factory=dict)
    load: float = 0.0
    busy: float = 0.0
    foreign: float = 0.0
    error: str | None = None


def _fail(message: str) -> NoReturn:
    raise RuntimeError(message)


def _wait_standby(conn: FailoverConnection, timeout: float) -> bool:
    """Bounded poll: a standby's arrival is an event on the dispatch thread, not a waitable."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if conn.stats().get("standbys", 0) >= 1:
            return True
        time.sleep(0.01)
    return False


def run_round(cluster: Cluster, rec: Recorder, variant: str, settle: int, number: int) -> Round:
    """Connect a fresh connection, send ``settle`` messages, kill its broker, time the steps."""
    uri = cluster.failover_uri("stomp", VARIANTS[variant])
    destination = f"/queue/probe.timeline.{uuid.uuid4().hex[:6]}.{number}"
    precreate(cluster, destination)
    noise = Noise(cluster)
    conn = FailoverConnection(uri)
    conn.connect()
    producer = Producer(conn, destination, rec)
    producer.start()
    outcome = Round(variant, victim=-1, new=None)
    probe: EofProbe | None = None
    try:
        if not producer.wait_count(settle, 60.0):
            _fail(f"producer stalled before the kill: {producer.error!r}")
        if VARIANTS[variant].get("backup") and not _wait_standby(conn, 10.0):
            _fail("no standby within 10 s")
        with producer.cond:
            recent = [d for _, _, d in producer.returns[-200:]]
        outcome.steady_send_ms = statistics.median(recent) * 1000.0
        victim_port = port_of(conn.broker)
        outcome.victim = victim_port
        broker = cluster[broker_by_port(cluster, victim_port)]
        endpoint = broker.endpoint("stomp")
        probe = EofProbe(endpoint.host, endpoint.port)
        outcome.load = os.getloadavg()[0]
        noise.at_kill()
        t0 = time.perf_counter()
        broker.kill()  # SIGKILL to the process group, then reap
        switch = producer.first_return_after(t0, victim_port, 30.0)
        eof_at = probe.wait(5.0)
        if switch is None:
            _fail(f"no confirmation from another broker: {producer.error!r}")
        switched, new_port = switch
        outcome.busy, outcome.foreign = noise.foreign_share()
        marks = rec.since(t0)
        outcome.new = new_port
        outcome.offsets_ms["send() returns"] = (switched - t0) * 1000.0
        if eof_at is not None:
            outcome.offsets_ms["probe EOF"] = (eof_at - t0) * 1000.0
        for step, side in STEPS:
            if side in ("", "third") or step == "send() returns":
                continue
            port_ok: Callable[[int], bool] = (
                (lambda p: p == victim_port) if side == "old" else (lambda p: p == new_port)
            )
            hit = next((m for m in marks if m.step == step and port_ok(m.port)), None)
            if hit is not None and hit.at <= switched:
                outcome.offsets_ms[step] = (hit.at - t0) * 1000.0
                outcome.threads[step] = hit.thread.split(" ", 1)[0].rstrip("0123456789-")
        # Work on a third broker meanwhile (backup=true refills its standby): when it starts
        # and when that broker answers, to compare with the critical steps above.
        for step, name in (
            ("dial start", "refill dial start"),
            ("CONNECTED read", "refill CONNECTED"),
        ):
            hit = next(
                (m for m in marks if m.step == step and m.port not in (victim_port, new_port)),
                None,
            )
            if hit is not None:
                outcome.offsets_ms[name] = (hit.at - t0) * 1000.0
        outcome.dials_to_victim = sum(
            1 for m in marks if m.step == "dial start" and m.port == victim_port
        )
        outcome.replayed = next(
            (int(m.step[len("replay x") :]) for m in marks if m.step.startswith("replay x")), 0
        )
    except Exception as exc:  # recorded; the next round still runs
        outcome.error = f"{type(exc).__name__}: {exc}"
    finally:
        producer.stop()
        conn.close()
        if probe is not None:
            probe.close()
        rec.clear()
    return outcome


@contextlib.contextmanager
def three_brokers(extra_jvm_options: Sequence[str] = ()) -> Iterator[Cluster]:
    """bench_failover's brokers (the harness's JVM flags), plus ``extra_jvm_options``, warm."""
    with brokers(
        3, label="timeline", full_jit=False, extra_jvm_options=extra_jvm_options
    ) as cluster:
        for broker in cluster:
            warm(broker, WARM_QUEUE, 3000)
        yield cluster


def restart_killed(cluster: Cluster) -> None:
    for broker in cluster:
        if not broker.running():
            broker.start()
            warm(broker, WARM_QUEUE, 500)


# -- report ----------------------------------------------------------------------------------


def _fmt(values: Sequence[float]) -> tuple[float | str, float | str]:
    if not values:
        return "-", "-"
    return round(statistics.median(values), 2), round(percentile(values, 0.95), 2)


def report(rounds: list[Round], variants: Sequence[str]) -> str:
    text = ""
    for variant in variants:
        done = [r for r in rounds if r.variant == variant and r.error is None]
        rows = []
        previous: str | None = None
        for step, side in STEPS:
            offsets = [r.offsets_ms[step] for r in done if step in r.offsets_ms]
            if not offsets:
                continue
            gaps = [
                r.offsets_ms[step] - r.offsets_ms[previous]
                for r in done
                if previous is not None
                and side != "third"
                and step in r.offsets_ms
                and previous in r.offsets_ms
            ]
            threads = sorted({r.threads.get(step, "") for r in done} - {""})
            med, p95 = _fmt(offsets)
            gmed, gp95 = _fmt(gaps)
            rows.append([step, len(offsets), med, p95, gmed, gp95, ",".join(threads)])
            if side not in ("", "third"):
                previous = step
        text += table(
            f"{variant}: {VARIANTS[variant] or 'URI defaults'} - {len(done)} kills "
            "(ms after os.kill; gap = from the previous step of our session)",
            ["step", "n", "median", "p95", "gap median", "gap p95", "thread"],
            rows,
        )
        ours = [
            r.offsets_ms["send() returns"] - r.offsets_ms["I/O thread reads EOF"]
            for r in done
            if "send() returns" in r.offsets_ms and "I/O thread reads EOF" in r.offsets_ms
        ]
        lag = [
            r.offsets_ms["I/O thread reads EOF"] - r.offsets_ms["probe EOF"]
            for r in done
            if "probe EOF" in r.offsets_ms and "I/O thread reads EOF" in r.offsets_ms
        ]
        steady = [r.steady_send_ms for r in done]
        total = [r.offsets_ms["send() returns"] for r in done if "send() returns" in r.offsets_ms]
        summary = {
            "kill -> send() returns": _fmt(total),
            "our EOF -> send() returns": _fmt(ours),
            "probe EOF -> our EOF": _fmt(lag),
            "steady-state send() before the kill": _fmt(steady),
            "loadavg(1 min) at the kills": _fmt([r.load for r in done]),
            "CPU busy % in the round (2 CPUs = 100)": _fmt([r.busy * 100 for r in done]),
            "  of which other processes %": _fmt([r.foreign * 100 for r in done]),
        }
        text += table(
            f"{variant}: summary (ms)",
            ["what", "median", "p95"],
            [[k, *v] for k, v in summary.items()],
        )
        replays = [r.replayed for r in done]
        dials = [r.dials_to_victim for r in done]
        failed = [r.error for r in rounds if r.variant == variant and r.error is not None]
        line = (
            f"{variant}: replayed per kill {replays}; dials to the killed broker {dials}; "
            f"failed rounds {len(failed)} {failed[:3]}"
        )
        print(line, flush=True)
        text += "\n" + line + "\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per variant")
    parser.add_argument(
        "--variants",
        default="nodelay,backup",
        help=f"comma-separated, taking turns: {', '.join(VARIANTS)}",
    )
    parser.add_argument("--settle", type=int, default=300, help="messages before each kill")
    parser.add_argument("--json", type=Path, default=None, help="write every timeline here")
    parser.add_argument(
        "--jvm",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra JVM flag for the brokers (repeatable): --jvm=-XX:+UseTransparentHugePages",
    )
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - VARIANTS.keys())
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {sorted(VARIANTS)}")

    rec = Recorder()
    instrument(rec)
    rounds: list[Round] = []
    started = time.monotonic()
    with three_brokers(args.jvm) as cluster:
        for n in range(args.kills * len(variants)):
            variant = variants[n % len(variants)]
            outcome = run_round(cluster, rec, variant, args.settle, n)
            rounds.append(outcome)
            shown = {k: round(v, 2) for k, v in outcome.offsets_ms.items()}
            log(f"{variant:>8} kill {n // len(variants) + 1:>2}: {outcome.error or shown}")
            restart_killed(cluster)
    text = report(rounds, variants)
    print(f"\n{len(rounds)} kills in {time.monotonic() - started:.0f} s", flush=True)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"rounds": [vars(r) for r in rounds], "table": text}, indent=2, default=str)
            + "\n"
        )
    return 0 if all(r.error is None for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
