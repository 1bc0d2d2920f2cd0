"""The harness's ActiveMQ heap: ClusterSpec.heap, $FAILOVER_ACTIVEMQ_HEAP, the 1 GB default."""

from __future__ import annotations

import pytest

from failover_client.testing.brokers import BrokerKind, ClusterSpec
from failover_client.testing.brokers._activemq import (
    DEFAULT_HEAP,
    FAST_JVM_OPTIONS,
    HEAP_VARIABLE,
    heap_of,
)

ACTIVEMQ = BrokerKind.ACTIVEMQ


def test_the_default_is_one_gigabyte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HEAP_VARIABLE, raising=False)
    assert DEFAULT_HEAP == "1g"
    assert heap_of(ClusterSpec(ACTIVEMQ)) == "1g"
    assert "-Xmx1g" in FAST_JVM_OPTIONS
    assert "-Xms64m" in FAST_JVM_OPTIONS  # grows only as needed


def test_the_spec_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEAP_VARIABLE, "2g")
    assert heap_of(ClusterSpec(ACTIVEMQ)) == "2g"
    assert heap_of(ClusterSpec(ACTIVEMQ, heap="512m")) == "512m"


def test_specs_with_other_heaps_are_other_clusters() -> None:
    assert ClusterSpec(ACTIVEMQ, heap="2g") != ClusterSpec(ACTIVEMQ)


@pytest.mark.parametrize("heap", ["lots", "1.5g", "0g", "1024", "-1g"])
def test_a_heap_that_is_not_a_size_is_refused(heap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="as -Xmx takes it"):
        ClusterSpec(ACTIVEMQ, heap=heap)
    monkeypatch.setenv(HEAP_VARIABLE, heap)
    with pytest.raises(ValueError, match=f"\\${HEAP_VARIABLE}"):
        heap_of(ClusterSpec(ACTIVEMQ))


def test_the_heap_is_for_activemq_only() -> None:
    with pytest.raises(ValueError, match="heap is only supported for ActiveMQ"):
        ClusterSpec(BrokerKind.RABBITMQ, heap="1g")
