"""The consumer process of the consumption benchmark: one client, one subscription, its handler.

Run by ``bench_consume.py`` as ``python _consume_child.py '<json config>'``, one process per
measured consumer, so the resident memory the parent samples (``/proc/<pid>/status``) is this
consumer's alone. The config names the client:

* ``fc``: :class:`FailoverConnection` (STOMP or AMQP, by the URI), ``subscribe(...)`` with the
  ack mode asked (and ``prefetch`` when the library takes it);
* ``stomp``: raw stomp.py 9, the handler run in ``on_message`` (stomp.py's receiver thread),
  ``client-individual`` acks sent after the handler; ``client`` with ``ack_every`` n: one
  cumulative ACK after every n-th message (the cadence our ``auto`` uses on the wire);
  ``prefetch`` > 0 adds the brokers' prefetch headers (``activemq.prefetchSize``,
  ``prefetch-count``);
* ``proton``: raw python-qpid-proton; ``credit`` 0 is ``MessagingHandler()``'s default (a
  prefetch of 10, each delivery accepted when ``on_message`` returns), otherwise a receiver
  given ``credit`` up front, each delivery accepted after the handler, the credit topped up
  again whenever half of it is used.

The handler sleeps ``delay`` seconds (the slow handler), records the ``bench-id`` of every
message it handled (and of every message it acknowledged itself) and, with ``count``, notes
when the ``count``-th message was handled, and the process's CPU time (all its threads) in
between (the throughput run). Protocol on stdin/stdout, one
line each: the child prints ``ready`` once the subscription is in place; then ``report``
prints the counters as JSON, ``close <seconds>`` times the client's close (``close(drain=s)``
when seconds > 0) with a deadline (``close_deadline``, default 20 s), prints the counters and
exits, ``exit`` prints them and exits without closing. Every wait has a deadline; the parent
kills the process if it does not answer.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

CLOSE_DEADLINE = 20.0  # default seconds a close() may take before the child reports and exits


class Counters:
    """What the handler did, shared by the client's thread and the command loop."""

    def __init__(self, delay: float, count: int, ids: bool) -> None:
        self.lock = threading.Lock()
        self.delay = delay
        self.count = count
        self.keep_ids = ids
        self.handled = 0
        self.acked = 0
        self.handled_ids: list[str] = []
        self.acked_ids: list[str] = []
        self.first_at: float | None = None
        self.done_at: float | None = None
        self.cpu_first: float | None = None
        self.cpu_done: float | None = None
        """The process's CPU time (every thread) at the first and the count-th message."""
        self.done = threading.Event()

    def handle(self, ident: str | None, ack: Callable[[], None] | None) -> None:
        """The handler's body: work, then (client modes) acknowledge, and count."""
        if self.delay:
            time.sleep(self.delay)
        now = time.perf_counter()
        with self.lock:
            if self.first_at is None:
                self.first_at = now
                self.cpu_first = time.process_time()
            self.handled += 1
            if ack is not None:
                self.acked += 1
            if self.keep_ids and ident is not None:
                self.handled_ids.append(ident)
                if ack is not None:
                    self.acked_ids.append(ident)
            if self.count and self.handled == self.count:
                self.done_at = now
                self.cpu_done = time.process_time()
                self.done.set()
        # Counted before it is acknowledged: a process ended in between leaves a duplicate on
        # the broker (allowed), never an acknowledged message counted as unhandled.
        if ack is not None:
            ack()

    def snapshot(self, held: int | None) -> dict[str, Any]:
        with self.lock:
            out: dict[str, Any] = {
                "handled": self.handled,
                "acked_by_handler": self.acked,
                "held": held,
                # first handled to count-th handled: connect and subscribe are not counted
                "seconds_to_count": None
                if self.done_at is None or self.first_at is None
                else round(self.done_at - self.first_at, 4),
                "cpu_seconds_to_count": None
                if self.cpu_done is None or self.cpu_first is None
                else round(self.cpu_done - self.cpu_first, 4),
            }
            if self.keep_ids:
                out["handled_ids"] = list(self.handled_ids)
                out["acked_ids"] = list(self.acked_ids)
            return out


