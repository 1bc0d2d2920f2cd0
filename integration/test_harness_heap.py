"""The harness's ActiveMQ heap: an option, and a default that holds a load test's backlog.

A Spark sink load test against a harness broker with the former 256 MB heap ran out of memory
at about 100,000 queued 128-byte messages. With the default heap a broker takes that many,
keeps them, counts them and hands every one back, and its log has no OutOfMemoryError.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from failover_client.testing.brokers import Cluster
from failover_client.testing.brokers._activemq import DEFAULT_HEAP

pytestmark = pytest.mark.integration

BACKLOG = 100_000
BODY = 128


def heap_flags(cluster: Cluster) -> list[str]:
    broker = cluster[0]
    argv: list[str] = broker.process.argv  # type: ignore[attr-defined]
    return [a for a in argv if a.startswith("-Xmx")]


def test_the_default_heap_holds_a_load_tests_backlog(
    broker_cluster: Callable[..., Cluster], unique_queue: str
) -> None:
    cluster = broker_cluster("activemq", 1)
    broker = cluster[0]
    assert heap_flags(cluster)[-1] == f"-Xmx{DEFAULT_HEAP}"
    bodies = (f"{n:08d}".ljust(BODY, "x") for n in range(BACKLOG))
    assert broker.send(unique_queue, bodies, timeout=60.0) == BACKLOG
    assert broker.queue_depth(unique_queue.removeprefix("/queue/")) == BACKLOG
    received = broker.drain(unique_queue, timeout=600.0, idle=5.0, expect=BACKLOG)
    assert len({m.body[:8] for m in received}) == BACKLOG
    assert "OutOfMemoryError" not in broker.log_path.read_text(errors="replace")


def test_the_heap_is_an_option(broker_cluster: Callable[..., Cluster]) -> None:
    cluster = broker_cluster("activemq", 1, heap="384m")
    assert heap_flags(cluster)[-1] == "-Xmx384m"
    assert cluster[0].probe()
