"""Spans and per-message metrics: the connection's observer (``engine._observe.Observer``).

A send is a PRODUCER span ``send <destination>`` from the application's hand-over to the
broker's confirmation (a fire-and-forget send: to its write); its context goes out in the
message's headers (W3C ``traceparent`` / ``tracestate``, through the configured propagator), which
STOMP carries as headers and AMQP as application properties. A handler call is a CONSUMER span
``process <destination>``, current while the handler runs (the handler's own spans are its
children), a message handed out by ``receive()`` a CONSUMER span ``receive <destination>``; both
carry a link to the producer's span read from the message. A re-send to another broker is an
event on the send's span; a failover or rebalance heard while spans are open is an event on each.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping
from contextvars import Token
from dataclasses import dataclass

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import Counter, Histogram, Meter
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from failover_client._clock import Clock
from failover_client.engine._subscriptions import Message
from failover_client.otel import _names as n
from failover_client.uri import BrokerAddress

__all__ = ["Instruments", "Telemetry", "where"]

Attributes = dict[str, AttributeValue]


def where(broker: BrokerAddress | None) -> Attributes:
    """``server.address`` (the host only: never a user or password) and ``server.port``."""
    if broker is None:
        return {}
    return {n.SERVER_ADDRESS: broker.host, n.SERVER_PORT: broker.port}


@dataclass(frozen=True)
class Instruments:
    """The per-message instruments (the conventions' four)."""

    sent: Counter
    consumed: Counter
    operation_duration: Histogram
    process_duration: Histogram

    @classmethod
    def on(cls, meter: Meter) -> Instruments:
        return cls(
            sent=meter.create_counter(
                n.SENT_MESSAGES,
                unit="{message}",
                description="Number of messages producer attempted to send to the broker.",
            ),
            consumed=meter.create_counter(
                n.CONSUMED_MESSAGES,
                unit="{message}",
                description="Number of messages that were delivered to the application.",
            ),
            operation_duration=meter.create_histogram(
                n.OPERATION_DURATION,
                unit="s",
                description="Duration of messaging operation initiated by a producer or "
                "consumer client.",
                explicit_bucket_boundaries_advisory=n.BUCKETS,
            ),
            process_duration=meter.create_histogram(
                n.PROCESS_DURATION,
                unit="s",
                description="Duration of processing operation.",
                explicit_bucket_boundaries_advisory=n.BUCKETS,
            ),
        )


class OpenSpans:
    """The spans not yet ended: what a failover or rebalance heard meanwhile is added to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: set[Span] = set()

    def add(self, span: Span) -> None:
        with self._lock:
            self._spans.add(span)

    def discard(self, span: Span) -> None:
        with self._lock:
            self._spans.discard(span)

    def event(self, name: str, attributes: Attributes) -> None:
        with self._lock:
            spans = list(self._spans)
        for span in spans:
            span.add_event(name, attributes)


class Telemetry:
    """Implements the engine's ``Observer`` with spans and the per-message metrics."""

    def __init__(
        self,
        *,
        tracer: Tracer,
        instruments: Instruments,
        propagator: TextMapPropagator,
        clock: Clock,
        system: str,
        client_id: str,
    ) -> None:
        self._tracer = tracer
        self.instruments = instruments
        self._propagator = propagator
        self._clock = clock
        self.system = system
        self._client_id = client_id
        self.open = OpenSpans()

    def _base(self, operation: str, kind: str, destination: str) -> Attributes:
        return {
            n.MESSAGING_SYSTEM: self.system,
            n.MESSAGING_OPERATION_NAME: operation,
            n.MESSAGING_OPERATION_TYPE: kind,
            n.MESSAGING_DESTINATION_NAME: destination,
        }

    # --- sends -----------------------------------------------------------------------------

    def sending(
        self, destination: str, headers: MutableMapping[str, str], message_id: str | None
    ) -> _Send:
        attributes = self._base("send", "send", destination)
        span_attributes = dict(attributes)
        span_attributes[n.MESSAGING_CLIENT_ID] = self._client_id
        if message_id is not None:
            span_attributes[n.MESSAGING_MESSAGE_ID] = message_id
        span = self._tracer.start_span(
            f"send {destination}", kind=SpanKind.PRODUCER, attributes=span_attributes
        )
        self._propagator.inject(headers, context=trace.set_span_in_context(span))
        self.open.add(span)
        return _Send(self, span, attributes, self._clock.monotonic())

    # --- deliveries ------------------------------------------------------------------------

    def _consumer_span(
        self, operation: str, message: Message, broker: BrokerAddress | None
    ) -> tuple[Span, Attributes]:
        attributes = self._base(operation, operation, message.destination)
        attributes[n.MESSAGING_SUBSCRIPTION_NAME] = message.subscription.id
        attributes.update(where(broker))
        span_attributes = dict(attributes)
        span_attributes[n.MESSAGING_CLIENT_ID] = self._client_id
        span_attributes[n.MESSAGING_BODY_SIZE] = len(message.body)
        if message.message_id is not None:
            span_attributes[n.MESSAGING_MESSAGE_ID] = message.message_id
        span = self._tracer.start_span(
            f"{operation} {message.destination}",
            kind=SpanKind.CONSUMER,
            attributes=span_attributes,
            links=self._producer_links(message.headers),
        )
        self.instruments.consumed.add(1, attributes)
        return span, attributes

    def _producer_links(self, headers: Mapping[str, str]) -> list[Link]:
        producer = trace.get_current_span(self._propagator.extract(headers)).get_span_context()
        return [Link(producer)] if producer.is_valid else []

    def handling(self, message: Message, broker: BrokerAddress | None) -> _Process:
        span, attributes = self._consumer_span("process", message, broker)
        token = otel_context.attach(trace.set_span_in_context(span))
        self.open.add(span)
        return _Process(self, span, attributes, token, self._clock.monotonic())

    def received(self, message: Message, broker: BrokerAddress | None) -> None:
        span, _ = self._consumer_span("receive", message, broker)
        span.end()

    # --- outcomes --------------------------------------------------------------------------

    def end(
        self,
        span: Span,
        error: BaseException | None,
        attributes: Attributes,
        histogram: Histogram,
        started: float,
    ) -> None:
        if error is not None:
            attributes[n.ERROR_TYPE] = type(error).__qualname__
            span.set_attribute(n.ERROR_TYPE, type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        histogram.record(max(0.0, self._clock.monotonic() - started), attributes)
        self.open.discard(span)
        span.end()


class _Send:
    """One send's span and metrics (``SendObservation``)."""

    __slots__ = ("_attributes", "_span", "_started", "_telemetry")

    def __init__(
        self, telemetry: Telemetry, span: Span, attributes: Attributes, started: float
    ) -> None:
        self._telemetry = telemetry
        self._span = span
        self._attributes = attributes
        self._started = started

    def resent(self, from_broker: BrokerAddress | None, to_broker: BrokerAddress) -> None:
        attributes: Attributes = {n.BROKER_TO: to_broker.key}
        if from_broker is not None:
            attributes[n.BROKER_FROM] = from_broker.key
        self._span.add_event(n.EVENT_RESENT, attributes)

    def finished(self, error: BaseException | None, broker: BrokerAddress | None) -> None:
        telemetry = self._telemetry
        self._attributes.update(where(broker))
        self._span.set_attributes(where(broker))
        instruments = telemetry.instruments
        telemetry.end(
            self._span, error, self._attributes, instruments.operation_duration, self._started
        )
        instruments.sent.add(1, self._attributes)


class _Process:
    """One handler call's span and duration (``DeliveryObservation``)."""

    __slots__ = ("_attributes", "_span", "_started", "_telemetry", "_token")

    def __init__(
        self,
        telemetry: Telemetry,
        span: Span,
        attributes: Attributes,
        token: Token[Context],
        started: float,
    ) -> None:
        self._telemetry = telemetry
        self._span = span
        self._attributes = attributes
        self._token = token
        self._started = started

    def finished(self, error: BaseException | None) -> None:
        otel_context.detach(self._token)
        telemetry = self._telemetry
        histogram = telemetry.instruments.process_duration
        telemetry.end(self._span, error, self._attributes, histogram, self._started)
