"""Zero loss while clients move: one producer and one consumer of ours through every scenario.

Both are ``FailoverConnection`` s with ``rebalance=true`` and their own topology source, like
the fleet, so they move at joins, stops, kills and returns too. The producer sends persistent
messages with a stable ``message_id`` (and the same id in a ``bench-id`` header), each waiting
for the broker's confirmation; the consumer acks each message it receives (``client-individual``).
The brokers form a network, so a message sent to any broker is forwarded to the consumer's.
At the end, with every broker up, whatever is still on a broker (a message that reached a
broker the consumer had left) is drained from every broker until a pass finds nothing.
Lost: a confirmed id neither received nor drained.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._common import drain_ids, log
from failover_client import FailoverClientError, FailoverConnection, Message
from failover_client.testing.brokers import Cluster
from failover_client.topology import TopologySource

__all__ = ["LossCheck"]

QUEUE = "/queue/bench.rebalance"


class LossCheck:
    """A producer and a consumer running on threads until :meth:`finish`."""

    def __init__(
        self,
        uri: str,
        run: int,
        rate: float,
        new_source: Callable[[str], TopologySource],
    ) -> None:
        self.run = run
        self.period = 1.0 / rate
        self.confirmed: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.received: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = FailoverConnection(
            uri, client_id=f"run{run}-consumer", topology=[new_source(uri)]
        )
        self.consumer.subscribe(QUEUE, self._on_message, ack="client-individual")
        self.producer = FailoverConnection(
            uri, client_id=f"run{run}-producer", topology=[new_source(uri)]
        )
        self._thread = threading.Thread(target=self._produce, name="rebalance-producer")

    def start(self) -> None:
        self.consumer.connect()
        self.producer.connect()
        self._thread.start()

    def _on_message(self, message: Message) -> None:
        ident = message.headers.get("bench-id")
        if ident is not None:
            with self._lock:
                self.received.append(ident)
        message.ack()

    def _produce(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            ident = f"run{self.run}-m{n}"
            try:
                self.producer.send(
                    QUEUE, b"rebalance", {"bench-id": ident}, message_id=ident, timeout=60.0
                )
                self.confirmed.append(ident)
            except FailoverClientError as exc:  # not confirmed: may or may not arrive
                self.failed.append((ident, repr(exc)))
            n += 1
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def finish(self, cluster: Cluster) -> dict[str, Any]:
        """Stop sending, let the consumer catch up (every broker up), drain, count."""
        self._stop.set()
        self._thread.join(120.0)
        cluster.heal()
        self._wait_quiet(idle=2.0, limit=30.0)
        self.producer.close()
        self.consumer.close()
        leftovers: list[str] = []
        for attempt in range(5):
            found = drain_ids(cluster, QUEUE, idle=1.0)
            leftovers.extend(found)
            log(f"final drain pass {attempt + 1}: {len(found)} message(s)")
            if not found:
                break
        with self._lock:
            live = list(self.received)
        seen = set(live) | set(leftovers)
        confirmed = set(self.confirmed)
        lost = sorted(confirmed - seen)
        return {
            "confirmed": len(confirmed),
            "failed_sends": len(self.failed),
            "failed_examples": self.failed[:3],
            "received_live": len(set(live) & confirmed),
            "drained_at_end": len(set(leftovers) - set(live)),
            "received_at_least_once": len(confirmed & seen),
            "duplicates": len(live) + len(leftovers) - len(set(live) | set(leftovers)),
            "lost": len(lost),
            "lost_ids": lost[:20],
        }

    def _wait_quiet(self, idle: float, limit: float) -> None:
        """Until the consumer got nothing for ``idle`` seconds (at most ``limit``)."""
        end = time.monotonic() + limit
        count, since = -1, time.monotonic()
        while time.monotonic() < end:
            with self._lock:
                now = len(self.received)
            if now != count:
                count, since = now, time.monotonic()
            elif time.monotonic() - since >= idle:
                return
            time.sleep(0.1)

    def close(self) -> None:
        """Stop everything without counting (after a failure)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(120.0)
        self.producer.close()
        self.consumer.close()
