"""Chaos: brokers killed or hung every few seconds under a failover producer and consumer.

Run: ``python benchmarks/bench_chaos.py [--seconds 120] [--interval 3] [--rate 200] [--seed 1]``

Three ActiveMQ Classic brokers in a network of brokers (full mesh of static network
connectors, from the harness). Why a network and not independent brokers: a message sent to
one broker is forwarded to the broker where the consumer is, so the consumer, through its own
failover connection, really receives messages that were sent to any broker, and "every
confirmed message received at least once" exercises the consumer's path (subscription restored
after every failover, client acks). With independent brokers a consumer only ever sees the
broker it sits on; the messages on the others would be found only by the final drain, which
checks the brokers' stores rather than the client. Whatever is still on a broker at the end
(messages stranded on a broker whose consumer left, or not yet forwarded) is drained from every
broker, repeatedly until a full pass finds nothing.

A producer (``FailoverConnection.send``, confirmed, persistent, ``--rate`` messages per second)
and a consumer (``FailoverConnection.subscribe``, ``client-individual`` acks) both use 500 ms
heart-beats. Every ``--interval`` seconds one broker, picked at random (seeded), is SIGKILLed
and restarted, or SIGSTOPped and resumed, after ``--down`` seconds; one broker at a time.

Checked at the end: every confirmed id was received (live or in the final drain) at least once;
duplicates are counted and all identified by id; threads (``threading.enumerate()``) and open
file descriptors (/proc/self/fd) of this process are the same before the connections were made
and after they were closed. Exits 1 if a confirmed message is missing or something leaked.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks._common import (
    brokers,
    drain_ids,
    log,
    machine,
    open_fds,
    precreate,
    table,
    thread_names,
    warm,
    write_json,
)
from failover_client import FailedOver, FailoverClientError, FailoverConnection, Message
from failover_client.testing.brokers import Cluster

QUEUE = "/queue/bench.chaos"


class Producer:
    """Confirmed sends at a fixed rate on a thread; records confirmed and failed ids."""

    def __init__(self, conn: FailoverConnection, rate: float) -> None:
        self.conn = conn
        self.period = 1.0 / rate
        self.confirmed: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def _run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            ident = f"c-{n}"
            try:
                self.conn.send(QUEUE, b"chaos", {"bench-id": ident}, timeout=30.0)
                self.confirmed.append(ident)
            except FailoverClientError as exc:  # not confirmed: may or may not arrive
                self.failed.append((ident, repr(exc)))
            n += 1
            next_at += self.period
            self.stop.wait(max(0.0, next_at - time.monotonic()))


class Consumer:
    """Records the bench-id of every message delivered, acking each one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: list[str] = []

    def __call__(self, message: Message) -> None:
        ident = message.headers.get("bench-id")
        if ident is not None:
            with self.lock:
                self.ids.append(ident)
        message.ack()


def chaos(
    cluster: Cluster, seconds: float, interval: float, down: float, rng: random.Random
) -> list[dict[str, Any]]:
    """Disturb one broker at a time until ``seconds`` have passed; returns what was done."""
    actions: list[dict[str, Any]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(interval, max(0.0, end - time.monotonic())))
        if time.monotonic() >= end:
            break
        index = rng.randrange(len(cluster))
        what = rng.choice(("kill", "hang"))
        broker = cluster[index]
        at = time.monotonic()
        if what == "kill":
            broker.kill()
            time.sleep(down)
            broker.start()
        else:
            broker.hang()
            time.sleep(down)
            broker.resume()
            broker.wait_ready(30.0)
        actions.append(
            {
                "t": round(at - (end - seconds), 2),
                "broker": index,
                "action": what,
                "back_after_s": round(time.monotonic() - at, 2),
            }
        )
        log(f"chaos: {what} broker {index}, back after {actions[-1]['back_after_s']} s")
    return actions


