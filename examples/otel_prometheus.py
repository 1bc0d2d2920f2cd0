"""A producer whose metrics Prometheus scrapes: watch a failover in the numbers.

Needs the ``otel`` extra and OpenTelemetry's Prometheus exporter::

    pip install 'failover-client[stomp,otel]' opentelemetry-exporter-prometheus
    python examples/otel_prometheus.py \\
        --uri 'failover:(stomp://127.0.0.1:61613,stomp://127.0.0.1:61623)?randomize=false' \\
        --destination /queue/orders --port 9464
    curl -s http://127.0.0.1:9464/metrics | grep -E '^(messaging|failover_client)_'

It sends a numbered message every ``--interval`` seconds and prints ``confirmed <n>`` for each
one the broker confirmed. Kill the broker in use: the sends wait while the connection fails
over, and ``failover_client_failover_duration_seconds_count`` goes to 1 with the time it took;
``failover_client_broker_current`` names the new broker. Traces: a TracerProvider is installed
so every send is a span whose context goes out in the message's ``traceparent`` header; add a
span processor with an exporter (OTLP, console) to see them. Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import signal
import threading

from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from failover_client import FailoverConnection
from failover_client.otel import instrument


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uri", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument("--port", type=int, default=9464, help="where /metrics is served")
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--system", default="activemq", help="the messaging.system attribute")
    args = parser.parse_args()

    # The providers are the application's: the library only records into them.
    resource = Resource.create({"service.name": "orders-producer"})
    start_http_server(port=args.port, addr="127.0.0.1")
    metrics.set_meter_provider(
        MeterProvider(resource=resource, metric_readers=[PrometheusMetricReader()])
    )
    trace.set_tracer_provider(TracerProvider(resource=resource))

    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    conn = FailoverConnection(args.uri)
    instrument(conn, messaging_system=args.system)  # before connect: the first events count
    with conn:
        print(f"serving metrics on http://127.0.0.1:{args.port}/metrics", flush=True)
        number = 0
        while not stop.is_set():
            conn.send(args.destination, f"message {number}")
            print(f"confirmed {number}", flush=True)
            number += 1
            stop.wait(args.interval)


if __name__ == "__main__":
    main()
