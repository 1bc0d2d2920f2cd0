"""Shared set-up of the OpenTelemetry tests: in-memory span exporter and metric reader."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _Exporter(InMemorySpanExporter):
    """The SDK's in-memory exporter, telling waiters when a span arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Condition()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        with self.arrived:
            self.arrived.notify_all()
        return result


@dataclass
class Sink:
    """Where an instrumented connection's telemetry lands in a test."""

    spans: _Exporter = field(default_factory=_Exporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [
            s for s in self.spans.get_finished_spans() if name is None or s.name.startswith(name)
        ]

    def wait_spans(self, name: str, count: int, timeout: float = 30.0) -> list[ReadableSpan]:
        """At least ``count`` finished spans named ``name...`` (AssertionError after
        ``timeout``: only reached when something is broken)."""
        with self.spans.arrived:
            self.spans.arrived.wait_for(lambda: len(self.finished(name)) >= count, timeout)
        found = self.finished(name)
        assert len(found) >= count, f"{len(found)} {name!r} spans, wanted {count}"
        return found

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` now (empty if it recorded nothing)."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for recorded in scope.metrics:
                    if recorded.name == metric:
                        found.extend(recorded.data.data_points)
        return found

    def total(
        self, metric: str, where: Mapping[str, object] | None = None, *, without: str = ""
    ) -> float:
        """The sum of a counter's values (or of a histogram's counts) over its points that
        carry ``where`` and lack the attribute ``without``."""
        total = 0.0
        for point in self.points(metric):
            attributes = point.attributes
            if without and without in attributes:
                continue
            if all(attributes.get(k) == v for k, v in (where or {}).items()):
                total += point.count if hasattr(point, "count") else point.value
        return total
