"""OpenTelemetry metrics and traces for a failover connection (the ``otel`` extra).

::

    from failover_client import FailoverConnection
    from failover_client.otel import instrument

    conn = FailoverConnection("failover:(stomp://a:61613,stomp://b:61613)")
    telemetry = instrument(conn)      # the global tracer and meter providers, unless given
    conn.connect()

:func:`instrument` installs the connection's observer (a span per send and per delivery, W3C
trace context in the message headers, the messaging semantic conventions' metrics) and an
event listener (reconnect attempts, failover durations, failovers and rebalances as span
events), and registers gauges of the window in flight, the current broker and the number of
known brokers. Names and attributes: ``docs/opentelemetry.md``; they follow the OpenTelemetry
semantic conventions v1.44.0. ``stats()``, ``health()`` and the events are unchanged.

Why a function and not a connection option: the engine stays free of OpenTelemetry (this
package is imported only by applications that ask for it), and it instruments connections the
application did not construct itself (the Spark sink's, a library's), as OpenTelemetry's own
instrumentations do. Importing this package without OpenTelemetry installed raises
:class:`~failover_client.ConfigurationError` naming the extra:
``pip install 'failover-client[otel]'``.
"""

from __future__ import annotations

from failover_client._errors import ConfigurationError

try:
    from failover_client.otel._instrument import Instrumentation, instrument
except ImportError as exc:
    if exc.name is None or exc.name.split(".")[0] != "opentelemetry":
        raise  # anything else missing is a bug here, not the user's set-up
    raise ConfigurationError(
        "failover_client.otel needs the 'opentelemetry-api' library, which is not installed: "
        "pip install 'failover-client[otel]'"
    ) from exc

from failover_client.otel._names import SCHEMA_URL, SEMCONV_VERSION

__all__ = ["SCHEMA_URL", "SEMCONV_VERSION", "Instrumentation", "instrument"]
