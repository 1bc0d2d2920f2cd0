"""Where the time goes in an AMQP fail-over after SIGKILL: one timeline per kill, step by step.

Run: ``python benchmarks/probe_amqp_failover_timeline.py [--kills 10] [--options URI-OPTIONS]``

Two RabbitMQ nodes (AMQP 1.0 plugin), started as ``bench_amqp.py`` starts them, and one
``FailoverConnection`` (``randomize=false`` plus ``--options``) whose producer thread sends
durable messages one at a time, each confirmed. Each round SIGKILLs the node in use and
records, as ``time.monotonic()`` offsets from just before the signal:

* ``probe EOF``: a bare TCP socket to the killed node reads EOF/RST (no client can notice
  sooner);
* on the session to the killed node: proton's transport closed (``on_transport_closed``),
  the session's loss (``SessionState.lose``), the connection hearing ``on_lost``, and the
  reconnect loop waking (``Dialer.lost``);
* on the session that takes over: dial start (``Dialer.open``), the container thread running,
  proton resolving and starting the TCP connect (``on_connection_bound``), TCP connected,
  SASL outcome, the broker's AMQP open, ``open()`` returned, ``install``, the replayed send
  handed to the container, the sender link attached, its credit, the transfer written, the
  disposition read, the engine's confirmation and ``send()`` returning.

The steps are observed by wrapping library and proton methods from this script (nothing in
the library is changed). Prints the median and p95 of each step's offset from the kill and of
its gap from the step before; ``--json PATH`` writes every timeline.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from proton import _handlers as proton_handlers

from benchmarks._amqp_series import FailoverDriver, durable_queue
from benchmarks._common import EofProbe, brokers, log, percentile, table
from benchmarks._drivers import ProducerLoop
from failover_client.amqp import _handler as amqp_handler
from failover_client.amqp import _loop as amqp_loop
from failover_client.amqp import _sending as amqp_sending
from failover_client.amqp import _session as amqp_session
from failover_client.amqp import _state as amqp_state
from failover_client.engine import _dial as engine_dial
from failover_client.engine import _sender as engine_sender
from failover_client.engine import _slot as engine_slot
from failover_client.engine import _state as engine_state

STEPS: tuple[str, ...] = (
    "probe EOF",
    "transport closed",
    "session lose",
    "on_lost (engine)",
    "loop wakes",
    "dial start",
    "container runs",
    "resolve + connect()",
    "TCP connected",
    "AMQP open read",
    "open() returned",
    "install",
    "send to container",
    "link attached",
    "link credit",
    "disposition read",
    "confirmed (engine)",
    "send() returns",
)
"""In the order they happen; a step seen more than once in a round counts at its first."""

Marks = list[tuple[str, float]]


class Recorder:
    """Marks from every thread (``list.append`` is atomic under the GIL: no lock needed)."""

    def __init__(self) -> None:
        self.marks: Marks = []
        self.armed = False

    def mark(self, step: str) -> None:
        if self.armed:
            self.marks.append((step, time.monotonic()))


def _patch(owner: object, name: str, step: str, rec: Recorder, *, after: bool = False) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after:
            rec.mark(step)
        result = original(*args, **kwargs)
        if after:
            rec.mark(step)
        return result

    setattr(owner, name, wrapper)


def instrument(rec: Recorder) -> None:
    events = amqp_handler.Events
    _patch(events, "on_transport_closed", "transport closed", rec)
    _patch(amqp_state.SessionState, "lose", "session lose", rec)
    _patch(engine_slot.SlotListener, "on_lost", "on_lost (engine)", rec)
    _patch(engine_dial.Dialer, "lost", "loop wakes", rec)
    _patch(engine_dial.Dialer, "open", "dial start", rec)
    _patch(amqp_loop.ContainerThread, "_run", "container runs", rec)
    _patch(proton_handlers.IOHandler, "on_connection_bound", "resolve + connect()", rec)
    _patch(proton_handlers.ConnectSelectable, "writable", "TCP connected", rec)
    _patch(events, "on_connection_remote_open", "AMQP open read", rec)
    _patch(amqp_session.AmqpSession, "open", "open() returned", rec, after=True)
    _patch(engine_state.ConnectionState, "install", "install", rec)
    _patch(amqp_sending.Outgoing, "send", "send to container", rec)
    _patch(amqp_sending.Outgoing, "on_remote_attach", "link attached", rec)
    _patch(amqp_sending.Outgoing, "on_flow", "link credit", rec)
    _patch(amqp_sending.Outgoing, "on_disposition", "disposition read", rec)
    _patch(engine_sender.Sender, "_confirmed", "confirmed (engine)", rec)


def timeline(marks: Marks, t_kill: float, eof: float | None, returned: float) -> dict[str, float]:
    """Each step's first offset (ms) from the kill; new-session steps only after dial start."""
    out: dict[str, float] = {}
    if eof is not None:
        out["probe EOF"] = (eof - t_kill) * 1000
    dial = next((t for s, t in marks if s == "dial start" and t >= t_kill), None)
    old_steps = ("transport closed", "session lose", "on_lost (engine)", "loop wakes")
    for step, at in marks:
        if at < t_kill or step in out:
            continue
        if step not in old_steps and step != "dial start" and (dial is None or at < dial):
            continue
        out[step] = (at - t_kill) * 1000
    out["send() returns"] = (returned - t_kill) * 1000
    return out


