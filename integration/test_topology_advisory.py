"""The ``advisory`` topology source against a real ActiveMQ network of brokers (full mesh of 3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import trustme
from failover_client.uri import BrokerAddress, ServerListAction, parse

from failover_client import FailedOver, FailoverConnection, SystemClock, TopologyChanged
from failover_client.testing.brokers import Broker, BrokerKind, Cluster, broker_tls
from failover_client.topology import AdvisorySource, BaseSink, uri_sources
from integration.test_failover_common import Events

pytestmark = pytest.mark.integration

# A bridge comes back on the network connector's own reconnect back-off (seconds, more after a
# restart); this bounds the wait for a push, it is not what the test expects.
WAIT = 60.0


def key(broker: Broker) -> str:
    return parse(broker.uri("stomp")).members[0].key


def credentials(cluster: Cluster) -> dict[str, str | None]:
    login, passcode = next(iter(cluster)).credentials or (None, None)
    return {"login": login, "passcode": passcode}


class Pushes(BaseSink):
    """A sink that records each pushed list (as broker keys) with the time it arrived, and
    each failure the source reports."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[tuple[float, frozenset[str], ServerListAction | None]] = []
        self.failures: list[tuple[str, int, float | None]] = []

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append((error, failures, retry_in))
            self.cond.notify_all()

    def wait_failures(self, count: int) -> list[tuple[str, int, float | None]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.failures) >= count, WAIT):
                raise AssertionError(f"fewer than {count} failures within {WAIT}s")
            return list(self.failures)

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        pushed: bool = False,
    ) -> None:
        keys = frozenset(a.key for a in update)
        with self.cond:
            self.log.append((time.monotonic(), keys, action))
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[frozenset[str]], bool]) -> float:
        """The arrival time of the newest push that satisfies ``predicate`` (waits for one)."""

        def last() -> bool:
            return bool(self.log) and predicate(self.log[-1][1])

        with self.cond:
            if not self.cond.wait_for(last, WAIT):
                raise AssertionError(f"no such push within {WAIT}s; pushes: {self.log}")
            return self.log[-1][0]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_source_follows_a_broker_that_leaves_and_comes_back(
    activemq_network: Cluster, how: str
) -> None:
    watched, peer, leaving = activemq_network
    everyone = frozenset(key(b) for b in activemq_network)
    source = AdvisorySource(watched.uri("stomp"), **credentials(activemq_network))
    pushes = Pushes()
    source.start(pushes)
    try:
        pushes.wait_for(lambda keys: keys == everyone)
        assert all(action == "replace" for _, _, action in pushes.log)

        stopped_at = time.monotonic()
        leaving.stop() if how == "stop" else leaving.kill()
        removed_at = pushes.wait_for(lambda keys: keys == everyone - {key(leaving)})
        print(f"\nbroker {how} -> push without {key(leaving)}: {removed_at - stopped_at:.3f}s")

        started_at = time.monotonic()
        leaving.start()
        back_at = pushes.wait_for(lambda keys: keys == everyone)
        print(f"broker start -> push with {key(leaving)} again: {back_at - started_at:.3f}s")
        assert key(peer) in pushes.log[-1][1]
        assert source.skipped == 0
    finally:
        source.stop()


def test_a_connection_learns_the_network_and_fails_over_to_a_learned_broker(
    activemq_network: Cluster, unique_queue: str
) -> None:
    first, second, third = activemq_network
    uri = f"failover:({first.uri('stomp')})?randomize=false"
    events = Events()
    source = AdvisorySource(uri, **credentials(activemq_network))
    conn = FailoverConnection(
        uri, listeners=[events], topology=[source], **credentials(activemq_network)
    )
    try:
        conn.connect()
        learned = {key(second), key(third)}
        began = time.monotonic()
        events.wait_for(
            TopologyChanged,
            lambda e: {parse(a).members[0].key for a in e.added} >= learned,
            timeout=WAIT,
        )
        print(f"\nconnect -> brokers 1 and 2 learned: {time.monotonic() - began:.3f}s")
        assert {s.address.key for s in conn.pool.states()} == {key(first), *learned}
        conn.send(unique_queue, "before")

        mark = events.mark()
        killed_at = time.monotonic()
        first.kill()
        moved = events.wait_for(FailedOver, after=mark, timeout=WAIT)
        print(
            f"kill of broker 0 -> failed over to {moved.to_broker}: "
            f"{events.time_of(moved) - killed_at:.3f}s"
        )
        assert parse(moved.to_broker).members[0].key in learned
        conn.send(unique_queue, "after")  # confirmed by the learned broker
    finally:
        conn.close()


# --- over TLS: the source takes the URI's trust -------------------------------------------------


def _tls_sources(cluster: Cluster, trust: str) -> list[object]:
    """The sources ``failover:(<the broker's stomp+ssl>)?topology=advisory<trust>`` asks for,
    built as a connection builds them."""
    parsed = parse(f"failover:({cluster[0].uri('stomp+ssl')})?topology=advisory{trust}")
    login, passcode = cluster[0].credentials or (None, None)
    return list(
        uri_sources(
            parsed.members,
            parsed.options,
            parsed.agents,
            login=login,
            passcode=passcode,
            clock=SystemClock(),
        )
    )


def test_advisory_watches_a_tls_broker_with_the_uri_s_trust(
    broker_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    ca = trustme.CA()
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 1, tls=broker_tls(ca, tmp_path))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    (source,) = _tls_sources(cluster, f"&tls.caFile={ca_file}")
    assert isinstance(source, AdvisorySource)
    pushes = Pushes()
    source.start(pushes)
    try:
        # A single broker has no bridges: the network is the broker the watcher is on.
        pushes.wait_for(lambda keys: keys == {parse(cluster[0].uri("stomp+ssl")).members[0].key})
    finally:
        source.stop()
    assert pushes.failures == []


def test_advisory_without_the_trust_reports_each_failure_and_retries_with_back_off(
    broker_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 1, tls=broker_tls(trustme.CA(), tmp_path))
    (source,) = _tls_sources(cluster, "")  # the system's CAs do not know the test CA
    pushes = Pushes()
    source.start(pushes)
    try:
        failures = pushes.wait_failures(2)
    finally:
        source.stop()
    assert [(n, retry) for _, n, retry in failures[:2]] == [(1, 1.0), (2, 2.0)]
    assert all(error.startswith("TLSFailure") for error, _, _ in failures)
    assert pushes.log == []
