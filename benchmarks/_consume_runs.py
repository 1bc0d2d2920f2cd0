"""The runs of the consumption benchmark: one target (broker and protocol), one consumer each.

A :class:`Target` knows how to make a fresh queue on its broker, fill it, drain what is left and
what a consumer process needs to reach it. The three runners (slow handler, close under a
backlog, fast-handler throughput) start one consumer process each and return plain data;
``bench_consume.py`` turns it into tables and checks it against the targets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from benchmarks._common import log
from benchmarks._consume_io import (
    Child,
    StompProducer,
    amqp_ids,
    amqp_produce,
    cpu_seconds,
    stomp_ids,
)
from failover_client.engine._autoack import ack_batch
from failover_client.testing.brokers import Broker

SLOW_HANDLER = 0.020  # seconds per message
BIG = 4096  # bytes per message of the slow-handler and close runs
SMALL = 1024  # bytes per message of the throughput runs
PREFETCH = 100  # the library's default prefetch, and the raw clients' in their bounded cases


@dataclass
class Target:
    """One broker and the protocol the consumers speak to it."""

    name: str  # "ActiveMQ STOMP", "RabbitMQ STOMP", "RabbitMQ AMQP"
    broker: Broker
    protocol: str  # "stomp" | "amqp"

    @property
    def rabbit(self) -> bool:
        return self.broker.vhost is not None

    def new_queue(self) -> tuple[str, str]:
        """(queue name, destination the clients use) of a fresh, empty queue."""
        name = f"bench.consume.{uuid.uuid4().hex[:8]}"
        if self.rabbit:
            # /amq/queue/<name> addresses an existing queue over STOMP and AMQP alike; declared
            # durable first, so no client's SUBSCRIBE or attach declares it differently.
            self.broker.declare_queue(name)  # type: ignore[attr-defined]
            return name, f"/amq/queue/{name}"
        return name, f"/queue/{name}"

    def produce(self, dest: str, size: int, rate: float, seconds: float, count: int = 0) -> int:
        """Offer messages; how many the broker has taken (ids 0 .. n-1)."""
        if self.protocol == "amqp":
            return amqp_produce(self.broker, dest, size, rate, seconds, count)
        producer = StompProducer(self.broker)
        try:
            return producer.offer(dest, size, rate, seconds, count)
        finally:
            producer.close()

    def left(self, queue: str, dest: str, idle: float = 2.0) -> list[str]:
        """The ids of every message still on the broker (the queue is emptied)."""
        if self.protocol == "amqp":
            return amqp_ids(self.broker, queue, idle)
        return stomp_ids(self.broker, dest, idle)

    def left_checked(self, queue: str, dest: str, sent: int, handled: list[str]) -> list[str]:
        """``left``, drained once more, slowly, when ids seem missing: a loss is counted only
        when a second look at the queue does not find them either."""
        found = self.left(queue, dest)
        if _accounting(sent, handled, found)["lost"]:
            log(f"{self.name}: ids missing after the drain; draining {queue} again")
            found += self.left(queue, dest, idle=5.0)
        return found

    def config(self, client: str, dest: str, **extra: Any) -> dict[str, Any]:
        """What a consumer process needs: the client, how to reach the broker, the queue."""
        login, passcode = self.broker.credentials or (None, None)
        ep = self.broker.endpoint(self.protocol)
        cfg: dict[str, Any] = {"client": client, "dest": dest, "login": login, "passcode": passcode}
        if client == "fc":
            member = self.broker.uri(self.protocol)
            if self.broker.vhost:
                member += f"?vhost={self.broker.vhost}"
            cfg["uri"] = f"failover:({member})?randomize=false"
        elif client == "stomp":
            cfg |= {"host": ep.host, "port": ep.port, "vhost": self.broker.vhost}
        else:
            cfg["url"] = self.broker.uri("amqp")
        return cfg | extra


@dataclass(frozen=True)
class Case:
    """One consumer: which client, which ack mode, and its flow-control setting."""

    label: str
    client: str  # fc | stomp | proton
    ack: str = "auto"
    prefetch: int = 0  # fc: passed when the library takes it; stomp: the brokers' headers
    credit: int = 0  # proton: 0 = MessagingHandler defaults
    ack_every: int = 0  # stomp ``client``: one cumulative ACK per this many messages

    def extra(self) -> dict[str, Any]:
        return {
            "ack": self.ack,
            "prefetch": self.prefetch,
            "credit": self.credit,
            "ack_every": self.ack_every,
        }


def slow_cases(protocol: str) -> list[Case]:
    ours = [
        Case(f"ours ack={a}", "fc", a, PREFETCH) for a in ("auto", "client", "client-individual")
    ]
    if protocol == "amqp":
        return [
            *ours,
            Case("raw proton, default prefetch (10)", "proton"),
            Case("raw proton, credit 100, accepted after handler", "proton", credit=PREFETCH),
        ]
    return [
        *ours,
        Case("raw stomp.py ack=auto", "stomp"),
        Case("raw stomp.py client-individual, prefetch 100", "stomp", "client-individual", 100),
    ]


def _accounting(sent: int, handled_ids: list[str], left_ids: list[str]) -> dict[str, Any]:
    """Every sent id is handled or still on the broker; what is neither was lost."""
    handled, left = set(handled_ids), set(left_ids)
    missing = [i for i in range(sent) if str(i) not in handled and str(i) not in left]
    return {
        "sent": sent,
        "handled": len(handled_ids),
        "left_on_broker": len(left_ids),
        "lost": len(missing),
        "lost_sample": missing[:10],
        "duplicates": len(handled_ids) + len(left_ids) - len(handled | left),
    }


def run_slow(target: Target, case: Case, rate: float, seconds: float) -> dict[str, Any]:
    """A slow handler under a producer offering ``rate`` 4 KiB messages/s for ``seconds``."""
    queue, dest = target.new_queue()
    cfg = target.config(case.client, dest, delay=SLOW_HANDLER, ids=True, **case.extra())
    child = Child(cfg)
    try:
        sent = target.produce(dest, BIG, rate, seconds)
        report = child.command("report", 30.0) or {}
        child.stop_sampling()
        final = child.command("exit", 30.0) or {}
    finally:
        child.kill()
    left = target.left_checked(queue, dest, sent, final.get("handled_ids", []))
    out = {
        "target": target.name,
        "case": case.label,
        "offered_rate": rate,
        "seconds": seconds,
        "growth_mb": child.growth_mb(),
        "baseline_mb": round(child.baseline / 1024, 1),
        "held_in_client": report.get("held"),
        "rss_samples_kib": child.samples,
        **_accounting(sent, final.get("handled_ids", []), left),
    }
    log(
        f"slow {target.name:15} {case.label:48} growth {out['growth_mb']:7.1f} MB "
        f"held {out['held_in_client']} handled {out['handled']} left {out['left_on_broker']} "
        f"lost {out['lost']}"
    )
    return out


def run_close(
    target: Target, ack: str, drain: float, rate: float, fill: float, deadline: float
) -> dict[str, Any]:
    """close() (``drain`` 0) or close(drain=...) while the slow handler has a full buffer."""
    queue, dest = target.new_queue()
    case = Case(f"ours ack={ack}", "fc", ack, PREFETCH)
    cfg = target.config(
        "fc", dest, delay=SLOW_HANDLER, ids=True, close_deadline=deadline, **case.extra()
    )
    child = Child(cfg)
    try:
        sent = target.produce(dest, BIG, rate, fill)
        result = child.command(f"close {drain}", drain + 60.0) or {"error": "no answer"}
    finally:
        child.kill()
    left = target.left_checked(queue, dest, sent, result.get("handled_ids", []))
    accounting = _accounting(sent, result.get("handled_ids", []), left)
    acked = set(result.get("acked_ids", []))
    out = {
        "target": target.name,
        "case": case.label,
        "drain": drain,
        "held_at_close": result.get("held"),
        "handled_before_close": result.get("handled_before_close"),
        "close_seconds": result.get("close_seconds"),
        "close_returned": result.get("close_returned"),
        "close_error": result.get("close_error"),
        # the handler's own acks of ids it did not handle (0 by construction), plus every id
        # neither handled nor on the broker: acknowledged (auto or by the library) unhandled
        "acknowledged_unhandled": len(acked - set(result.get("handled_ids", [])))
        + accounting["lost"],
        **accounting,
    }
    log(
        f"close {target.name:15} {case.label:24} drain={drain} took {out['close_seconds']} s "
        f"returned {out['close_returned']} {out['close_error'] or ''} handled {out['handled']} "
        f"left {out['left_on_broker']} lost {out['lost']}"
    )
    return out


def throughput_pairs(protocol: str, prefetch: int = PREFETCH) -> list[tuple[Case, Case]]:
    """(ours, the raw client it is compared with), same ack mode and prefetch."""
    every = ack_batch(prefetch)  # our ``auto``'s cadence: half the window, at most 100
    if protocol == "amqp":
        return [
            (Case("ours ack=auto", "fc", "auto", prefetch), Case("raw proton default", "proton")),
            (
                Case("ours ack=client-individual", "fc", "client-individual", prefetch),
                Case(f"raw proton credit {prefetch}", "proton", credit=prefetch),
            ),
        ]
    return [
        (Case("ours ack=auto", "fc", "auto", prefetch), Case("raw stomp.py ack=auto", "stomp")),
        # Our ``auto`` on the wire: ``client`` mode, the prefetch, one cumulative ACK per half
        # window; the same guarantees written by hand with stomp.py.
        (
            Case("ours ack=auto", "fc", "auto", prefetch),
            Case(
                f"raw stomp.py client, ACK every {every}",
                "stomp",
                "client",
                prefetch,
                ack_every=every,
            ),
        ),
        (
            Case("ours ack=client-individual", "fc", "client-individual", prefetch),
            Case("raw stomp.py client-individual", "stomp", "client-individual", prefetch),
        ),
    ]


@dataclass(frozen=True)
class Throughput:
    """One throughput run: rate, and CPU microseconds per message of the consumer process
    (first message to last) and of the broker (consumer started to last message)."""

    rate: float | None
    cpu_us: float | None
    broker_cpu_us: float | None


def run_throughput(target: Target, case: Case, count: int) -> Throughput:
    """How fast a no-op handler consumed ``count`` pre-queued 1 KiB messages (see
    :class:`Throughput`). The broker's CPU includes the consumer's connect and subscribe (a
    few milliseconds of a run of seconds) and whatever else the broker did meanwhile (its
    statistics timers; nothing else uses it during the run)."""
    queue, dest = target.new_queue()
    sent = target.produce(dest, SMALL, 0.0, 0.0, count=count)
    cfg = target.config(case.client, dest, count=sent, **case.extra())
    broker_before = cpu_seconds(target.broker.pid)
    child = Child(cfg)
    try:
        result = child.command("wait 120", 130.0) or {}
        broker_after = cpu_seconds(target.broker.pid)
    finally:
        child.kill()
    seconds = result.get("seconds_to_count")
    rate = None if not seconds else (sent - 1) / seconds
    cpu = result.get("cpu_seconds_to_count")
    cpu_us = None if cpu is None or sent < 2 else round(cpu / (sent - 1) * 1e6, 1)
    broker_us = None
    if broker_before is not None and broker_after is not None and sent and seconds:
        broker_us = round((broker_after - broker_before) / sent * 1e6, 1)
    log(
        f"throughput {target.name:15} {case.label:36} {rate or 0:9,.0f} msg/s  {cpu_us} us "
        f"CPU/msg, broker {broker_us} us/msg"
    )
    if result.get("handled", 0) < sent:
        target.left(queue, dest)  # empty the queue of a run that fell short
    return Throughput(rate, cpu_us, broker_us)
