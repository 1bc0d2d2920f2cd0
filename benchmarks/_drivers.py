"""Producers for the failover benchmarks: one interface over raw stomp.py and FailoverConnection.

A driver sends one confirmed persistent message and returns the index (in the cluster) of the
broker that confirmed it. ``ProducerLoop`` calls it in a loop on its own thread and records
every change of the confirming broker with its time, so a benchmark can ask "when was the
first confirmation on another broker after this kill".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from benchmarks._common import broker_by_port, hosts, port_of
from benchmarks._raw import RawFailoverProducer
from failover_client import FailedOver, FailoverConnection
from failover_client.testing.brokers import Cluster

BODY = b"x" * 128


class Driver(Protocol):
    name: str

    def connect(self) -> None: ...

    def send(self, destination: str, body: bytes, headers: Mapping[str, str]) -> int: ...

    def current(self) -> int | None: ...

    def extra(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class RawDriver:
    """The hand-written stomp.py recipe (``_raw.RawFailoverProducer``)."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        start: int = 0,
        heartbeats: tuple[int, int] = (0, 0),
        connect_timeout: float = 2.0,
    ) -> None:
        self.name = "raw stomp.py recipe"
        self.producer = RawFailoverProducer(
            hosts(cluster), start=start, heartbeats=heartbeats, connect_timeout=connect_timeout
        )

    def connect(self) -> None:
        self.producer.connect()

    def send(self, destination: str, body: bytes, headers: Mapping[str, str]) -> int:
        return self.producer.send(destination, body, headers)

    def current(self) -> int | None:
        return self.producer.index if self.producer.conn is not None else None

    def extra(self) -> dict[str, Any]:
        return {"resent": self.producer.resent, "failovers": self.producer.failovers}

    def close(self) -> None:
        self.producer.close()


class FailoverDriver:
    """``FailoverConnection.send`` (blocking until confirmed)."""

    def __init__(self, cluster: Cluster, options: Mapping[str, object], name: str) -> None:
        self.name = name
        self.cluster = cluster
        self.uri = cluster.failover_uri("stomp", dict(options))  # type: ignore[arg-type]
        self.failed_over: list[float] = []
        self.conn = FailoverConnection(self.uri)
        self.conn.add_listener(self._on_event)

    def _on_event(self, event: object) -> None:
        if isinstance(event, FailedOver):
            self.failed_over.append(event.duration)

    def connect(self) -> None:
        self.conn.connect()

    def send(self, destination: str, body: bytes, headers: Mapping[str, str]) -> int:
        self.conn.send(destination, body, headers, timeout=30.0)
        return broker_by_port(self.cluster, port_of(self.conn.broker))

    def current(self) -> int | None:
        broker = self.conn.broker
        if broker is None or self.conn.state != "connected":
            return None
        return broker_by_port(self.cluster, port_of(broker))

    def extra(self) -> dict[str, Any]:
        stats = self.conn.stats()
        return {
            "replayed": stats.get("replayed"),
            "failovers": stats.get("failovers"),
            "library_failed_over_ms": [round(d * 1000, 2) for d in self.failed_over],
        }

    def standbys(self) -> int:
        return int(self.conn.stats().get("standbys", 0))

    def close(self) -> None:
        self.conn.close()


class ProducerLoop:
    """Calls ``driver.send`` in a loop on a thread; records confirmations and broker switches.

    ``pause()`` / ``resume()`` hold the loop between messages (so restarts and warm-ups of
    killed brokers do not pile up messages); the loop ends by itself after ``max_seconds``.
    """

    def __init__(
        self, driver: Driver, destination: str, prefix: str, max_seconds: float = 1800.0
    ) -> None:
        self.driver = driver
        self.destination = destination
        self.prefix = prefix
        self.max_seconds = max_seconds
        self.cond = threading.Condition()
        self.confirmed: dict[str, list[str]] = {}
        self.switches: list[tuple[float, int]] = []
        self.switch_ids: list[str] = []  # the id confirmed first after each switch
        self.last_broker: int | None = None
        self.count = 0
        self.sending_id = -1
        self.error: BaseException | None = None
        self._running = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{prefix}", daemon=True)

    def start(self) -> None:
        self._running.set()
        self._thread.start()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        self._thread.join(60.0)

    def _run(self) -> None:
        end = time.monotonic() + self.max_seconds
        n = 0
        try:
            while not self._stop.is_set() and time.monotonic() < end:
                if not self._running.is_set():
                    self._running.wait(1.0)
                    continue
                destination = self.destination
                ident = f"{self.prefix}-{n}"
                self.sending_id = n
                broker = self.driver.send(destination, BODY, {"bench-id": ident})
                now = time.monotonic()
                with self.cond:
                    self.confirmed.setdefault(destination, []).append(ident)
                    self.count += 1
                    if broker != self.last_broker:
                        self.switches.append((now, broker))
                        self.switch_ids.append(ident)
                        self.last_broker = broker
                    self.cond.notify_all()
                n += 1
        except BaseException as exc:  # reported by the benchmark, which stops the run
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def wait_count(self, extra: int, timeout: float = 30.0) -> bool:
        """Wait until ``extra`` more messages are confirmed."""
        with self.cond:
            target = self.count + extra
            return self.cond.wait_for(
                lambda: self.count >= target or self.error is not None, timeout
            )

    def first_switch_after(
        self, since: float, away_from: int, timeout: float = 30.0
    ) -> tuple[float, int] | None:
        """(time, broker) of the first confirmation after ``since`` on a broker other than
        ``away_from``; None if none within ``timeout``."""

        def found() -> tuple[float, int] | None:
            for t, broker in self.switches:
                if t >= since and broker != away_from:
                    return t, broker
            return None

        with self.cond:
            self.cond.wait_for(lambda: found() is not None or self.error is not None, timeout)
            return found()

    def all_confirmed(self) -> dict[str, list[str]]:
        with self.cond:
            return {d: list(ids) for d, ids in self.confirmed.items()}


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    """Poll ``predicate`` (bounded): for state that has no event to wait on (a standby)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
