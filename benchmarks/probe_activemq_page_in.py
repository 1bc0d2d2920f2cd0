"""How much of a stored ActiveMQ Classic backlog a consumer gets while it acknowledges nothing.

Run: ``python benchmarks/probe_activemq_page_in.py [--rounds 3] [--max-page-size N]``

One ActiveMQ Classic broker as the test harness starts it. For each case (messages queued,
subscription prefetch) a fresh queue is filled with persistent messages, every send confirmed,
and left idle for a second; then one consumer subscribes in ``client-individual`` mode with
that prefetch, takes messages without acknowledging any, and stops after ``--idle`` seconds
without one. The consumers take turns in each round, so machine noise falls on all alike:

* ``failover-client``: ``FailoverConnection.subscribe(...).receive()``, as shipped;
* ``failover-client, no wake-ups``: the same with ``failover_client.stomp._pagein`` switched
  off (what the library did before it woke the queue);
* ``stomp.py``: a raw ``stomp.Connection12`` with the same prefetch header, no receipt.

Prints, per case and consumer, the messages received in each round and the median seconds
from SUBSCRIBE to the last one. ``--max-page-size`` gives the broker a destination policy
(``<policyEntry queue=">" maxPageSize=N/>``), the broker-side remedy, by editing the harness's
rendered broker.xml from this script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import stomp

from benchmarks._common import brokers, log, table
from failover_client import FailoverConnection
from failover_client.stomp import _pagein
from failover_client.testing.brokers import Broker
from failover_client.testing.brokers import _activemq as harness_activemq

CASES = ((3_000, 3_000), (8_000, 3_000), (8_000, 8_000))


def with_max_page_size(size: int) -> None:
    """Make the brokers started from now on page in ``size`` messages per wake-up."""
    render = harness_activemq.render_broker_xml
    policy = (
        "    <destinationPolicy><policyMap><policyEntries>"
        f'<policyEntry queue="&gt;" maxPageSize="{size}"/>'
        "</policyEntries></policyMap></destinationPolicy>\n"
    )

    def patched(cfg: harness_activemq.ActiveMQConfig) -> str:
        return render(cfg).replace(
            "    <persistenceAdapter>", policy + "    <persistenceAdapter>", 1
        )

    harness_activemq.render_broker_xml = patched  # type: ignore[assignment]


def ours(broker: Broker, queue: str, prefetch: int, idle: float) -> tuple[int, float]:
    with FailoverConnection(f"failover:({broker.uri('stomp')})") as connection:
        subscription = connection.subscribe(queue, ack="client-individual", prefetch=prefetch)
        start = time.perf_counter()
        connection.connect(timeout=30)
        taken, last = 0, start
        while subscription.receive(idle) is not None:  # ends after `idle` s without a message
            taken, last = taken + 1, time.perf_counter()
        return taken, last - start


def ours_unwoken(broker: Broker, queue: str, prefetch: int, idle: float) -> tuple[int, float]:
    needs_waking = _pagein._needs_waking
    _pagein._needs_waking = lambda spec, kind: False  # type: ignore[assignment]
    try:
        return ours(broker, queue, prefetch, idle)
    finally:
        _pagein._needs_waking = needs_waking  # type: ignore[assignment]


def raw(broker: Broker, queue: str, prefetch: int, idle: float) -> tuple[int, float]:
    endpoint = broker.endpoint("stomp")
    lock = threading.Lock()
    seen = [0, time.perf_counter()]

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: object) -> None:
            with lock:
                seen[0] += 1
                seen[1] = time.perf_counter()

    connection = stomp.Connection12([(endpoint.host, endpoint.port)])
    connection.set_listener("", Listener())
    connection.connect(wait=True)
    start = time.perf_counter()
    with lock:
        seen[1] = start
    connection.subscribe(
        queue, id="1", ack="client-individual", headers={"activemq.prefetchSize": str(prefetch)}
    )
    while True:
        time.sleep(0.05)  # polling a counter; ends once `idle` s pass without a message
        with lock:
            taken, last = seen
        if time.perf_counter() - last >= idle:
            connection.disconnect()
            return int(taken), last - start


CONSUMERS: dict[str, Callable[[Broker, str, int, float], tuple[int, float]]] = {
    "failover-client": ours,
    "failover-client, no wake-ups": ours_unwoken,
    "stomp.py": raw,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds without a message")
    parser.add_argument("--max-page-size", type=int, default=0, help="0: the broker's default")
    args = parser.parse_args()
    if args.max_page_size:
        with_max_page_size(args.max_page_size)
    counts: dict[tuple[int, int, str], list[int]] = {}
    seconds: dict[tuple[int, int, str], list[float]] = {}
    with brokers(1, label="pagein", full_jit=False) as cluster:
        broker = cluster[0]
        for round_ in range(args.rounds):
            for queued, prefetch in CASES:
                for name, consume in CONSUMERS.items():
                    queue = f"/queue/pagein-{uuid.uuid4().hex[:10]}"
                    broker.send(queue, [f"m-{n}" for n in range(queued)])
                    time.sleep(1.0)  # stored and idle: no send left to wake the queue
                    taken, took = consume(broker, queue, prefetch, args.idle)
                    log(f"round {round_}: {queued} queued, prefetch {prefetch}, {name}: {taken}")
                    counts.setdefault((queued, prefetch, name), []).append(taken)
                    seconds.setdefault((queued, prefetch, name), []).append(took)
                    broker.drain(queue, timeout=60, idle=1.0, expect=queued)
    page = args.max_page_size or "default (200)"
    table(
        f"ActiveMQ Classic, maxPageSize {page}: messages received without acknowledging "
        f"(per round), idle {args.idle:g} s ends a consumer; pid {os.getpid()}",
        ["queued", "prefetch", "consumer", "received", "median s to the last"],
        [
            (
                q,
                p,
                n,
                ", ".join(str(c) for c in counts[q, p, n]),
                statistics.median(seconds[q, p, n]),
            )
            for q, p in CASES
            for n in CONSUMERS
        ],
    )


if __name__ == "__main__":
    main()
