"""Shared helpers for the ``test_failover_*`` modules (this module holds no tests).

What the failover tests need beyond the harness: an event recorder with deadline waits, a
producer thread that remembers what was confirmed, a check of what the brokers really hold
against what the library claimed, URIs for each broker kind, and a leak check (threads and
file descriptors) around a connection's life.

Waits are condition-variable waits with generous deadlines (``SAFETY``): they return as soon as
the awaited thing happens and fail the test only when it never does. Latencies are printed
(``-s``), never asserted.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

from failover_client import MESSAGE_ID_HEADER, Disconnected, Event, FailoverConnection, Message
from failover_client.testing.brokers import Broker, BrokerKind, Cluster, ReceivedMessage

__all__ = [
    "SAFETY",
    "Delivery",
    "Events",
    "Inbox",
    "LeakCheck",
    "Producer",
    "broker_at",
    "check_delivery",
    "credentials",
    "drain_all",
    "durable_queue",
    "failover_uri",
    "library_threads",
]

SAFETY = 30.0
"""Seconds a wait may take before the test fails; only ever reached when something is broken."""

LIBRARY_THREAD_PREFIXES = ("failover-client-", "stomp-")

E = TypeVar("E")


# Short reconnect delays keep the tests quick; the order is fixed so a test knows who is first.
FAST: dict[str, str | int | float | bool] = {
    "randomize": False,
    "initialReconnectDelay": 10,
    "maxReconnectDelay": 1000,
}


def library_threads() -> list[threading.Thread]:
    """Live threads started by the library (connection loop, dispatch, adapter I/O)."""
    return [t for t in threading.enumerate() if t.name.startswith(LIBRARY_THREAD_PREFIXES)]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _fd_target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


class LeakCheck:
    """Threads and descriptors before a connection's life, compared after it is closed."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        self.fds = _open_fds()
        self.leaked_until_gc: dict[str, str] = {}

    def assert_clean(self, *, allow_gc: bool = True) -> None:
        """No thread of the library left and no descriptor more than before (sockets closed).

        With ``allow_gc`` a descriptor that only a garbage collection releases (an object
        dropped without being closed) is tolerated; ``leaked_until_gc`` lists those.
        """
        for thread in library_threads():
            thread.join(SAFETY)
        left = [t.name for t in library_threads()]
        assert left == [], f"library threads still alive after close: {left}"
        extra_threads = [t.name for t in set(threading.enumerate()) - self.threads]
        assert extra_threads == [], f"threads left behind: {extra_threads}"
        self.leaked_until_gc = {fd: _fd_target(fd) for fd in _open_fds() - self.fds}
        if allow_gc:
            gc.collect()
        extra_fds = {fd: _fd_target(fd) for fd in _open_fds() - self.fds}
        assert extra_fds == {}, f"descriptors left open: {extra_fds}"


