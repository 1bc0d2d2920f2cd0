"""One measured run of bench_otel.py, in a process of its own (so a method can use another
source tree of the library). Prints one JSON line: messages per second and what was imported.

Run by bench_otel.py: ``python _otel_child.py TREE MODE CALL URI DESTINATION COUNT``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import MutableMapping
from typing import Any


def main() -> None:
    tree, mode, call, uri, destination, count = sys.argv[1:7]
    if tree != "-":
        sys.path.insert(0, tree)  # before the installed copy: this tree's failover_client
    import failover_client  # noqa: PLC0415 - after choosing the tree

    if uri == "fake":
        # No broker: the fake session confirms each send as it is written, so what is
        # measured is the client's own cost per send.
        from failover_client.uri import BrokerAddress  # noqa: PLC0415

        from failover_client.testing import FakeConnector  # noqa: PLC0415

        members = [BrokerAddress("stomp", "fake", 61613)]
        conn = failover_client.FailoverConnection(members, connector=FakeConnector())
    else:
        conn = failover_client.FailoverConnection(uri)
    telemetry: Any = None
    if mode == "noop":
        conn.set_observer(_Noop())  # type: ignore[attr-defined]
    elif mode == "otel":
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
            InMemorySpanExporter,
        )

        from failover_client.otel import instrument  # noqa: PLC0415

        tracer_provider = TracerProvider()
        exporter = InMemorySpanExporter()
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        telemetry = instrument(
            conn,
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[reader]),
        )
    conn.connect()
    body = b"x" * 128
    total = int(count)
    # Warm-up: the first sends pay for imports and the broker's first writes.
    for _ in range(200):
        conn.send(destination, body)
    start = time.perf_counter()
    if call == "send":
        for _ in range(total):
            conn.send(destination, body)
    else:
        for _ in range(total):
            conn.send_async(destination, body)
        conn.flush(timeout=120)
    elapsed = time.perf_counter() - start
    conn.close()
    if telemetry is not None:
        telemetry.close()
    print(json.dumps({"rate": total / elapsed, "file": failover_client.__file__}))


class _Noop:
    """An observer that does nothing: what the hooks themselves cost."""

    def sending(self, destination: str, headers: MutableMapping[str, str], mid: object) -> Any:
        return self

    def resent(self, from_broker: object, to_broker: object) -> None:
        pass

    def finished(self, error: object, broker: object = None) -> None:
        pass

    def handling(self, message: object, broker: object) -> Any:
        return self

    def received(self, message: object, broker: object) -> None:
        pass


if __name__ == "__main__":
    main()
