"""How many messages wait on the broker, where the broker says: ActiveMQ Classic's statistics.

ActiveMQ Classic with ``<statisticsBrokerPlugin/>`` in ``activemq.xml`` answers a message
sent to ``ActiveMQ.Statistics.Destination.<queue>`` with a map of the queue's statistics,
sent to the request's ``reply-to``; over STOMP, ``transformation: jms-map-json`` makes the
answer a JSON body. Its ``size`` counts every message the broker holds and has not seen
acknowledged, those delivered to this source and waiting for a commit included.

The source asks on its own connection: a temporary reply queue, subscribed once, and one
request per queue. A broker without the plugin never answers and keeps the request as an
ordinary message: the requests are non-persistent and expire after :data:`REQUEST_EXPIRES`
seconds, so such a queue does not grow. RabbitMQ, Artemis and AMQP members are never asked
(:func:`answers_statistics`); their depth is unknown to the source.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from failover_client import Clock, FailoverClientError, FailoverConnection, Message, SystemClock

__all__ = ["REQUEST_EXPIRES", "QueueDepth", "answers_statistics", "statistics_queue"]

log = logging.getLogger("failover_client.spark")

REQUEST_EXPIRES = 10.0
"""Seconds an unanswered statistics request stays on a broker without the plugin."""

_QUEUE_PREFIX = "/queue/"
_STATISTICS = "ActiveMQ.Statistics.Destination."


def answers_statistics(product: str | None) -> bool:
    """Whether a broker calling itself ``product`` may run the statistics plugin."""
    # Classic says "ActiveMQ/5.17.x"; Artemis "ActiveMQ-Artemis/2.x"; RabbitMQ "RabbitMQ/3.x".
    return product is not None and product.startswith("ActiveMQ/")


def statistics_queue(destination: str) -> str | None:
    """The statistics destination of a ``/queue/`` destination (None for anything else)."""
    if not destination.startswith(_QUEUE_PREFIX):
        return None
    return f"{_QUEUE_PREFIX}{_STATISTICS}{destination[len(_QUEUE_PREFIX) :]}"


class QueueDepth:
    """Asks the statistics plugin the depth of ``destinations`` over ``connection``.

    :meth:`request` sends the questions and returns at once; :meth:`latest` is the newest
    complete answer; :meth:`ask` waits for a fresh one. ``wall`` gives epoch seconds (the
    requests' expiry is a broker timestamp).
    """

    def __init__(
        self,
        connection: FailoverConnection,
        destinations: Sequence[str],
        *,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._connection = connection
        self._clock = clock or SystemClock()
        self._wall = wall
        self._queues = {
            f"queue://{d[len(_QUEUE_PREFIX) :]}": q
            for d in destinations
            if (q := statistics_queue(d)) is not None
        }
        self._complete = len(self._queues) == len(destinations)
        self._reply_to = f"/temp-queue/failover-depth-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._answered = threading.Event()
        self._sizes: dict[str, int] = {}
        self._latest: int | None = None
        self._subscribed = False

    @property
    def possible(self) -> bool:
        """Every destination is a queue (topics have no depth to ask for)."""
        return self._complete and bool(self._queues)

    def latest(self) -> int | None:
        """The newest depth every queue answered (None before the first complete answer)."""
        with self._lock:
            return self._latest

    def request(self) -> None:
        """Send one question per queue; the answers update :meth:`latest` as they come."""
        if not self.possible:
            return
        if not self._subscribed:
            self._connection.subscribe(
                self._reply_to,
                self._answer,
                ack="auto",
                headers={"transformation": "jms-map-json"},
            )
            self._subscribed = True
        with self._lock:
            self._sizes.clear()
            self._answered.clear()
        expires = int((self._wall() + REQUEST_EXPIRES) * 1000)
        headers = {"reply-to": self._reply_to, "persistent": "false", "expires": str(expires)}
        for statistics in self._queues.values():
            try:
                self._connection.send(statistics, b"", headers, confirm=False)
            except FailoverClientError as exc:
                # Only the lag figure suffers; the next request asks again.
                log.debug("failover source: queue depth request not sent: %s", exc)

    def ask(self, timeout: float) -> int | None:
        """Request and wait up to ``timeout`` for every queue's answer (None if not all came)."""
        if not self.possible:
            return None
        self.request()
        if not self._clock.wait(self._answered, timeout):
            return None
        return self.latest()

    def _answer(self, message: Message) -> None:
        try:
            name, size = _parsed(message.body)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("failover source: a queue statistics answer was not understood: %s", exc)
            return
        with self._lock:
            if name not in self._queues:
                return
            self._sizes[name] = size
            if len(self._sizes) == len(self._queues):
                self._latest = sum(self._sizes.values())
                self._answered.set()

    def __repr__(self) -> str:
        return f"QueueDepth(queues={len(self._queues)}, latest={self.latest()})"


def _parsed(body: bytes) -> tuple[str, int]:
    """``(destinationName, size)`` of a jms-map-json statistics answer."""
    entries = json.loads(body)["map"]["entry"]
    values: dict[str, object] = {}
    for entry in entries:
        key = entry["string"]
        if isinstance(key, list):  # a string-valued entry: ["key", "value"]
            values[key[0]] = key[1]
        else:
            values[key] = next(v for k, v in entry.items() if k != "string")
    size = values["size"]
    if not isinstance(size, int | str):
        raise TypeError(f"size is {size!r}")
    return str(values["destinationName"]), int(size)