def settle_threads(baseline: int, timeout: float = 10.0) -> int:
    """Thread count once threads that are finishing have ended (bounded wait)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and threading.active_count() > baseline:
        time.sleep(0.05)
    return threading.active_count()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="chaos duration")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between faults")
    parser.add_argument("--down", type=float, default=1.5, help="seconds a broker stays down")
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="30 s of chaos")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = 30.0
    started = time.time()
    rng = random.Random(args.seed)
    result: dict[str, Any] = {"benchmark": "chaos", "machine": machine(), "args": vars(args)}
    with brokers(3, network=True, label="chaos", full_jit=False) as cluster:
        for broker in cluster:
            warm(broker, "/queue/bench.warmup", 1000)
        precreate(cluster, QUEUE)
        time.sleep(1.0)  # the set-up's own stomp.py threads finish
        gc.collect()
        threads_before, fds_before = threading.active_count(), open_fds()
        names_before = thread_names()
        uri = cluster.failover_uri("stomp", {"heartbeat": "500,500"})
        failovers: dict[str, list[float]] = {"producer": [], "consumer": []}

        def recorder(role: str) -> Any:
            def listen(event: object) -> None:
                if isinstance(event, FailedOver):
                    failovers[role].append(round(event.duration * 1000, 1))

            return listen

        consumer = Consumer()
        consumer_conn = FailoverConnection(uri, listeners=[recorder("consumer")])
        consumer_conn.subscribe(QUEUE, consumer, ack="client-individual")
        consumer_conn.connect()
        producer_conn = FailoverConnection(uri, listeners=[recorder("producer")])
        producer_conn.connect()
        producer = Producer(producer_conn, args.rate)
        producer.thread.start()
        try:
            actions = chaos(cluster, args.seconds, args.interval, args.down, rng)
        finally:
            producer.stop.set()
            producer.thread.join(60.0)
            cluster.heal()
            # Let the consumer take what is still arriving, then stop it.
            time.sleep(3.0)
            producer_stats, consumer_stats = producer_conn.stats(), consumer_conn.stats()
            producer_conn.close()
            consumer_conn.close()
        gc.collect()
        threads_after = settle_threads(threads_before)
        fds_after = open_fds()
        names_after = thread_names()
        live = list(consumer.ids)
        leftovers: list[str] = []
        for attempt in range(5):
            found = drain_ids(cluster, QUEUE, idle=1.0)  # every broker, one after another
            leftovers.extend(found)
            log(f"final drain pass {attempt + 1}: {len(found)} message(s)")
            if not found:
                break

    counts = Counter(live) + Counter(leftovers)
    confirmed = set(producer.confirmed)
    missing = sorted(confirmed - counts.keys())
    duplicates = {i: c for i, c in counts.items() if c > 1}
    unknown = sorted(set(counts) - confirmed - {i for i, _ in producer.failed})
    leaks = {
        "threads_before": threads_before,
        "threads_after": threads_after,
        "fds_before": fds_before,
        "fds_after": fds_after,
        "new_threads": sorted(set(names_after) - set(names_before)),
    }
    ok = not missing and threads_after <= threads_before and fds_after <= fds_before
    text = table(
        f"Chaos: {len(actions)} faults in {args.seconds:g} s (3-broker network, 500 ms "
        "heart-beats)",
        [
            "confirmed",
            "failed sends",
            "received live",
            "drained at end",
            "missing",
            "duplicates",
            "dup ids",
            "unknown ids",
            "producer failovers",
            "consumer failovers",
            "threads b/a",
            "fds b/a",
        ],
        [
            [
                len(confirmed),
                len(producer.failed),
                len(live),
                len(leftovers),
                len(missing),
                sum(c - 1 for c in duplicates.values()),
                len(duplicates),
                len(unknown),
                len(failovers["producer"]),
                len(failovers["consumer"]),
                f"{threads_before}/{threads_after}",
                f"{fds_before}/{fds_after}",
            ]
        ],
    )
    result.update(
        actions=actions,
        confirmed=len(confirmed),
        failed_sends=len(producer.failed),
        failed_examples=producer.failed[:5],
        received_live=len(live),
        drained_at_end=len(leftovers),
        missing=len(missing),
        missing_ids=missing[:50],
        duplicates=sum(c - 1 for c in duplicates.values()),
        duplicate_ids=sorted(duplicates)[:50],
        unknown_ids=unknown[:20],
        failover_ms=failovers,
        producer_stats=producer_stats,
        consumer_stats=consumer_stats,
        leaks=leaks,
        table=text,
        seconds=round(time.time() - started, 1),
        ok=ok,
    )
    write_json("chaos", result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
