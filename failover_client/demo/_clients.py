"""The demo's two working clients: a paced producer and a consumer, both on FailoverConnection.

(The idle fleet that shows rebalancing is in :mod:`._fleet`.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from failover_client import (
    AckDropped,
    AllBrokersFailed,
    Clock,
    Connected,
    ConnectionClosed,
    Disconnected,
    Event,
    FailedOver,
    FailoverClientError,
    FailoverConnection,
    GaveUp,
    HandlerError,
    Message,
    PriorityRestored,
    Rebalanced,
    TopologyChanged,
)

from ._live import View
from ._record import Recorder

__all__ = ["ClientEvents", "Labeller", "Producer", "consumer_handler"]


class Labeller:
    """Turns a redacted broker address into the demo's label (A, B, ...), by port."""

    def __init__(self, ports: dict[int, str]) -> None:
        self._ports = dict(ports)

    def __call__(self, broker: str | None) -> str:
        if not broker:
            return "-"
        try:
            port = urlsplit(broker).port
        except ValueError:
            return "?"
        return self._ports.get(port or -1, "?")


class ClientEvents:
    """Listener: turns one client's connection events into view lines and failover records."""

    def __init__(self, client: str, recorder: Recorder, view: View, label: Labeller) -> None:
        self._client = client
        self._recorder = recorder
        self._view = view
        self._label = label

    def __call__(self, event: Event) -> None:
        text = self._describe(event)
        if text:
            self._view.event(self._recorder.event(self._client, text))

    def _describe(self, event: Event) -> str | None:  # noqa: PLR0911 - one line per event kind
        label = self._label
        if isinstance(event, Connected):
            return f"connected to {label(event.broker)}"
        if isinstance(event, Disconnected):
            cause = type(event.cause).__name__ if event.cause is not None else "closed"
            return f"lost broker {label(event.broker)} ({cause})"
        if isinstance(event, FailedOver):
            ms = event.duration * 1000.0
            old, new = label(event.from_broker), label(event.to_broker)
            self._recorder.failover(self._client, old, new, ms, "failover")
            return f"failed over {old} -> {new} in {ms:.0f} ms"
        if isinstance(event, PriorityRestored):
            old, new = label(event.from_broker), label(event.to_broker)
            self._recorder.failover(self._client, old, new, 0.0, "priority return")
            return f"back on priority broker {new} (left {old})"
        if isinstance(event, Rebalanced):
            old, new = label(event.from_broker), label(event.to_broker)
            self._recorder.failover(self._client, old, new, 0.0, "rebalance")
            return f"rebalanced {old} -> {new} (its rendezvous home)"
        if isinstance(event, TopologyChanged):
            added = ", ".join(label(a) for a in event.added) or "-"
            return f"broker list changed ({event.source}): added {added}"
        if isinstance(event, GaveUp):
            return f"gave up: {event.error}"
        if isinstance(event, AckDropped):
            return "an ack for a dead broker was dropped (the message will be redelivered)"
        if isinstance(event, HandlerError):
            return f"handler error: {event.error}"
        return None


class Producer(threading.Thread):
    """Sends ``rate`` confirmed messages per second until stopped; records every outcome."""

    def __init__(
        self,
        connection: FailoverConnection,
        destination: str,
        recorder: Recorder,
        label: Labeller,
        clock: Clock,
        *,
        rate: float,
        send_timeout: float = 20.0,
    ) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self._connection = connection
        self._destination = destination
        self._recorder = recorder
        self._label = label
        self._clock = clock
        self._interval = 1.0 / rate
        self._send_timeout = send_timeout
        self._stop_requested = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._stop_requested.set()

    def run(self) -> None:
        number = 0
        due = self._clock.monotonic()
        while not self._stop_requested.is_set():
            message_id = f"m-{number}"
            number += 1
            self._recorder.sent()
            try:
                self._connection.send(
                    self._destination,
                    f"{message_id} at {self._recorder.now():.3f}",
                    message_id=message_id,
                    timeout=self._send_timeout,
                )
            except ConnectionClosed:
                self._recorder.unconfirmed(message_id, "connection closed")
                return
            except AllBrokersFailed:
                # The reconnect loop gave up: no later send can succeed either.
                self._recorder.unconfirmed(message_id, "gave up")
                return
            except FailoverClientError as exc:
                self._recorder.unconfirmed(message_id, f"{type(exc).__name__}: {exc}")
            else:
                self._recorder.confirmed(message_id, self._label(self._connection.broker))
            due += self._interval
            now = self._clock.monotonic()
            if due < now - 1.0:
                due = now  # after a long failover, do not burst to catch up
            if due > now:
                self._clock.wait(self._stop_requested, due - now)


def consumer_handler(recorder: Recorder, label: Labeller) -> Callable[[Message], None]:
    """The consumer's handler: record the delivery (and the broker it came from), then ack."""

    def handle(message: Message) -> None:
        recorder.received(message.message_id or "?", label(getattr(message.session, "broker", "")))
        message.ack()

    return handle
