"""``instrument(connection)``: the observer, the listener and the gauges, installed together."""

from __future__ import annotations

from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import TracerProvider

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError
from failover_client.engine._connection import FailoverConnection
from failover_client.otel import _names as n
from failover_client.otel._connection_metrics import ConnectionMetrics
from failover_client.otel._telemetry import Instruments, Telemetry

__all__ = ["Instrumentation", "instrument"]

_SCOPE = "failover_client"


class Instrumentation:
    """What :func:`instrument` installed on one connection; :meth:`close` removes it."""

    def __init__(
        self, connection: FailoverConnection, telemetry: Telemetry, metrics: ConnectionMetrics
    ) -> None:
        self._connection = connection
        self._telemetry = telemetry
        self._metrics = metrics

    @property
    def messaging_system(self) -> str:
        """The ``messaging.system`` attribute's value."""
        return self._telemetry.system

    def close(self) -> None:
        """Remove the observer and the listener; the gauges report nothing from now on.

        Spans already started end as usual. Idempotent.
        """
        if self._connection.observer is self._telemetry:
            self._connection.set_observer(None)
            self._connection.remove_listener(self._metrics)
        self._metrics.close()

    def __repr__(self) -> str:
        return f"<Instrumentation {self.messaging_system} of {self._connection!r}>"


def instrument(
    connection: FailoverConnection,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    propagator: TextMapPropagator | None = None,
    messaging_system: str | None = None,
    clock: Clock | None = None,
) -> Instrumentation:
    """Record ``connection``'s sends, deliveries and failovers with OpenTelemetry.

    :param tracer_provider: where spans go; default the global one (``trace.set_tracer_provider``).
    :param meter_provider: where metrics go; default the global one.
    :param propagator: how trace context goes into and comes out of message headers; default
        the global one (W3C ``traceparent`` / ``tracestate`` and ``baggage``, unless the
        application configured another).
    :param messaging_system: the ``messaging.system`` attribute: the conventions name products
        (``activemq``, ``rabbitmq``, ...), which a URI does not tell; default the members'
        protocol (``stomp`` or ``amqp``).
    :param clock: times the duration histograms; default the system clock (tests pass a
        :class:`~failover_client.testing.FakeClock`).

    Call it before :meth:`~FailoverConnection.connect` to see the first connection's events
    too; any time works. Raises ConfigurationError when the connection already has an
    observer (instrumented twice).
    """
    if connection.observer is not None:
        raise ConfigurationError(
            f"{connection!r} already has an observer (instrumented twice?); "
            "close() the first Instrumentation"
        )
    system = messaging_system or _protocol(connection)
    tracer = trace.get_tracer(_SCOPE, schema_url=n.SCHEMA_URL, tracer_provider=tracer_provider)
    meter = metrics.get_meter(_SCOPE, schema_url=n.SCHEMA_URL, meter_provider=meter_provider)
    telemetry = Telemetry(
        tracer=tracer,
        instruments=Instruments.on(meter),
        propagator=propagator or propagate.get_global_textmap(),
        clock=clock or SystemClock(),
        system=system,
        client_id=connection.client_id,
    )
    listener = ConnectionMetrics(connection, meter, telemetry.open, system)
    connection.set_observer(telemetry)
    connection.add_listener(listener)
    return Instrumentation(connection, telemetry, listener)


def _protocol(connection: FailoverConnection) -> str:
    protocols = sorted({state.address.protocol for state in connection.pool.states()})
    return protocols[0] if len(protocols) == 1 else "unknown"
