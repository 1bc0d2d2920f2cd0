"""OpenTelemetry: a span per send, trace context in its headers, the send metrics."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import (
    TraceContextTextMapPropagator,
)
from otel_support import Sink
from test_manager_support import A, B, make, running

from failover_client import ConfigurationError, FailedOver, SendRejected
from failover_client.otel import Instrumentation, instrument
from failover_client.testing import FakeClock

SENT = "messaging.client.sent.messages"
DURATION = "messaging.client.operation.duration"


def _instrument(rig_conn: object, sink: Sink, clock: FakeClock | None = None) -> Instrumentation:
    return instrument(
        rig_conn,  # type: ignore[arg-type]
        tracer_provider=sink.tracer_provider,
        meter_provider=sink.meter_provider,
        propagator=TraceContextTextMapPropagator(),
        clock=clock,
    )


def test_each_confirmed_send_is_a_producer_span_whose_context_travels_in_its_headers() -> None:
    rig = make((A, B))
    sink = Sink()
    _instrument(rig.conn, sink, rig.clock)
    with running(rig):
        for number in range(3):
            rig.conn.send("/queue/q", b"m%d" % number)
        sent = rig.connector.session(A).sent
    spans = sink.finished("send")
    assert [s.name for s in spans] == ["send /queue/q"] * 3
    for span, message in zip(spans, sent, strict=True):
        assert span.kind is SpanKind.PRODUCER
        context = span.get_span_context()
        assert message.headers["traceparent"] == (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        )
        assert span.attributes is not None
        assert dict(span.attributes) == {
            "messaging.system": "stomp",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": "/queue/q",
            "messaging.client.id": "c",
            "messaging.message.id": message.message_id,
            "server.address": "a",
            "server.port": 61613,
        }
        assert span.status.status_code is StatusCode.UNSET
    where = {"server.address": "a", "messaging.destination.name": "/queue/q"}
    assert sink.total(SENT, where, without="error.type") == 3
    assert sink.total(DURATION, {"messaging.operation.name": "send"}) == 3


def test_a_send_inside_an_application_span_is_its_child() -> None:
    rig = make((A,))
    sink = Sink()
    _instrument(rig.conn, sink)
    tracer = sink.tracer_provider.get_tracer("app")
    with running(rig), tracer.start_as_current_span("order") as parent:
        rig.conn.send("/queue/q", b"x")
    [span] = sink.finished("send")
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id


def test_a_rejected_send_ends_its_span_with_the_error_and_counts_with_its_type() -> None:
    rig = make((A,), auto_confirm=False)
    sink = Sink()
    _instrument(rig.conn, sink)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        assert sink.finished() == []  # open until the broker answers
        rig.connector.session(A).reject(1)
        with pytest.raises(SendRejected):
            future.result(5)
    [span] = sink.finished("send")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "SendRejected"
    assert sink.total(SENT, {"error.type": "SendRejected"}) == 1
    assert sink.total(SENT, without="error.type") == 0


def test_a_send_resent_after_a_failover_carries_the_event_and_the_failover_is_measured() -> None:
    rig = make((A, B), auto_confirm=False)
    sink = Sink()
    _instrument(rig.conn, sink)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        session_a = rig.connector.session(A)
        [first] = session_a.sent
        rig.connector.behave(A, "refuse")
        session_a.kill()
        rig.events.wait_for(FailedOver)
        session_b = rig.connector.session(B)
        [again] = session_b.sent
        # The re-sent message is the same message: the same trace context.
        assert again.headers["traceparent"] == first.headers["traceparent"]
        session_b.confirm()
        assert future.result(5) is None
    [span] = sink.finished("send")
    [event] = [e for e in span.events if e.name == "failover_client.resent"]
    assert dict(event.attributes or {}) == {
        "failover_client.broker.from": "a:61613",
        "failover_client.broker.to": "b:61613",
    }
    assert span.attributes is not None
    assert span.attributes["server.address"] == "b"  # the broker that confirmed it
    assert sink.total("failover_client.failover.duration", {"server.address": "b"}) == 1
    assert sink.total(SENT, without="error.type") == 1


def test_fire_and_forget_sends_end_at_their_write() -> None:
    rig = make((A,), auto_confirm=False)
    sink = Sink()
    _instrument(rig.conn, sink)
    with running(rig):
        rig.conn.send("/queue/q", b"x", confirm=False)
        [message] = rig.connector.session(A).sent
        assert "traceparent" in message.headers
    [span] = sink.finished("send")
    assert span.status.status_code is StatusCode.UNSET
    assert sink.total(SENT, without="error.type") == 1


def test_no_secret_of_the_uri_reaches_an_attribute() -> None:
    from failover_client.engine._connection import FailoverConnection  # noqa: PLC0415
    from failover_client.testing import FakeConnector  # noqa: PLC0415

    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    conn = FailoverConnection(
        "failover:(stomp://alice:s3cret@a:61613)", connector=connector, clock=clock
    )
    sink = Sink()
    _instrument(conn, sink)
    with conn:
        conn.send("/queue/q", b"x")
    sink.meter_provider.force_flush()
    texts = [repr(dict(s.attributes or {})) for s in sink.finished()]
    texts += [repr(dict(p.attributes)) for p in sink.points(SENT)]
    assert texts
    assert not [t for t in texts if "s3cret" in t or "alice" in t]


def test_instrumenting_twice_is_refused_and_close_removes_the_observer() -> None:
    rig = make((A,))
    sink = Sink()
    first = _instrument(rig.conn, sink)
    with pytest.raises(ConfigurationError, match="already has an observer"):
        _instrument(rig.conn, sink)
    first.close()
    assert rig.conn.observer is None
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        [message] = rig.connector.session(A).sent
    assert "traceparent" not in message.headers
    assert sink.finished() == []
    _instrument(rig.conn, Sink())  # may be instrumented again
