"""A shared-storage ActiveMQ master/slave pair: ``masterslave:(...)`` and ``failover:(...)``.

Two ActiveMQ Classic 5.17 brokers on one KahaDB directory: the master answers, the slave waits
on the store's lock with its connectors closed. A confirmed producer (sends pipelined, so some
are unconfirmed at the kill) and a client-individual consumer run while the master is
SIGKILLed: the slave takes the lock, recovers the store and opens its connectors, and both
clients move to it. Afterwards the old master is started again and waits as the new slave,
while the clients stay where they are.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future

import pytest

from failover_client import (
    Deduplicator,
    DuplicatesPossible,
    FailedOver,
    FailoverConnection,
    Message,
)
from failover_client.testing.brokers import SharedStoreCluster
from integration.test_failover_common import SAFETY, Events, broker_at

pytestmark = pytest.mark.integration

# The slave opens its port only after the master's death, so the reconnect delay stays short
# (the Java client's default doubles up to 30 s, which would measure the schedule instead).
OPTIONS = "initialReconnectDelay=10&maxReconnectDelay=100&heartbeat=1000,1000"


def _uri(form: str, cluster: SharedStoreCluster) -> str:
    master = cluster.master()
    slave = next(b for b in cluster if b is not master)
    members = f"{master.uri('stomp')},{slave.uri('stomp')}"
    return f"{form}:({members})?{OPTIONS}"


class PipelinedProducer(threading.Thread):
    """Keeps up to ``window`` confirmed sends in flight; remembers which were confirmed."""

    def __init__(self, conn: FailoverConnection, destination: str, window: int = 32) -> None:
        super().__init__(name="test-producer", daemon=True)
        self.conn = conn
        self.destination = destination
        self.window = threading.Semaphore(window)
        self.cond = threading.Condition()
        self.confirmed: list[str] = []
        self.errors: list[BaseException] = []
        self.sent = 0
        self._halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._halt.is_set():
            if not self.window.acquire(timeout=SAFETY):
                self.errors.append(TimeoutError("no confirmation freed the window"))
                return
            message_id = f"ms-{n}"
            try:
                future = self.conn.send_async(self.destination, message_id, message_id=message_id)
            except Exception as exc:
                self.errors.append(exc)
                return
            future.add_done_callback(lambda f, m=message_id: self._done(f, m))
            n += 1
            self.sent = n

    def _done(self, future: Future[None], message_id: str) -> None:
        self.window.release()
        with self.cond:
            if future.exception() is None:
                self.confirmed.append(message_id)
            else:
                self.errors.append(future.exception())  # type: ignore[arg-type]
            self.cond.notify_all()

    def wait_confirmed(self, more: int) -> None:
        with self.cond:
            target = len(self.confirmed) + more
            assert self.cond.wait_for(
                lambda: len(self.confirmed) >= target or self.errors, SAFETY
            ), f"only {len(self.confirmed)} confirmed"
            assert not self.errors, self.errors

    def finish(self) -> list[str]:
        self._halt.set()
        self.join(SAFETY)
        self.conn.flush(SAFETY)
        assert not self.errors, self.errors
        with self.cond:
            return list(self.confirmed)


class Consumer:
    """Acknowledges each message individually after recording it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.received: list[Message] = []

    def __call__(self, message: Message) -> None:
        with self.cond:
            self.received.append(message)
            self.cond.notify_all()
        message.ack()

    def wait_ids(self, ids: set[str]) -> None:
        with self.cond:
            self.cond.wait_for(lambda: ids <= {m.message_id for m in self.received}, SAFETY)
            missing = ids - {m.message_id for m in self.received}
        assert not missing, (
            f"{len(missing)} confirmed messages never received: {sorted(missing)[:5]}"
        )


@pytest.mark.parametrize("form", ["masterslave", "failover"])
def test_sigkill_of_the_master_loses_nothing_and_the_clients_stay_on_the_new_master(
    activemq_master_slave: SharedStoreCluster, unique_queue: str, form: str
) -> None:
    cluster = activemq_master_slave
    uri = _uri(form, cluster)
    master = cluster.master()
    slave = next(b for b in cluster if b is not master)
    assert cluster.slaves() == [slave]
    assert not slave.probe(0.5)  # the slave's connectors stay closed while it waits
    events, consumer_events = Events(), Events()
    producer_conn = FailoverConnection(uri, listeners=[events])
    consumer_conn = FailoverConnection(uri, listeners=[consumer_events])
    consumer = Consumer()
    with producer_conn, consumer_conn:
        assert broker_at(cluster, producer_conn.broker) is master
        notice = events.wait_for(DuplicatesPossible)
        assert "ActiveMQ/5.17" in notice.reason
        subscription = consumer_conn.subscribe(unique_queue, consumer, ack="client-individual")
        subscription.wait_active(SAFETY)
        producer = PipelinedProducer(producer_conn, unique_queue)
        producer.start()
        producer.wait_confirmed(300)
        mark, consumer_mark = events.mark(), consumer_events.mark()
        master.kill()
        moved = events.wait_for(FailedOver, after=mark)
        consumer_events.wait_for(FailedOver, after=consumer_mark)
        # Both clients are on the slave, which now holds the lock and answers.
        assert cluster.master() is slave
        assert broker_at(cluster, moved.to_broker) is slave
        assert broker_at(cluster, producer_conn.broker) is slave
        assert broker_at(cluster, consumer_conn.broker) is slave
        producer.wait_confirmed(300)

        # The old master comes back as the new slave; the clients stay where they are.
        failovers = producer_conn.stats()["failovers"]
        cluster.start_slave(master)
        assert cluster.slaves() == [master]
        assert not master.probe(0.5)
        producer.wait_confirmed(200)
        confirmed = producer.finish()
        assert producer_conn.stats()["failovers"] == failovers
        assert broker_at(cluster, producer_conn.broker) is slave
        assert broker_at(cluster, consumer_conn.broker) is slave
        consumer.wait_ids(set(confirmed))
        with consumer.cond:
            received = list(consumer.received)

    # 0 confirmed lost (above); every copy identified by the id of the message it repeats.
    copies = Counter(m.message_id for m in received)
    assert None not in copies
    assert set(copies) <= {f"ms-{n}" for n in range(producer.sent)}
    for message in received:
        assert message.body.decode() == message.message_id
        assert "_AMQ_DUPL_ID" not in message.headers  # Classic drops no copy by it
    duplicates = sum(n - 1 for n in copies.values())
    kept = list(Deduplicator().filter(received))
    assert len(kept) == len(copies) == len(received) - duplicates
    print(
        f"\n{form}: {len(confirmed)} confirmed, {len(received)} received, {duplicates} duplicates"
    )
