"""Consumers that move on an ActiveMQ network of brokers: what is lost, duplicated, left behind.

Two scenarios on a full mesh of three networked brokers (ActiveMQ's default bridges,
``networkTTL`` 1), a producer on broker 2 at a steady rate:

* ``priority``: one consumer on ``failover:(b0,b1)?priorityBackup=true``; b0 is SIGKILLed, the
  consumer fails over to b1, b0 is restarted and priority backup moves the consumer home. What
  b1 holds for it then (forwarded from b2, which never crosses back) is left there unless the
  move drains b1.
* ``join``: consumers with ``rebalance=true`` on ``failover:(b0,b1,b2)`` while b2 is down; b2
  starts, and the consumers whose rendezvous home is b2 move there, leaving b0 / b1.

Counted once the producer stopped and the moves settled: ids never received (lost), ids received
more than once (duplicates) and messages still on each broker (left behind: drained with a plain
STOMP consumer after the consumers closed).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from failover_client.policies import weighted_rendezvous_score
from failover_client.uri import broker_key

from failover_client import FailoverConnection, Message
from failover_client._events import (
    DrainFinished,
    DrainStarted,
    Event,
    FailedOver,
    PriorityRestored,
    Rebalanced,
)
from failover_client.testing.brokers import Cluster

__all__ = ["Outcome", "run_join", "run_priority_return"]

_PREFETCH = {"activemq.prefetchSize": "100"}
_SETTLE = 60.0
"""Seconds the consumers get, after the producer stopped, to receive every id (bounds the wait)."""


@dataclass
class Outcome:
    """The figures of one run."""

    scenario: str
    drain: bool
    sent: int = 0
    received: int = 0
    lost: int = 0
    duplicates: int = 0
    left: dict[str, int] = field(default_factory=dict)
    drains: list[str] = field(default_factory=list)
    moves: int = 0
    """Planned moves (priority returns, rebalances) of the consumers."""
    failovers: int = 0

    @property
    def left_total(self) -> int:
        return sum(self.left.values())

    def line(self) -> str:
        left = " ".join(f"{k}={v}" for k, v in self.left.items())
        return (
            f"{self.scenario:9} drainOnMove={str(self.drain).lower():5} sent={self.sent:6} "
            f"lost={self.lost:5} duplicates={self.duplicates:5} left={self.left_total:5} "
            f"({left}) moves={self.moves} failovers={self.failovers} "
            f"drains: {'; '.join(self.drains) or '-'}"
        )


class _Consumer:
    """A FailoverConnection consuming ``queue``, acknowledging each message after recording it."""

    def __init__(self, uri: str, queue: str, name: str) -> None:
        self.ids: list[str] = []
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self.conn = FailoverConnection(uri, client_id=name, listeners=[self.events.append])
        self.conn.subscribe(queue, self._on_message, ack="client-individual", headers=_PREFETCH)

    def _on_message(self, message: Message) -> None:
        with self._lock:
            self.ids.append(message.body.decode())
        message.ack()

    def drained(self) -> list[str]:
        out = []
        for e in list(self.events):
            if isinstance(e, DrainFinished):
                out.append(
                    f"{e.broker.rsplit(':', 1)[-1]} {e.delivered} in {e.elapsed:.1f}s"
                    f"{'' if e.complete else ' (timeout)'}"
                )
        return out

    def moved(self) -> int:
        return sum(isinstance(e, PriorityRestored | Rebalanced) for e in list(self.events))

    def draining(self) -> bool:
        """A drain runs, or the last one found messages (so another follows)."""
        events = list(self.events)
        started = sum(isinstance(e, DrainStarted) for e in events)
        finished = [e for e in events if isinstance(e, DrainFinished)]
        return started > len(finished) or (bool(finished) and finished[-1].delivered > 0)


class _Producer(threading.Thread):
    """Sends ``count`` ids to ``queue`` at ``rate`` per second, each confirmed."""

    def __init__(self, uri: str, queue: str, rate: int, count: int) -> None:
        super().__init__(name="moves-producer", daemon=True)
        self.conn = FailoverConnection(uri, client_id="moves-producer")
        self.queue = queue
        self.rate = rate
        self.count = count
        self.sent = 0

    def run(self) -> None:
        start = time.monotonic()
        futures = []
        batch = max(1, self.rate // 100)
        for n in range(self.count):
            futures.append(self.conn.send_async(self.queue, str(n).encode()))
            if n % batch == batch - 1:
                ahead = start + (n + 1) / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)  # pacing the offered rate
        for future in futures:
            future.result(60)  # each send's confirmation; bounded
            self.sent += 1


def _options(drain: bool, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "randomize": False,
        "consumer.drainOnMove": drain,
        "initialReconnectDelay": 100,
        "maxReconnectDelay": 1000,
        **extra,
    }


def _settle(
    consumers: list[_Consumer], producer: _Producer, drain_timeout: float, moves: int
) -> None:
    """Wait until every id arrived, the ``moves`` were made and no drain runs (or the bounds
    pass)."""
    producer.join(120)  # bounded by its sends' timeouts
    deadline = time.monotonic() + _SETTLE
    while time.monotonic() < deadline:  # bounded by _SETTLE
        got = set().union(*(c.ids for c in consumers))
        moved = sum(c.moved() for c in consumers)
        if (
            len(got) >= producer.count
            and moved >= moves
            and not any(c.draining() for c in consumers)
        ):
            break
        time.sleep(0.2)
    # A last quiet look: what a drain still takes in is counted as received.
    deadline = time.monotonic() + drain_timeout
    while any(c.draining() for c in consumers) and time.monotonic() < deadline:
        time.sleep(0.2)


def _count(outcome: Outcome, cluster: Cluster, consumers: list[_Consumer], queue: str) -> None:
    for consumer in consumers:
        consumer.conn.close()
    ids = [i for c in consumers for i in c.ids]
    unique = set(ids)
    outcome.received = len(unique)
    outcome.duplicates = len(ids) - len(unique)
    left_ids: set[str] = set()
    for index, broker in enumerate(cluster):
        left = broker.drain(queue, timeout=30.0, idle=2.0)
        outcome.left[f"b{index}"] = len(left)
        left_ids.update(m.body.decode() for m in left)
    outcome.lost = len({str(n) for n in range(outcome.sent)} - unique - left_ids)
    for consumer in consumers:
        outcome.drains.extend(consumer.drained())
        events = list(consumer.events)
        outcome.moves += consumer.moved()
        outcome.failovers += sum(isinstance(e, FailedOver) for e in events)


def run_priority_return(
    cluster: Cluster, *, drain: bool, rate: int = 2000, seconds: float = 12.0
) -> Outcome:
    """The ``priority`` scenario (see the module docstring) on a healthy three-broker mesh."""
    queue = f"/queue/moves-{uuid.uuid4().hex[:8]}"
    b0, b1, b2 = cluster[0], cluster[1], cluster[2]
    options = _options(drain, {"priorityBackup": True})
    uri = f"failover:({b0.uri()},{b1.uri()})?" + "&".join(
        f"{k}={str(v).lower()}" for k, v in options.items()
    )
    consumer = _Consumer(uri, queue, "moves-consumer")
    producer = _Producer(f"failover:({b2.uri()})", queue, rate, int(rate * seconds))
    outcome = Outcome("priority", drain)
    try:
        consumer.conn.connect()
        producer.conn.connect()
        producer.start()
        time.sleep(seconds / 4)  # the producer runs before the kill
        b0.kill()
        time.sleep(seconds / 4)  # the consumer on b1, fed through the bridge from b2
        b0.start()
        _settle([consumer], producer, 35.0, moves=1)
        outcome.sent = producer.sent
    finally:
        producer.conn.close()
        if not b0.running():
            b0.start()
    _count(outcome, cluster, [consumer], queue)
    return outcome


def _client_ids(members: list[str], count: int) -> list[str]:
    """``count`` client ids: half rank b2 first and b1 second (on b1 until b2 joins, then
    moved there), half rank b0 first (they stay). So the join empties b1 of consumers, and
    what b1 holds for them is left there unless the move drains it.

    Chosen rather than left to the hash: a broker that keeps a consumer of the queue hands what
    it holds to that one, and a run where the join moves nobody would show nothing.
    """
    keys = [broker_key(u.hostname or "", u.port or 0) for u in map(urlsplit, members)]
    movers: list[str] = []
    stayers: list[str] = []
    for n in range(100 * count):  # ends: about 1/6 of the ids are movers, 1/3 stayers
        name = f"moves-consumer-{n}"
        ranked = sorted(keys, key=lambda k: weighted_rendezvous_score(name, k, 1.0), reverse=True)
        if ranked[:2] == [keys[2], keys[1]] and len(movers) < count // 2:
            movers.append(name)
        elif ranked[0] == keys[0] and len(stayers) < count - count // 2:
            stayers.append(name)
        if len(movers) + len(stayers) == count:
            break
    return movers + stayers


def run_join(
    cluster: Cluster, *, drain: bool, rate: int = 2000, seconds: float = 12.0, consumers: int = 4
) -> Outcome:
    """The ``join`` scenario (see the module docstring) on a three-broker mesh."""
    queue = f"/queue/moves-{uuid.uuid4().hex[:8]}"
    b0, b1, b2 = cluster[0], cluster[1], cluster[2]
    b2.stop()
    options = _options(drain, {"rebalance": True})
    uri = cluster.failover_uri(options=options)
    names = _client_ids([b.uri() for b in (b0, b1, b2)], consumers)
    group = [_Consumer(uri, queue, name) for name in names]
    producer = _Producer(f"failover:({b0.uri()})", queue, rate, int(rate * seconds))
    outcome = Outcome("join", drain)
    try:
        for consumer in group:
            consumer.conn.connect()
        producer.conn.connect()
        producer.start()
        time.sleep(seconds / 3)  # consumers on b0 and b1 only
        b2.start()
        _settle(group, producer, 35.0, moves=consumers // 2)
        outcome.sent = producer.sent
    finally:
        producer.conn.close()
        if not b2.running():
            b2.start()
    _ = b1
    _count(outcome, cluster, group, queue)
    return outcome
