"""Confirmed sends across a broker kill: zero loss, and duplicates only of what was in flight.

The brokers are drained at the end with the raw harness clients (not with the library under
test) and what they hold is compared with what ``send`` / ``send_async`` confirmed: every
confirmed body must be there at least once, a body may be there twice only if it was written
but unconfirmed when the broker died, and every copy carries the id it was first sent with.
"""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import Future

import pytest

from failover_client import FailedOver, FailoverConnection, SendTimeout
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    LeakCheck,
    Producer,
    broker_at,
    check_delivery,
    connected_then_all_down,
    credentials,
    drain_all,
    durable_queue,
    failover_uri,
    send_destination,
)

pytestmark = pytest.mark.integration

TOTAL = 1500


class AsyncSends:
    """Fires ``send_async`` for ``m-0 .. m-<total-1>`` and records when each was confirmed."""

    def __init__(self, conn: FailoverConnection, destination: str, total: int) -> None:
        self.cond = threading.Condition()
        self.confirmed: list[str] = []
        self.failed: list[tuple[str, BaseException]] = []
        self.futures: list[Future[None]] = []
        self.thread = threading.Thread(
            target=self._run, args=(conn, destination, total), name="test-async-sender"
        )

    def _run(self, conn: FailoverConnection, destination: str, total: int) -> None:
        for n in range(total):
            body = f"m-{n}"
            future = conn.send_async(destination, body, timeout=SAFETY)
            future.add_done_callback(functools.partial(self._done, body))
            self.futures.append(future)

    def _done(self, body: str, future: Future[None]) -> None:
        with self.cond:
            error = future.exception()
            if error is None:
                self.confirmed.append(body)
            else:
                self.failed.append((body, error))
            self.cond.notify_all()

    def wait_confirmed(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.confirmed) >= count, SAFETY)

    def snapshot(self) -> set[str]:
        with self.cond:
            return set(self.confirmed)


def _kill_during_async_sends(
    cluster: Cluster, destination: str, login: str | None = None, passcode: str | None = None
) -> None:
    events = Events()
    leaks = LeakCheck()
    conn = FailoverConnection(
        failover_uri(cluster, FAST), listeners=[events], login=login, passcode=passcode
    )
    conn.connect()
    target = send_destination(cluster[0], destination)
    sends = AsyncSends(conn, target, TOTAL)
    sends.thread.start()
    sends.wait_confirmed(TOTAL // 4)
    victim = broker_at(cluster, conn.broker)
    confirmed_before_kill = sends.snapshot()
    mark = events.mark()
    victim.kill()
    moved = events.wait_for(FailedOver, after=mark)
    sends.thread.join(SAFETY)
    sends.wait_confirmed(TOTAL)
    conn.flush(timeout=SAFETY)
    stats = conn.stats()
    conn.close()
    leaks.assert_clean()
    print(
        f"\n{cluster[0].kind.value}: {moved}; {len(confirmed_before_kill)} confirmed before the"
        f" kill, {stats['replayed']} replayed"
    )
    assert sends.failed == []
    assert moved.from_broker == victim.uri() or moved.from_broker.startswith(victim.uri())
    victim.start()
    # In flight = confirmed after the kill but sent before the new broker took over; new sends
    # went to the new broker only once. The conservative superset: not confirmed before it.
    in_flight = set(sends.confirmed) - confirmed_before_kill
    delivery = check_delivery(drain_all(cluster, destination), sends.confirmed, in_flight)
    print(f"duplicates: {len(delivery.duplicates)} (all of in-flight messages)")
    assert stats["confirmed"] == TOTAL


def test_async_sends_across_a_sigkill_lose_nothing_activemq(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    _kill_during_async_sends(activemq_cluster, unique_queue)


def test_async_sends_across_a_sigkill_lose_nothing_rabbitmq(rabbitmq_cluster: Cluster) -> None:
    queue = durable_queue(rabbitmq_cluster)
    _kill_during_async_sends(rabbitmq_cluster, queue, **credentials(rabbitmq_cluster))


def test_blocking_sends_across_a_sigkill_lose_nothing_rabbitmq(rabbitmq_cluster: Cluster) -> None:
    unique_queue = durable_queue(rabbitmq_cluster)
    events = Events()
    conn = FailoverConnection(
        failover_uri(rabbitmq_cluster, FAST), listeners=[events], **credentials(rabbitmq_cluster)
    )
    conn.connect()
    producer = Producer(conn, send_destination(rabbitmq_cluster[0], unique_queue))
    producer.start()
    producer.wait_confirmed(30)
    with producer.cond:
        before = set(producer.confirmed)
    victim = broker_at(rabbitmq_cluster, conn.broker)
    mark = events.mark()
    victim.kill()
    events.wait_for(FailedOver, after=mark)
    producer.wait_confirmed(30)
    confirmed = producer.finish()
    conn.close()
    victim.start()
    check_delivery(drain_all(rabbitmq_cluster, unique_queue), confirmed, set(confirmed) - before)


def test_send_blocks_while_disconnected_and_completes_on_a_returning_broker(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    conn = connected_then_all_down(activemq_cluster, FAST)
    done = threading.Event()
    errors: list[BaseException] = []

    def send() -> None:
        try:
            conn.send(unique_queue, "waited", timeout=SAFETY)
        except Exception as exc:
            errors.append(exc)
        done.set()

    thread = threading.Thread(target=send, name="test-blocked-sender")
    thread.start()
    # Nothing can confirm it while every broker is down: the call must still be waiting.
    assert not done.wait(1.0)
    returning = activemq_cluster[1]
    returning.start()
    assert done.wait(SAFETY)
    thread.join(SAFETY)
    assert errors == []
    assert broker_at(activemq_cluster, conn.broker) is returning
    conn.close()
    leaks.assert_clean()
    assert [m.text for m in returning.drain(unique_queue, expect=1)] == ["waited"]


def test_send_times_out_when_every_broker_is_down(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    conn = connected_then_all_down(activemq_cluster, {**FAST, "timeout": 1000})
    started = time.monotonic()
    with pytest.raises(SendTimeout) as info:
        conn.send(unique_queue, "nobody home")
    waited = time.monotonic() - started
    print(f"\nSendTimeout after {waited:.2f} s (timeout=1000 ms): {info.value}")
    assert waited >= 1.0  # it waited for a broker for the whole timeout before giving up
    assert info.value.message_id is not None
    # The connection itself is still trying: it is not closed, not failed.
    assert conn.state == "reconnecting"
    conn.close()
    leaks.assert_clean()
