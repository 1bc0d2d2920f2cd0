"""SourceThread: a source's stop() never waits without a deadline for its thread."""

from __future__ import annotations

import logging
import threading

import pytest

from failover_client.topology._base import SourceThread


def test_a_thread_stuck_where_stop_cannot_reach_is_left_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stuck = threading.Event()  # stands for a custom resolver's lookup that ignores stopping
    entered = threading.Event()

    def lookup() -> None:
        entered.set()
        stuck.wait(30)

    worker = SourceThread("dns")
    worker.start(lookup, owner="dns source")
    assert entered.wait(5)
    caplog.set_level(logging.WARNING, logger="failover_client.topology")
    try:
        worker.stop(timeout=0.05)  # a real deadline, far shorter than the lookup
        assert worker.stopping.is_set()
        assert [r.getMessage() for r in caplog.records] == [
            "topology source thread failover-client-topology-dns did not stop within 0.05 s; "
            "left to end by itself"
        ]
    finally:
        stuck.set()


def test_a_thread_that_heeds_stopping_is_joined_without_a_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker = SourceThread("url")
    worker.start(lambda: worker.stopping.wait(30), owner="url source")
    caplog.set_level(logging.WARNING, logger="failover_client.topology")
    worker.stop()
    assert worker.state == "stopped"
    assert caplog.records == []
