"""Raw python-qpid-proton drivers for the AMQP benchmark: what an application writes by hand.

Nothing here goes through failover_client. Two ways to send confirmed messages to RabbitMQ
with plain proton, and one failover producer:

* :func:`container_burst`: a ``Container`` and a ``MessagingHandler`` writing as far as link
  credit allows and counting each delivery's acceptance (or, ``presettled=True``, settling
  every delivery as it is written, all but the last, whose acceptance stops the clock);
* :func:`blocking_sends`: ``BlockingConnection``; each ``send`` waits for the settlement;
* :class:`RawFailoverLoop`: one ``Container`` connection over two URLs with proton's own
  reconnect (``Backoff()`` or the default schedule), sending one confirmed message at a time,
  re-sending the one in flight after a reconnect (proton gives it no outcome), and recording
  which broker accepted each message and when. Its interface is the one of
  ``benchmarks._drivers.ProducerLoop``, so one measuring loop serves both clients.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Backoff, Container, EventInjector
from proton.utils import BlockingConnection

BODY = b"x" * 128


def _message(ident: str, durable: bool) -> Message:
    """What the application sends: a data body, an id, and the id as a property."""
    return Message(
        body=BODY, id=ident, durable=durable, inferred=True, properties={"bench-id": ident}
    )


class _Burst(MessagingHandler):
    def __init__(
        self, url: str, address: str, count: int, *, presettled: bool, durable: bool, auth: Any
    ) -> None:
        super().__init__(prefetch=0)
        self.url, self.address, self.count = url, address, count
        self.presettled, self.durable, self.auth = presettled, durable, auth
        self.sent = 0
        self.accepted = 0
        self.started: float | None = None
        self.finished: float | None = None
        self.error: str | None = None

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url, reconnect=False, **self.auth)
        event.container.create_sender(conn, self.address)

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        if self.started is None:
            self.started = time.perf_counter()
        while sender.credit > 0 and self.sent < self.count:
            self.sent += 1
            delivery = sender.send(_message(f"b-{self.sent}", self.durable))
            if self.presettled and self.sent < self.count:
                delivery.settle()

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        if self.accepted == (1 if self.presettled else self.count):
            self.finished = time.perf_counter()
            event.connection.close()

    def on_rejected(self, event: Any) -> None:
        self.error = f"rejected: {event.delivery.remote.condition}"
        event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        self.error = f"transport: {event.transport.condition}"


def auth_kwargs(user: str | None, password: str | None) -> dict[str, Any]:
    if user is None:
        return {"allowed_mechs": "ANONYMOUS"}
    return {"user": user, "password": password or "", "allowed_mechs": "PLAIN"}


def container_burst(
    url: str,
    address: str,
    count: int,
    *,
    user: str | None,
    password: str | None,
    presettled: bool = False,
    durable: bool = False,
) -> float:
    """Seconds from the first write to the last acceptance (connect and close not counted)."""
    handler = _Burst(
        url,
        address,
        count,
        presettled=presettled,
        durable=durable,
        auth=auth_kwargs(user, password),
    )
    Container(handler).run()
    if handler.error or handler.started is None or handler.finished is None:
        raise RuntimeError(f"raw Container burst to {address} failed: {handler.error}")
    return handler.finished - handler.started


def blocking_sends(
    url: str,
    address: str,
    count: int,
    *,
    user: str | None,
    password: str | None,
    durable: bool = False,
) -> float:
    """Seconds for ``count`` ``BlockingSender.send`` calls (each waits for its settlement)."""
    conn = BlockingConnection(url, timeout=30.0, **auth_kwargs(user, password))
    try:
        sender = conn.create_sender(address)
        messages = [_message(f"s-{n}", durable) for n in range(count)]
        started = time.perf_counter()
        for message in messages:
            sender.send(message)
        return time.perf_counter() - started
    finally:
        conn.close()


class RawFailoverLoop(MessagingHandler):
    """A confirmed producer on one proton connection that reconnects by itself (see module).

    ``reconnect``: ``"backoff"`` passes ``reconnect=Backoff()`` (one schedule object for the
    connection's whole life: its delays are never reset), ``"default"`` leaves proton's
    default (a fresh schedule starting at 0 s after every successful open).
    ``broker_of`` maps the port of the URL proton is connected to onto a broker index.
    """

    def __init__(
        self,
        urls: list[str],
        address: str,
        prefix: str,
        *,
        reconnect: str,
        broker_of: Callable[[int], int],
        user: str | None,
        password: str | None,
    ) -> None:
        super().__init__(prefetch=0)
        self.urls, self.address, self.prefix = urls, address, prefix
        self.reconnect = reconnect
        self.broker_of = broker_of
        self.auth = auth_kwargs(user, password)
        self.cond = threading.Condition()
        self.confirmed: dict[str, list[str]] = {}
        self.switches: list[tuple[float, int]] = []
        self.switch_ids: list[str] = []
        self.last_broker: int | None = None
        self.count = 0
        self.sending_id = -1
        self.error: BaseException | None = None
        self.resent = 0
        self.disconnects = 0
        self.destination = address
        self._n = 0
        self._inflight: tuple[str, Any] | None = None  # (id, delivery)
        self._in_doubt: str | None = None
        self._running = True
        self._stopping = False
        self._sender: Any = None
        self._injector = EventInjector()
        self._container = Container(self)
        self._container.selectable(self._injector)
        self._thread = threading.Thread(
            target=self._run, name=f"raw-proton-{reconnect}", daemon=True
        )

    # -- ProducerLoop's interface ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def pause(self) -> None:
        self._injector.trigger(ApplicationEvent("bench_pause"))

    def resume(self) -> None:
        self._injector.trigger(ApplicationEvent("bench_resume"))

    def stop(self) -> None:
        self._injector.trigger(ApplicationEvent("bench_stop"))
        self._thread.join(30.0)
        for fd in self._injector.pipe:
            with contextlib.suppress(OSError):
                os.close(fd)

    def wait_count(self, extra: int, timeout: float = 30.0) -> bool:
        with self.cond:
            target = self.count + extra
            return self.cond.wait_for(
                lambda: self.count >= target or self.error is not None, timeout
            )

    def first_switch_after(
        self, since: float, away_from: int, timeout: float = 30.0
    ) -> tuple[float, int] | None:
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

    # -- the container thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._container.run()
        except BaseException as exc:  # reported by the benchmark
            with self.cond:
                self.error = exc
                self.cond.notify_all()

    def on_start(self, event: Any) -> None:
        kwargs: dict[str, Any] = dict(self.auth)
        if self.reconnect == "backoff":
            kwargs["reconnect"] = Backoff()
        conn = event.container.connect(urls=self.urls, **kwargs)
        self._sender = event.container.create_sender(conn, self.address)

    def on_sendable(self, event: Any) -> None:
        self._next()

    def _next(self) -> None:
        sender = self._sender
        if not self._running or self._inflight is not None or sender is None:
            return
        if sender.credit <= 0:
            return
        if self._in_doubt is not None:
            ident, self._in_doubt = self._in_doubt, None
            self.resent += 1
        else:
            ident = f"{self.prefix}-{self._n}"
            self.sending_id = self._n
            self._n += 1
        self._inflight = (ident, sender.send(_message(ident, True)))

    def on_accepted(self, event: Any) -> None:
        if self._inflight is None or event.delivery.tag != self._inflight[1].tag:
            return  # an outcome for a delivery given up at a reconnect
        ident = self._inflight[0]
        self._inflight = None
        now = time.monotonic()
        broker = self.broker_of(event.connection.url.port)
        with self.cond:
            self.confirmed.setdefault(self.address, []).append(ident)
            self.count += 1
            if broker != self.last_broker:
                self.switches.append((now, broker))
                self.switch_ids.append(ident)
                self.last_broker = broker
            self.cond.notify_all()
        self._next()

    def on_rejected(self, event: Any) -> None:
        self._retry(event)

    def on_released(self, event: Any) -> None:
        self._retry(event)

    def _retry(self, event: Any) -> None:
        if self._inflight is not None and event.delivery.tag == self._inflight[1].tag:
            self._in_doubt, self._inflight = self._inflight[0], None
            self._next()

    def on_disconnected(self, event: Any) -> None:
        # proton re-attaches the link after the reconnect but gives the delivery that was in
        # flight no outcome: send the message again, with its id. The old delivery is left
        # alone: settling it now makes proton write a transfer for it on the new connection,
        # which RabbitMQ answers by ending the session.
        self.disconnects += 1
        if self._inflight is not None:
            self._in_doubt, self._inflight = self._inflight[0], None

    def on_transport_error(self, event: Any) -> None:
        pass  # a killed broker is expected; proton reconnects

    def on_bench_pause(self, event: Any) -> None:
        self._running = False

    def on_bench_resume(self, event: Any) -> None:
        self._running = True
        self._next()

    def on_bench_stop(self, event: Any) -> None:
        self._running = False
        self._stopping = True
        if self._sender is not None:
            self._sender.connection.close()
        self._injector.close()
        self._container.stop()
