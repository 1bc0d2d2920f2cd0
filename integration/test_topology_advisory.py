"""The ``advisory`` topology source against a real ActiveMQ network of brokers (full mesh of 3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

import pytest
from failover_client.uri import BrokerAddress, ServerListAction, parse

from failover_client import FailedOver, FailoverConnection, TopologyChanged
from failover_client.testing.brokers import Broker, Cluster
from failover_client.topology import AdvisorySource
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


class Pushes:
    """A sink that records each pushed list (as broker keys) with the time it arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[tuple[float, frozenset[str], ServerListAction | None]] = []

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
