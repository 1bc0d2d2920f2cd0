"""Consumer throughput on one ActiveMQ broker: the STOMP adapter vs raw stomp.py, same run.

Run: ``python benchmarks/bench_consume_adapter.py [--reps 3] [--messages 20000]``

The question: does bounded consumption cost anything at the adapter? Per-message ACKs in
``client-individual`` mode, as measured here, are what the engine wrote for a user's ``auto``
subscription before it acknowledged callback subscriptions cumulatively (``client`` mode, one
ACK per half window); raw stomp.py with ``ack=auto`` is the fastest consumer stomp.py has.
Methods, each reading ``--messages`` 128-byte persistent messages already queued (filled
before the clock starts, to a fresh queue):

* ``raw auto``: stomp.py 9 ``ack=auto`` (ActiveMQ's default STOMP prefetch), counting in
  ``on_message``;
* ``raw client-individual``: stomp.py, ``activemq.prefetchSize:100``, an ``ack()`` per message
  in ``on_message`` (the same ack mode as ours, written by hand);
* ``adapter client-individual``: ``StompSession``, ``prefetch=100``, an ACK per message in
  ``on_message`` (the I/O thread);
* ``adapter client-individual, ACK from a handler thread``: the same, but each message is
  handed to another thread that ACKs it, as the engine's dispatch does.

A run's rate is messages over the time from SUBSCRIBE to the last message. Each repetition
runs the methods down the list and back up (A B C D D C B A) so order does not favour one;
medians over repetitions, the ratio of each method to ``raw auto`` and to
``raw client-individual``, and the client's CPU time per message (this process, every thread:
unlike wall time it does not count waiting for a core another process holds). The broker's
store is in memory (``/dev/shm``) so the client's cost shows; client and broker share the
machine's cores.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

import stomp  # type: ignore[import-untyped]

from benchmarks._common import brokers, log, machine, ratio, table, warm
from failover_client import BrokerAddress, FailoverOptions
from failover_client.adapter import Cancel, Received, Session, SubscriptionSpec
from failover_client.stomp import StompConnector

BODY = b"x" * 128
PREFETCH = 100
SAFETY = 300.0

Method = Callable[[tuple[str, int], str, int], float]
"""(host, destination, count) -> seconds from SUBSCRIBE to the last message."""

Run = tuple[float, float]
"""(seconds, this process's CPU seconds) of one method's run."""


def fill(host: tuple[str, int], destination: str, count: int) -> None:
    """Queue ``count`` persistent messages, the last one confirmed (so all are stored)."""
    conn = stomp.Connection12([host], heartbeats=(0, 0), auto_decode=False)
    done = threading.Event()

    class _L(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            done.set()

    conn.set_listener("fill", _L())
    conn.connect(wait=True)
    try:
        for _ in range(count - 1):
            conn.send(destination, BODY, headers={"persistent": "true"})
        conn.send(destination, BODY, headers={"persistent": "true"}, receipt="last")
        if not done.wait(SAFETY):
            raise TimeoutError("the fill was not confirmed")
    finally:
        conn.disconnect()


class _Counter:
    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        self.done = threading.Event()
        self.last = 0.0

    def one(self) -> None:
        self.seen += 1
        if self.seen == self.count:
            self.last = time.perf_counter()
            self.done.set()

    def wait(self, started: float) -> float:
        if not self.done.wait(SAFETY):
            raise TimeoutError(f"{self.seen} of {self.count} messages arrived")
        return self.last - started


def raw_consumer(ack: str) -> Method:
    def run(host: tuple[str, int], destination: str, count: int) -> float:
        counter = _Counter(count)
        conn = stomp.Connection12([host], heartbeats=(0, 0), auto_decode=False)

        class _L(stomp.ConnectionListener):  # type: ignore[misc]
            def on_message(self, frame: Any) -> None:
                if ack != "auto":
                    conn.ack(frame.headers["ack"])
                counter.one()

        conn.set_listener("bench", _L())
        conn.connect(wait=True)
        headers = {} if ack == "auto" else {"activemq.prefetchSize": str(PREFETCH)}
        started = time.perf_counter()
        conn.subscribe(destination, id="s", ack=ack, headers=headers)
        try:
            return counter.wait(started)
        finally:
            conn.disconnect()

    return run


class _Listener:
    def __init__(self, on_message: Callable[[Received], None]) -> None:
        self._on_message = on_message

    def on_message(self, session: Session, message: Received) -> None:
        self._on_message(message)

    def on_lost(self, session: Session, cause: BaseException) -> None:
        log(f"session lost: {cause}")

    def on_brokers(self, session: Session, advertised: object) -> None:
        """Not used: a single broker."""


def adapter_consumer(*, handler_thread: bool) -> Method:
    def run(host: tuple[str, int], destination: str, count: int) -> float:
        counter = _Counter(count)
        session_box: list[Session] = []
        handed: queue.SimpleQueue[Received | None] = queue.SimpleQueue()

        def acked(message: Received) -> None:
            session_box[0].ack(message)
            counter.one()

        def dispatch() -> None:
            while (message := handed.get()) is not None:  # ends at the None put below
                acked(message)

        listener = _Listener(handed.put if handler_thread else acked)
        connector = StompConnector(FailoverOptions(), heartbeat=(0, 0))
        session = connector.connect(
            BrokerAddress("stomp", *host), timeout=10.0, listener=listener, cancel=Cancel()
        )
        session_box.append(session)
        worker = threading.Thread(target=dispatch, name="bench-dispatch", daemon=True)
        worker.start()
        spec = SubscriptionSpec("s", destination, ack="client-individual", prefetch=PREFETCH)
        started = time.perf_counter()
        session.subscribe(spec, None)
        try:
            return counter.wait(started)
        finally:
            handed.put(None)
            worker.join(SAFETY)
            session.close()

    return run


METHODS: dict[str, Method] = {
    "raw auto": raw_consumer("auto"),
    "raw client-individual": raw_consumer("client-individual"),
    "adapter client-individual": adapter_consumer(handler_thread=False),
    "adapter client-individual, ACK from a handler thread": adapter_consumer(handler_thread=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    names = list(METHODS)
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu_us: dict[str, list[float]] = {name: [] for name in names}
    with brokers(1, label="consume", store="/dev/shm") as cluster:
        broker = cluster[0]
        endpoint = broker.endpoint("stomp")
        host = (endpoint.host, endpoint.port)
        warm(broker, "/queue/bench.warmup", 5000)
        for rep in range(args.reps + 1):  # round 0 warms the JIT of both sides, unrecorded
            for name in names + names[::-1]:
                destination = f"/queue/bench.consume.{uuid.uuid4().hex[:8]}"
                fill(host, destination, args.messages)
                cpu_start = time.process_time()
                seconds = METHODS[name](host, destination, args.messages)
                cpu = (time.process_time() - cpu_start) / args.messages * 1e6
                rate = args.messages / seconds
                log(
                    f"{'warm-up' if rep == 0 else f'rep {rep}'}: {name:52} {rate:>9,.0f} msg/s "
                    f"{cpu:6.1f} us CPU/msg"
                )
                if rep > 0:
                    rates[name].append(rate)
                    cpu_us[name].append(cpu)
    medians = {name: statistics.median(r) for name, r in rates.items()}
    rows = [
        (
            name,
            f"{medians[name]:,.0f}",
            f"{ratio(medians[name], medians['raw auto']):.2f}",
            f"{ratio(medians[name], medians['raw client-individual']):.2f}",
            f"{statistics.median(cpu_us[name]):.1f}",
        )
        for name in names
    ]
    print(
        table(
            f"Consumer throughput, {args.messages} x 128 B persistent, ActiveMQ "
            f"(median of {args.reps}); machine: {machine().get('cpu', '?')}",
            ["method", "msg/s", "vs raw auto", "vs raw client-individual", "CPU us/msg"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