class Events:
    """A listener that records every event and lets a test wait for one."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.log: list[tuple[float, Event]] = []

    def __call__(self, event: Event) -> None:
        with self.cond:
            self.log.append((time.monotonic(), event))
            self.cond.notify_all()

    def mark(self) -> int:
        """A position in the log: pass it as ``after`` to wait only for later events."""
        with self.cond:
            return len(self.log)

    def of(self, kind: type[E], after: int = 0) -> list[E]:
        with self.cond:
            return [e for _, e in self.log[after:] if isinstance(e, kind)]

    def wait_for(
        self,
        kind: type[E],
        predicate: Callable[[E], bool] = lambda _: True,
        *,
        after: int = 0,
        timeout: float = SAFETY,
    ) -> E:
        """The first ``kind`` event from position ``after`` on that satisfies ``predicate``."""

        def find() -> E | None:
            for _, event in self.log[after:]:
                if isinstance(event, kind) and predicate(event):
                    return event
            return None

        with self.cond:
            self.cond.wait_for(lambda: find() is not None, timeout)
            found = find()
        if found is None:
            names = [type(e).__name__ for _, e in self.log[after:]]
            raise AssertionError(f"no {kind.__name__} event within {timeout}s; saw {names}")
        return found

    def time_of(self, event: object) -> float:
        with self.cond:
            return next(t for t, e in self.log if e is event)


class Inbox:
    """A subscription handler that keeps every message; can ack at once or hold the acks."""

    def __init__(self, *, ack: bool = True) -> None:
        self.cond = threading.Condition()
        self.messages: list[Message] = []
        self._ack = ack

    def __call__(self, message: Message) -> None:
        if self._ack:
            message.ack()
        with self.cond:
            self.messages.append(message)
            self.cond.notify_all()

    def bodies(self) -> list[str]:
        with self.cond:
            return [m.body.decode() for m in self.messages]

    def wait_for_bodies(self, wanted: Iterable[str], timeout: float = SAFETY) -> None:
        missing = set(wanted)
        with self.cond:
            self.cond.wait_for(lambda: missing <= {m.body.decode() for m in self.messages}, timeout)
            got = {m.body.decode() for m in self.messages}
        assert missing <= got, f"never received {sorted(missing - got)[:10]} (got {len(got)})"


class Producer(threading.Thread):
    """Sends ``prefix-<n>`` bodies one confirmed ``send`` at a time until stopped or done.

    Remembers which bodies were confirmed and in which order, and the first error.
    """

    def __init__(
        self,
        connection: FailoverConnection,
        destination: str,
        *,
        count: int | None = None,
        prefix: str = "m",
        timeout: float | None = SAFETY,
    ) -> None:
        super().__init__(name=f"test-producer-{prefix}", daemon=True)
        self.connection = connection
        self.destination = destination
        self.count = count
        self.prefix = prefix
        self.timeout = timeout
        self.cond = threading.Condition()
        self.confirmed: list[str] = []
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_requested.is_set() and (self.count is None or n < self.count):
            body = f"{self.prefix}-{n}"
            try:
                self.connection.send(self.destination, body, timeout=self.timeout)
            except Exception as exc:
                with self.cond:
                    self.error = exc
                    self.cond.notify_all()
                return
            with self.cond:
                self.confirmed.append(body)
                self.cond.notify_all()
            n += 1

    def wait_confirmed(self, count: int, timeout: float = SAFETY) -> None:
        """Until at least ``count`` more sends than now are confirmed (or the producer failed)."""
        with self.cond:
            target = len(self.confirmed) + count
            self.cond.wait_for(
                lambda: len(self.confirmed) >= target or self.error is not None, timeout
            )
            assert self.error is None, f"producer failed: {self.error!r}"
            assert len(self.confirmed) >= target, f"only {len(self.confirmed)} confirmed"

    def finish(self) -> list[str]:
        """Stop after the current send; return what was confirmed (raises the producer's error)."""
        self._stop_requested.set()
        self.join(SAFETY)
        assert not self.is_alive(), "producer did not stop"
        assert self.error is None, f"producer failed: {self.error!r}"
        return list(self.confirmed)


def failover_uri(
    cluster: Cluster,
    options: Mapping[str, str | int | float | bool] | None = None,
    *,
    order: Sequence[int] | None = None,
    endpoint: str = "stomp",
) -> str:
    """``failover:(...)?...`` over the cluster's brokers (RabbitMQ members name vhost ``/``)."""
    brokers = [cluster[i] for i in order] if order is not None else list(cluster)
    members = []
    for broker in brokers:
        member = broker.uri(endpoint)
        if broker.vhost:
            member += f"?vhost={broker.vhost}"
        members.append(member)
    uri = f"failover:({','.join(members)})"
    if not options:
        return uri
    pairs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
    return f"{uri}?{urlencode(pairs, safe=',:/')}"


def credentials(cluster: Cluster) -> dict[str, Any]:
    """``login`` / ``passcode`` keyword arguments the cluster's brokers accept."""
    login, passcode = cluster[0].credentials or (None, None)
    return {"login": login, "passcode": passcode}


def broker_at(cluster: Cluster, redacted: str | None) -> Broker:
    """The cluster's broker behind a redacted member address (as events and ``.broker`` show)."""
    assert redacted is not None, "not connected"
    port = urlsplit(redacted).port
    for broker in cluster:
        if any(ep.port == port for ep in broker.endpoints.values()):
            return broker
    raise AssertionError(f"{redacted} is none of {cluster!r}")


def queue_name(destination: str) -> str:
    return destination.rsplit("/", 1)[-1]


def send_destination(broker: Broker, destination: str) -> str:
    """Where a failover client should send ``/queue/x``: RabbitMQ wants a pre-declared queue."""
    if broker.kind is BrokerKind.RABBITMQ:
        return f"/amq/queue/{queue_name(destination)}"
    return destination


def durable_queue(cluster: Cluster) -> str:
    """A fresh ``/queue/x`` that exists, durable, on every node and survives a SIGKILL.

    On ActiveMQ (queues are created on first use, in KahaDB) any fresh name will do. RabbitMQ
    3.10 writes queue definitions behind (a queue declared a second before a SIGKILL was gone
    after the restart), so each node's metadata log is synced to disk before the name is used.
    """
    if cluster[0].kind is not BrokerKind.RABBITMQ:
        return f"/queue/fc-{uuid.uuid4().hex[:12]}"
    name = f"fc-durable-{uuid.uuid4().hex[:12]}"
    for broker in cluster:
        broker.declare_queue(name)  # type: ignore[attr-defined]
        broker.sync_definitions()  # type: ignore[attr-defined]
    return f"/queue/{name}"


def connected_then_all_down(
    cluster: Cluster, options: Mapping[str, str | int | float | bool] = FAST
) -> FailoverConnection:
    """A connected FailoverConnection whose every broker was then SIGKILLed (loss observed)."""
    events = Events()
    conn = FailoverConnection(failover_uri(cluster, options), listeners=[events])
    conn.connect()
    mark = events.mark()
    for broker in cluster:
        broker.kill()
    events.wait_for(Disconnected, after=mark)
    return conn


def drain_all(cluster: Cluster, destination: str) -> list[ReceivedMessage]:
    """Everything ``destination`` holds on every broker (all must be up)."""
    found: list[ReceivedMessage] = []
    for broker in cluster:
        found.extend(broker.drain(destination, timeout=SAFETY, idle=1.0))
    return found


@dataclass
class Delivery:
    """What the brokers held, compared with what the library confirmed."""

    copies: Counter[str] = field(default_factory=Counter)
    ids: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, messages: Iterable[ReceivedMessage]) -> Delivery:
        delivery = cls()
        for message in messages:
            body = message.text
            delivery.copies[body] += 1
            delivery.ids.setdefault(body, set()).add(message.headers.get(MESSAGE_ID_HEADER, ""))
        return delivery

    @property
    def duplicates(self) -> set[str]:
        return {body for body, n in self.copies.items() if n > 1}


def check_delivery(
    messages: Iterable[ReceivedMessage],
    confirmed: Iterable[str],
    may_duplicate: Iterable[str] = (),
) -> Delivery:
    """Zero loss, duplicates only where allowed, one stable non-empty id per message."""
    delivery = Delivery.of(messages)
    lost = sorted(set(confirmed) - set(delivery.copies))
    assert lost == [], f"{len(lost)} confirmed message(s) missing on every broker: {lost[:10]}"
    unexpected = sorted(delivery.duplicates - set(may_duplicate))
    assert unexpected == [], f"duplicates of messages that were not in flight: {unexpected[:10]}"
    for body, ids in delivery.ids.items():
        assert len(ids) == 1, f"{body} arrived with different ids {ids}"
        assert "" not in ids, f"{body} arrived without a {MESSAGE_ID_HEADER} header"
    all_ids = [next(iter(ids)) for ids in delivery.ids.values()]
    assert len(all_ids) == len(set(all_ids)), "two different messages share one id"
    return delivery
