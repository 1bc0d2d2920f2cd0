"""The chaos run of the AMQP benchmark: faults under a FailoverConnection producer and consumer.

Every ``--interval`` seconds a random node is SIGKILLed and restarted, or SIGSTOPped and resumed,
after ``--down`` seconds, while a producer sends confirmed messages at ``--rate`` per second and
a consumer acks each (``client-individual``). What the producer left on the node the consumer
was not on is found by the final drain. ``bench_amqp.py`` prints the table.
"""

from __future__ import annotations

import argparse
import gc
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmarks._amqp_series import amqp_uri, connection, drain_ids, durable_queue
from benchmarks._common import log, open_fds, thread_names
from failover_client import FailedOver, FailoverClientError, FailoverConnection, Message
from failover_client.testing.brokers import Cluster


class Producer:
    """Confirmed sends at a fixed rate on a thread; records accepted and failed ids."""

    def __init__(self, conn: FailoverConnection, address: str, rate: float) -> None:
        self.conn, self.address, self.period = conn, address, 1.0 / rate
        self.confirmed: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def _run(self) -> None:
        n, next_at = 0, time.monotonic()
        while not self.stop.is_set():
            ident = f"c-{n}"
            try:
                self.conn.send(self.address, ident, {"bench-id": ident}, timeout=30.0)
                self.confirmed.append(ident)
            except FailoverClientError as exc:  # not confirmed: may or may not arrive
                self.failed.append((ident, repr(exc)))
            n += 1
            next_at += self.period
            self.stop.wait(max(0.0, next_at - time.monotonic()))


class Consumer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[str] = []
        self.message_ids: dict[str, set[str]] = {}

    def __call__(self, message: Message) -> None:
        ident = message.headers.get("bench-id") or message.body.decode(errors="replace")
        with self.lock:
            self.ids.append(ident)
            mid = message.headers.get("failover-message-id") or message.headers.get("message-id")
            self.message_ids.setdefault(ident, set()).add(str(mid))
        message.ack()


def faults(cluster: Cluster, seconds: float, interval: float, down: float, seed: int) -> list[Any]:
    rng = random.Random(seed)
    actions: list[dict[str, Any]] = []
    began = time.monotonic()
    while (left := began + seconds - time.monotonic()) > 0:
        time.sleep(min(interval, left))
        if time.monotonic() >= began + seconds:
            break
        index, what = rng.randrange(len(cluster)), rng.choice(("kill", "hang"))
        broker, at = cluster[index], time.monotonic()
        if what == "kill":
            broker.kill()
            time.sleep(down)
            broker.start()
        else:
            broker.hang()
            time.sleep(down)
            broker.resume()
            broker.wait_ready(30.0)
        back = round(time.monotonic() - at, 2)
        actions.append({"t": round(at - began, 2), "node": index, "action": what, "back_s": back})
        log(f"chaos: {what} node {index}, back after {back} s")
    return actions


def run_chaos(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """Faults for ``args.chaos_seconds`` under a producer and a consumer; what arrived."""
    queue = durable_queue(cluster, "chaos")
    address = f"/amq/queue/{queue}"
    time.sleep(1.0)  # the set-up's own client threads finish
    gc.collect()
    threads_before, fds_before, names_before = (
        len(threading.enumerate()),
        open_fds(),
        thread_names(),
    )
    uri = amqp_uri(cluster, options="heartbeat=1000,1000")
    failovers: dict[str, list[float]] = {"producer": [], "consumer": []}

    def recorder(role: str) -> Callable[[object], None]:
        def listen(event: object) -> None:
            if isinstance(event, FailedOver):
                failovers[role].append(round(event.duration * 1000, 1))

        return listen

    consumer = Consumer()
    consumer_conn = connection(cluster, uri, listeners=[recorder("consumer")])
    consumer_conn.subscribe(address, consumer, ack="client-individual")
    consumer_conn.connect()
    producer_conn = connection(cluster, uri, listeners=[recorder("producer")])
    producer_conn.connect()
    producer = Producer(producer_conn, address, args.rate)
    producer.thread.start()
    try:
        actions = faults(cluster, args.chaos_seconds, args.interval, args.down, args.seed)
    finally:
        producer.stop.set()
        producer.thread.join(60.0)
        cluster.heal()
        time.sleep(3.0)  # the consumer takes what is still arriving
        stats = {"producer": producer_conn.stats(), "consumer": consumer_conn.stats()}
        producer_conn.close()
        consumer_conn.close()
    gc.collect()
    end = time.monotonic() + 10.0
    while time.monotonic() < end and len(threading.enumerate()) > threads_before:
        time.sleep(0.05)  # threads that are finishing end (bounded)
    threads_after, fds_after, names_after = len(threading.enumerate()), open_fds(), thread_names()
    live = list(consumer.ids)
    leftovers: list[str] = []
    for attempt in range(5):
        found = drain_ids(cluster, queue)
        leftovers.extend(found)
        log(f"final drain pass {attempt + 1}: {len(found)} message(s)")
        if not found:
            break
    counts = Counter(live) + Counter(leftovers)
    confirmed = set(producer.confirmed)
    missing = sorted(confirmed - counts.keys())
    duplicates = {i: c for i, c in sorted(counts.items()) if c > 1}
    unknown = sorted(set(counts) - confirmed - {i for i, _ in producer.failed})
    leak_free = threads_after <= threads_before and fds_after <= fds_before
    return {
        "actions": actions,
        "seconds": args.chaos_seconds,
        "confirmed": len(confirmed),
        "failed_sends": len(producer.failed),
        "failed_examples": producer.failed[:5],
        "received_live": len(live),
        "drained_at_end": len(leftovers),
        "missing": len(missing),
        "missing_ids": missing[:50],
        "duplicates": sum(c - 1 for c in duplicates.values()),
        "duplicate_ids": duplicates,
        "unknown": len(unknown),
        "unknown_ids": unknown[:20],
        "failover_ms": failovers,
        "stats": stats,
        "leaks": {
            "threads_before": threads_before,
            "threads_after": threads_after,
            "fds_before": fds_before,
            "fds_after": fds_after,
            "new_threads": sorted(set(names_after) - set(names_before)),
        },
        "ok": not missing and leak_free,
    }
