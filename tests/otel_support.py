"""Shared set-up of the OpenTelemetry tests: in-memory span exporter and metric reader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass
class Sink:
    """Where an instrumented connection's telemetry lands in a test."""

    spans: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [
            s for s in self.spans.get_finished_spans() if name is None or s.name.startswith(name)
        ]

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
