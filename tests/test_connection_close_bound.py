"""``close()`` does not wait for a topology source stuck in a call nothing can interrupt, nor
for an event listener that never returns.

A custom DNS resolver (``DnsSource(resolve=...)``) stuck in a lookup held ``close()`` for as long
as the lookup took (21.7 s measured). Now the sources get ``SOURCES_STOP_TIMEOUT`` (virtual
seconds here) and a stuck one is left on its daemon thread.
"""

from __future__ import annotations

import logging
import threading

import pytest

from failover_client.engine._connection import FailoverConnection
from failover_client.testing import FakeClock, FakeConnector
from failover_client.testing._clock import SAFETY_TIMEOUT
from failover_client.topology import DnsSource
from failover_client.topology._dns import DnsAnswer


class StuckResolver:
    """A resolver whose lookups block until released (a DNS server that never answers)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()

    def __call__(self, name: str, rdtype: str) -> DnsAnswer:
        self.entered.set()
        self.release.wait(SAFETY_TIMEOUT)  # a safety net: the test releases it
        self.returned.set()
        return DnsAnswer(())


def test_close_returns_while_a_custom_dns_resolver_is_stuck(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock(autojump=True)
    resolver = StuckResolver()
    source = DnsSource("_stomp._tcp.example.com", clock=clock, resolve=resolver)
    conn = FailoverConnection(
        "failover:(stomp://a:61613)",
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology=[source],
    )
    conn.connect()
    assert resolver.entered.wait(SAFETY_TIMEOUT)
    try:
        conn.close()
        # close() came back while the lookup is still stuck (before, it waited for it).
        assert not resolver.returned.is_set()
        assert conn.state == "closed"
        assert any(
            "topology sources did not stop within 2s" in r.getMessage()
            and r.levelno == logging.WARNING
            for r in caplog.records
        )
    finally:
        resolver.release.set()
    # The abandoned thread ends by itself once the lookup returns.
    stoppers = [t for t in threading.enumerate() if t.name.endswith("-topology-stop")]
    for thread in stoppers:
        thread.join(SAFETY_TIMEOUT)
    assert not [t for t in stoppers if t.is_alive()]
    assert source._worker.state == "stopped"


def test_close_with_prompt_sources_waits_for_them() -> None:
    clock = FakeClock(autojump=True)
    stopped = threading.Event()

    class Source:
        def start(self, sink: object) -> None:
            pass

        def stop(self) -> None:
            stopped.set()

    conn = FailoverConnection(
        "failover:(stomp://a:61613)",
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology=[Source()],
    )
    conn.connect()
    conn.close()
    assert stopped.is_set()


def test_close_returns_while_an_event_listener_never_returns(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real seconds here (a thread join): the bound is made short so the test does not wait.
    monkeypatch.setattr("failover_client.engine._lifetime.LISTENERS_STOP_TIMEOUT", 0.05)
    clock = FakeClock(autojump=True)
    entered = threading.Event()
    release = threading.Event()

    def stuck(event: object) -> None:
        entered.set()
        release.wait(SAFETY_TIMEOUT)  # a safety net: the test releases it

    conn = FailoverConnection(
        "failover:(stomp://a:61613)",
        connector=FakeConnector(clock=clock),
        clock=clock,
        listeners=[stuck],
    )
    conn.connect()
    assert entered.wait(SAFETY_TIMEOUT)
    try:
        conn.close()
        assert conn.state == "closed"
        assert any(
            "an event listener did not return within 0.05 s" in r.getMessage()
            and r.levelno == logging.WARNING
            for r in caplog.records
        )
    finally:
        release.set()
