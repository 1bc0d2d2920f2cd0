"""OpenTelemetry: a span per delivery linked to its producer, the consumer metrics, the gauges,
failovers as span events, and nothing imported without the extra."""

from __future__ import annotations

import subprocess
import sys
import threading

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import (
    TraceContextTextMapPropagator,
)
from otel_support import Sink
from test_manager_support import A, B, make, running

from failover_client import Event, FailedOver, HandlerError, Message, Rebalanced
from failover_client.otel import instrument

CONSUMED = "messaging.client.consumed.messages"
PROCESS = "messaging.process.duration"
TOPOLOGY = "failover_client.topology.size"
PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""A producer's traceparent (the W3C specification's example)."""


def _instrument(conn: object, sink: Sink) -> None:
    instrument(
        conn,  # type: ignore[arg-type]
        tracer_provider=sink.tracer_provider,
        meter_provider=sink.meter_provider,
        propagator=TraceContextTextMapPropagator(),
        messaging_system="activemq",
    )


def test_a_handler_runs_inside_a_process_span_linked_to_the_producer() -> None:
    rig = make((A,))
    sink = Sink()
    _instrument(rig.conn, sink)
    current: list[trace.Span] = []
    handled = threading.Event()

    def handler(message: Message) -> None:
        current.append(trace.get_current_span())
        handled.set()

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.connector.session(A).deliver("s1", b"x", headers={"traceparent": PRODUCER})
        assert handled.wait(5)
        assert rig.connector.wait_until(lambda: len(sink.finished("process")) == 1)
    [span] = sink.finished("process")
    assert span.name == "process /queue/in"
    assert span.kind is SpanKind.CONSUMER
    assert current[0].get_span_context().span_id == span.get_span_context().span_id
    [link] = span.links
    assert f"{link.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{link.context.span_id:016x}" == "b7ad6b7169203331"
    assert span.attributes is not None
    assert span.attributes["messaging.system"] == "activemq"
    assert span.attributes["messaging.destination.subscription.name"] == "s1"
    assert span.attributes["server.address"] == "a"
    assert sink.total(CONSUMED, {"messaging.operation.name": "process"}) == 1
    assert sink.total(PROCESS, {"messaging.destination.name": "/queue/in"}) == 1


def test_a_handler_that_raises_ends_its_span_with_the_error() -> None:
    rig = make((A,))
    sink = Sink()
    _instrument(rig.conn, sink)

    def handler(message: Message) -> None:
        raise ValueError("bad order")

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.connector.session(A).deliver("s1", b"x")
        rig.events.wait_for(HandlerError)
        assert rig.connector.wait_until(lambda: len(sink.finished("process")) == 1)
    [span] = sink.finished("process")
    assert span.status.status_code is StatusCode.ERROR
    assert span.links == ()  # no trace context on the message: nothing to link
    assert sink.total(PROCESS, {"error.type": "ValueError"}) == 1


def test_a_pulled_message_is_a_receive_span_linked_to_the_producer() -> None:
    rig = make((A,))
    sink = Sink()
    _instrument(rig.conn, sink)
    with running(rig):
        subscription = rig.conn.subscribe("/queue/in", id="p1")
        rig.connector.session(A).deliver("p1", b"x", headers={"traceparent": PRODUCER})
        assert subscription.receive(5) is not None
    [span] = sink.finished("receive")
    assert span.name == "receive /queue/in"
    assert span.kind is SpanKind.CONSUMER
    assert len(span.links) == 1
    assert sink.total(CONSUMED, {"messaging.operation.name": "receive"}) == 1


def test_a_failover_while_a_handler_runs_is_an_event_on_its_span() -> None:
    rig = make((A, B))
    sink = Sink()
    _instrument(rig.conn, sink)
    release = threading.Event()
    started = threading.Event()
    failed_over = threading.Event()

    def handler(message: Message) -> None:
        started.set()
        rig.clock.wait(release, None)  # ends: the test sets it once the failover was heard

    def heard(event: Event) -> None:
        if isinstance(event, FailedOver):
            failed_over.set()  # after the instrumentation's listener (added earlier)

    with running(rig):
        rig.conn.subscribe("/queue/in", handler, id="s1")
        rig.conn.add_listener(heard)
        rig.connector.session(A).deliver("s1", b"x")
        assert started.wait(5)
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        assert failed_over.wait(5)
        release.set()
        assert rig.connector.wait_until(lambda: len(sink.finished("process")) == 1)
    [span] = sink.finished("process")
    [event] = [e for e in span.events if e.name == "failover_client.failover"]
    assert event.attributes is not None
    assert event.attributes["failover_client.broker.from"] == "a:61613"
    assert event.attributes["failover_client.broker.to"] == "b:61613"


def test_gauges_show_the_window_the_broker_and_the_topology() -> None:
    rig = make((A, B), auto_confirm=False)
    sink = Sink()
    _instrument(rig.conn, sink)
    with running(rig):
        rig.conn.send_async("/queue/q", b"x")
        rig.conn.send_async("/queue/q", b"y")
        assert sink.total("failover_client.in_flight") == 2
        [broker] = sink.points("failover_client.broker.current")
        assert dict(broker.attributes) == {
            "messaging.system": "activemq",
            "messaging.client.id": "c",
            "server.address": "a",
            "server.port": 61613,
        }
        assert sink.total("failover_client.topology.size") == 2
        rig.connector.session(A).confirm()
        assert sink.total("failover_client.in_flight") == 0


def test_two_connections_on_one_meter_are_both_in_the_gauges() -> None:
    first, second = make((A,)), make((A, B))
    second.conn = type(second.conn)(
        (A, B), connector=second.connector, clock=second.clock, client_id="other"
    )
    sink = Sink()
    _instrument(first.conn, sink)
    telemetry = instrument(second.conn, meter_provider=sink.meter_provider)
    sizes = {p.attributes["messaging.client.id"]: p.value for p in sink.points(TOPOLOGY)}
    assert sizes == {"c": 1, "other": 2}
    telemetry.close()
    sizes = {p.attributes["messaging.client.id"]: p.value for p in sink.points(TOPOLOGY)}
    assert sizes == {"c": 1}
    first.conn.close()
    second.conn.close()


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_library_imports_no_opentelemetry_unless_asked() -> None:
    result = _run(
        "import sys, failover_client, failover_client.stomp, failover_client.testing\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_the_extra_importing_otel_names_it() -> None:
    # OpenTelemetry hidden from the import system: what a user without the extra sees.
    result = _run(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from failover_client import ConfigurationError\n"
        "try:\n"
        "    import failover_client.otel\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'failover-client[otel]'" in result.stdout


def test_a_rebalance_heard_while_a_send_is_unconfirmed_is_an_event_on_its_span() -> None:
    rig = make((A, B), auto_confirm=False)
    sink = Sink()
    telemetry = instrument(
        rig.conn, tracer_provider=sink.tracer_provider, meter_provider=sink.meter_provider
    )
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        # What the connection's listener hears when the loop moves it (see _loop's _move).
        telemetry._metrics(Rebalanced(str(A), str(B)))
        rig.connector.session(A).confirm()
        assert future.result(5) is None
    [span] = sink.finished("send")
    [event] = [e for e in span.events if e.name == "failover_client.rebalance"]
    assert dict(event.attributes or {}) == {
        "failover_client.broker.from": "a:61613",
        "failover_client.broker.to": "b:61613",
    }