def report(timelines: list[dict[str, float]]) -> str:
    rows = []
    previous: str | None = None
    for step in STEPS:
        at = [t[step] for t in timelines if step in t]
        if not at:
            continue
        gaps = [t[step] - t[previous] for t in timelines if step in t and previous in t]
        rows.append(
            [
                step,
                len(at),
                f"{statistics.median(at):.2f}",
                f"{percentile(at, 0.95):.2f}",
                f"{statistics.median(gaps):.2f}" if gaps else "",
                f"{percentile(gaps, 0.95):.2f}" if gaps else "",
            ]
        )
        previous = step
    return table(
        f"AMQP fail-over timeline, {len(timelines)} SIGKILLs (ms from the kill)",
        ["step", "n", "median", "p95", "gap median", "gap p95"],
        rows,
    )


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--settle", type=int, default=200, help="accepted messages between kills")
    parser.add_argument("--options", default="", help="extra URI options, e.g. backup=true")
    parser.add_argument("--json", type=Path, help="write every timeline here")
    args = parser.parse_args(argv)
    rec = Recorder()
    instrument(rec)
    timelines: list[dict[str, float]] = []
    with brokers(2, kind="rabbitmq", label="amqp-probe", full_jit=False) as cluster:
        queue = durable_queue(cluster, "probe")
        driver = FailoverDriver(cluster, args.options)
        driver.conn.connect()
        loop = ProducerLoop(driver, f"/amq/queue/{queue}", prefix="probe")  # type: ignore[arg-type]
        loop.start()
        try:
            for n in range(args.kills):
                if not loop.wait_count(args.settle, timeout=60):
                    raise RuntimeError(f"producer stalled: {loop.error!r}")
                victim = loop.last_broker
                assert victim is not None
                endpoint = cluster[victim].endpoint("amqp")
                probe = EofProbe(endpoint.host, endpoint.port)
                rec.marks = []
                rec.armed = True
                t_kill = time.monotonic()
                cluster[victim].kill()
                switch = loop.first_switch_after(t_kill, victim, timeout=60.0)
                rec.armed = False
                eof = probe.wait(5.0)
                probe.close()
                if switch is None:
                    raise RuntimeError(f"no acceptance elsewhere within 60 s: {loop.error!r}")
                timelines.append(timeline(rec.marks, t_kill, eof, switch[0]))
                log(
                    f"kill {n + 1}/{args.kills}: node {victim} -> {switch[1]} in "
                    f"{timelines[-1]['send() returns']:.2f} ms"
                )
                loop.pause()
                cluster[victim].start()
                loop.resume()
        finally:
            loop.stop()
            driver.conn.close()
    report(timelines)  # printed by table()
    if args.json:
        args.json.write_text(json.dumps(timelines, indent=2) + "\n")
    return timelines


if __name__ == "__main__":
    threading.current_thread().name = "probe"
    main()
