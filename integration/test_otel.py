"""OpenTelemetry against real brokers: traces and metrics of sends and deliveries across a
SIGKILL failover, over STOMP (ActiveMQ Classic) and AMQP 1.0 (RabbitMQ).

A producer and a consumer connection, each instrumented, share one in-memory span exporter
and metric reader. The consumer's handler holds one message while the broker both are on is
killed, so a process span is open during the failover. What must hold: every process span
links to the send span of its message (the trace context crossed the broker in STOMP headers /
AMQP application properties, and a redelivery or a re-send keeps it); the held message's span
carries the failover as an event; each connection recorded one failover duration; and the
counters equal what the application itself counted: sends confirmed, messages handled.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from failover_client import FailedOver, FailoverConnection, Message
from failover_client.otel import instrument
from failover_client.testing.brokers import Cluster
from integration.test_examples import Program
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    broker_at,
    credentials,
    durable_queue,
    failover_uri,
    send_destination,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
# The unit tests' helper (in-memory exporter and reader), from their folder.
from otel_support import Sink

pytestmark = pytest.mark.integration

BATCH = 20


class Handler:
    """Counts what it handles; holds the message ``hold`` until released."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.handled: list[str] = []
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, message: Message) -> None:
        body = message.body.decode()
        if body == "hold":
            self.holding.set()
            # Ends: the test releases it once both connections failed over (or at SAFETY).
            self.release.wait(SAFETY)
        with self.cond:
            self.handled.append(body)
            self.cond.notify_all()

    def wait_for(self, bodies: set[str]) -> None:
        with self.cond:
            self.cond.wait_for(lambda: bodies <= set(self.handled), SAFETY)
            missing = bodies - set(self.handled)
        assert not missing, f"never handled {sorted(missing)[:5]}"


@pytest.fixture(params=["activemq-stomp", "rabbitmq-amqp"])
def target(request: pytest.FixtureRequest) -> tuple[Cluster, str]:
    kind, endpoint = request.param.split("-")
    return request.getfixturevalue(f"{kind}_cluster"), endpoint


def test_traces_and_metrics_across_a_sigkill_failover(target: tuple[Cluster, str]) -> None:
    cluster, endpoint = target
    destination = send_destination(cluster[0], durable_queue(cluster))
    uri = failover_uri(cluster, FAST, endpoint=endpoint)
    sink = Sink()
    producer_events, consumer_events = Events(), Events()
    producer = FailoverConnection(uri, client_id="producer", **credentials(cluster))
    consumer = FailoverConnection(uri, client_id="consumer", **credentials(cluster))
    for conn, events in ((producer, producer_events), (consumer, consumer_events)):
        instrument(
            conn,
            tracer_provider=sink.tracer_provider,
            meter_provider=sink.meter_provider,
            messaging_system="activemq" if endpoint == "stomp" else "rabbitmq",
        )
        conn.add_listener(events)  # after the instrumentation's listener: it heard first
        conn.connect()
    handler = Handler()
    confirmed = 0
    try:
        consumer.subscribe(destination, handler)
        before = {f"m-{i}" for i in range(BATCH)}
        for body in sorted(before):
            producer.send(destination, body)
            confirmed += 1
        handler.wait_for(before)
        producer.send(destination, "hold")
        confirmed += 1
        assert handler.holding.wait(SAFETY)
        victim = broker_at(cluster, producer.broker)
        assert broker_at(cluster, consumer.broker) is victim  # both on the first broker
        victim.kill()
        producer_events.wait_for(FailedOver)
        consumer_events.wait_for(FailedOver)
        handler.release.set()
        after = {f"n-{i}" for i in range(BATCH)}
        for body in sorted(after):
            producer.send(destination, body)
            confirmed += 1
        handler.wait_for(after)
    finally:
        handler.release.set()
        producer.close()
        consumer.close()
    with handler.cond:
        handled = list(handler.handled)

    sends = sink.finished("send ")
    assert len(sends) == confirmed
    by_id = {}
    for span in sends:
        assert span.attributes is not None
        by_id[span.attributes["messaging.message.id"]] = span.get_span_context()
    processes = sink.wait_spans("process ", len(handled))
    assert len(processes) == len(handled)
    for span in processes:
        assert span.attributes is not None
        [link] = span.links
        sent = by_id[span.attributes["messaging.message.id"]]
        assert (link.context.trace_id, link.context.span_id) == (sent.trace_id, sent.span_id)
    hold = sends[BATCH].attributes["messaging.message.id"] if sends[BATCH].attributes else None
    held = [s for s in processes if s.attributes and s.attributes["messaging.message.id"] == hold]
    assert held
    events = [e for e in held[0].events if e.name == "failover_client.failover"]
    assert len(events) == 1
    assert events[0].attributes is not None
    moved_to = events[0].attributes["failover_client.broker.to"]
    assert moved_to != events[0].attributes["failover_client.broker.from"]

    sent_ok = sink.total("messaging.client.sent.messages", without="error.type")
    assert sent_ok == confirmed
    assert sink.total("messaging.client.sent.messages", {"error.type": "SendFailure"}) == 0
    assert sink.total("messaging.client.consumed.messages") == len(handled)
    assert sink.total("messaging.process.duration") == len(handled)
    for client in ("producer", "consumer"):
        where = {"messaging.client.id": client}
        assert sink.total("failover_client.failover.duration", where) == 1
    survivor = next(b for b in cluster if b is not victim)
    last = sends[-1].attributes
    assert last is not None
    assert last["server.port"] == survivor.endpoints[endpoint].port
    assert moved_to.endswith(f":{survivor.endpoints[endpoint].port}")


def _scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value of every sample on the example's /metrics page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SAFETY) as page:
        text = page.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _sum(samples: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in samples.items() if k.split("{")[0] == prefix)


def test_the_prometheus_example_shows_the_failover(activemq_cluster: Cluster) -> None:
    cluster = activemq_cluster
    destination = durable_queue(cluster)
    with socket.socket() as probe:  # a free port for /metrics (released just before use)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    program = Program(
        "otel_prometheus.py",
        "--uri",
        failover_uri(cluster, FAST),
        "--destination",
        destination,
        "--port",
        str(port),
        "--interval",
        "0.02",
    )
    try:
        program.wait_for_line(r"^confirmed \d+$", count=20)
        before = _scrape(port)
        assert _sum(before, "messaging_client_sent_messages_total") >= 20
        assert _sum(before, "failover_client_failover_duration_seconds_count") == 0
        [(current, _)] = [
            (k, v) for k, v in before.items() if k.startswith("failover_client_broker_current")
        ]
        victim = next(b for b in cluster if f'server_port="{b.endpoints["stomp"].port}"' in current)
        confirmed = len(program.matching(r"^confirmed \d+$"))
        victim.kill()
        program.wait_for_line(r"^confirmed \d+$", count=confirmed + 20)
        after = _scrape(port)
        assert _sum(after, "failover_client_failover_duration_seconds_count") == 1
        [current_after] = [k for k in after if k.startswith("failover_client_broker_current")]
        assert f'server_port="{victim.endpoints["stomp"].port}"' not in current_after
        program.process.send_signal(signal.SIGINT)
        assert program.finish() == 0, program.report()
        sent = _sum(after, "messaging_client_sent_messages_total")
        assert sent <= len(program.matching(r"^confirmed \d+$"))
    finally:
        program.stop()