# -- clients ------------------------------------------------------------------------------------


class FcClient:
    """Our library: one FailoverConnection, one subscription."""

    def __init__(self, cfg: dict[str, Any], counters: Counters) -> None:
        from failover_client import FailoverConnection  # noqa: PLC0415 - only this client

        self.conn = FailoverConnection(
            cfg["uri"], login=cfg.get("login"), passcode=cfg.get("passcode")
        )
        self.conn.connect()
        ack = cfg["ack"]

        def handler(message: Any) -> None:
            counters.handle(message.headers.get("bench-id"), None if ack == "auto" else message.ack)

        kwargs: dict[str, Any] = {"ack": ack}
        params = inspect.signature(self.conn.subscribe).parameters
        if cfg.get("prefetch") and "prefetch" in params:
            kwargs["prefetch"] = cfg["prefetch"]
        self.sub = self.conn.subscribe(cfg["dest"], handler, **kwargs)
        self.sub.wait_active(30.0)

    def held(self) -> int | None:
        """Messages in the client not yet settled: ``in_flight`` where the library has it,
        else what waits in the dispatch queue (the library before bounded delivery)."""
        in_flight = getattr(self.sub, "in_flight", None)
        if isinstance(in_flight, int):
            return in_flight
        dispatcher = getattr(self.conn, "_dispatcher", None)
        queue = getattr(dispatcher, "_queue", None)
        return queue.qsize() if queue is not None else None

    def close(self, drain: float) -> None:
        if drain > 0:
            self.conn.close(drain=drain)  # type: ignore[call-arg]
        else:
            self.conn.close()


class StompClient:
    """Raw stomp.py: the handler runs on stomp.py's receiver thread."""

    def __init__(self, cfg: dict[str, Any], counters: Counters) -> None:
        import stomp  # type: ignore[import-untyped]  # noqa: PLC0415

        conn = stomp.Connection12(
            [(cfg["host"], cfg["port"])],
            heartbeats=(0, 0),
            auto_decode=False,
            vhost=cfg.get("vhost"),
            timeout=10.0,
        )
        ack = cfg["ack"]
        every = int(cfg.get("ack_every") or 0)
        seen = [0]

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_message(self, frame: Any) -> None:
                headers = frame.headers
                acker = None
                if every:
                    # Cumulative: one ACK stands for every earlier message of the subscription.
                    seen[0] += 1
                    if seen[0] % every == 0:

                        def acker() -> None:
                            conn.ack(headers["ack"])

                elif ack != "auto":

                    def acker() -> None:
                        conn.ack(headers["ack"])

                counters.handle(headers.get("bench-id"), acker)

        conn.set_listener("bench", Listener())
        conn.connect(cfg.get("login"), cfg.get("passcode"), wait=True)
        headers: dict[str, str] = {"receipt": "sub-1"}
        if cfg.get("prefetch"):
            prefetch = str(cfg["prefetch"])
            headers |= {"activemq.prefetchSize": prefetch, "prefetch-count": prefetch}
        conn.subscribe(cfg["dest"], id="1", ack=ack, headers=headers)
        self.conn = conn

    def held(self) -> int:
        return 0  # stomp.py hands each frame to on_message as it reads it: no buffer of its own

    def close(self, drain: float) -> None:
        self.conn.disconnect()


class ProtonClient:
    """Raw proton on its own container thread (the handler runs in ``on_message``)."""

    def __init__(self, cfg: dict[str, Any], counters: Counters) -> None:
        from proton.handlers import MessagingHandler  # noqa: PLC0415
        from proton.reactor import ApplicationEvent, Container, EventInjector  # noqa: PLC0415

        credit = int(cfg.get("credit") or 0)
        ready = threading.Event()
        owner = self
        self.queued = 0
        self._event = ApplicationEvent

        class Handler(MessagingHandler):  # type: ignore[misc]
            def __init__(self) -> None:
                if credit:
                    super().__init__(prefetch=0, auto_accept=False)
                else:
                    super().__init__()  # proton's defaults: prefetch 10, accept on return
                self.receiver: Any = None

            def on_start(self, event: Any) -> None:
                auth: dict[str, Any] = {"allowed_mechs": "ANONYMOUS"}
                if cfg.get("login"):
                    auth = {
                        "user": cfg["login"],
                        "password": cfg.get("passcode") or "",
                        "allowed_mechs": "PLAIN",
                    }
                conn = event.container.connect(cfg["url"], reconnect=False, **auth)
                self.receiver = event.container.create_receiver(conn, cfg["dest"])
                if credit:
                    self.receiver.flow(credit)

            def on_link_opened(self, event: Any) -> None:
                ready.set()

            def on_message(self, event: Any) -> None:
                owner.queued = event.receiver.queued
                props = event.message.properties or {}
                ident = props.get("bench-id")
                counters.handle(None if ident is None else str(ident), None)
                if credit:
                    self.accept(event.delivery)
                    # Credit given back in batches of half the window, as a careful user
                    # would (one flow frame per message costs a round of work per message).
                    if event.receiver.credit <= credit // 2:
                        event.receiver.flow(credit - event.receiver.credit)

            def on_bench_close(self, event: Any) -> None:
                if self.receiver is not None:
                    self.receiver.connection.close()
                injector.close()

        injector = EventInjector()
        self.injector = injector
        self.container = Container(Handler())
        self.container.selectable(injector)
        self.thread = threading.Thread(target=self.container.run, daemon=True)
        self.thread.start()
        if not ready.wait(30.0):
            raise TimeoutError("the raw proton receiver was not attached within 30 s")

    def held(self) -> int:
        return self.queued

    def close(self, drain: float) -> None:
        self.injector.trigger(self._event("bench_close"))
        self.thread.join(CLOSE_DEADLINE)


CLIENTS = {"fc": FcClient, "stomp": StompClient, "proton": ProtonClient}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    counters = Counters(
        float(cfg.get("delay", 0.0)), int(cfg.get("count", 0)), bool(cfg.get("ids"))
    )
    client = CLIENTS[cfg["client"]](cfg, counters)
    print("ready", flush=True)
    for line in sys.stdin:  # ends when the parent closes our stdin or kills us
        command, _, argument = line.strip().partition(" ")
        if command == "report":
            print(json.dumps(counters.snapshot(_held(client))), flush=True)
        elif command == "wait":
            counters.done.wait(float(argument))
            print(json.dumps(counters.snapshot(_held(client))), flush=True)
        elif command in ("close", "exit"):
            held = _held(client)
            out = counters.snapshot(held)
            if command == "close":
                out["handled_before_close"] = out["handled"]
                deadline = float(cfg.get("close_deadline") or CLOSE_DEADLINE)
                out |= _timed_close(client, float(argument or 0.0), deadline)
                out |= counters.snapshot(held)  # what the handler did during the close too
            print(json.dumps(out), flush=True)
            os._exit(0)  # no interpreter teardown: a close that did not return must not hold us
    os._exit(0)  # the parent went away (stdin closed): end without waiting for any thread


def _held(client: Any) -> int | None:
    with contextlib.suppress(Exception):  # a count read while the client works: best effort
        held = client.held()
        return held if isinstance(held, int) else None
    return None


def _timed_close(client: Any, drain: float, deadline: float) -> dict[str, Any]:
    """Run the client's close on a thread; how long it took, or that it passed the deadline."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            client.close(drain)
        except TypeError as exc:  # this library has no close(drain=...)
            result["close_error"] = f"unsupported: {exc}"
        except Exception as exc:  # reported to the parent
            result["close_error"] = repr(exc)

    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(max(deadline, drain + 10.0))
    elapsed = time.perf_counter() - started
    result["close_seconds"] = round(elapsed, 3)
    result["close_returned"] = not thread.is_alive()
    return result


if __name__ == "__main__":
    main()
