"""The parent side of the consumption benchmark: consumer processes, producers, drains.

* :class:`Child` starts ``_consume_child.py`` with a config, waits for ``ready``, samples its
  resident memory (``VmRSS`` of ``/proc/<pid>/status``) every 0.5 s on a thread, sends it
  commands and reads its JSON answers, each with a deadline, and kills it at the end;
* :class:`StompProducer` / :func:`amqp_produce` offer messages at a paced rate (or all at
  once), each carrying its number in ``bench-id``; the STOMP one ends with a receipt, so every
  message counted as sent is on the broker; the AMQP one counts acceptances;
* :func:`cpu_seconds` reads a process's CPU time (the broker's, around a throughput run);
* :func:`stomp_ids` / :func:`amqp_ids` drain a queue and return the ``bench-id`` of every
  message found (what was left on the broker).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import stomp  # type: ignore[import-untyped]
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from failover_client.testing.brokers import Broker

CHILD = Path(__file__).resolve().parent / "_consume_child.py"
SAMPLE_EVERY = 0.5


def cpu_seconds(pid: int | None) -> float | None:
    """CPU time (user + system, every thread) ``pid`` has used, from ``/proc/<pid>/stat``;
    None when there is no such process."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int | None:
    """Resident memory of ``pid`` in KiB, None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Child:
    """One consumer process (see ``_consume_child.py``)."""

    def __init__(self, cfg: dict[str, Any], ready_timeout: float = 60.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        line = self._read(ready_timeout)
        if line != "ready":
            self.kill()
            raise RuntimeError(f"consumer {cfg['client']} did not start: {line!r}")
        self.baseline = rss_kib(self.proc.pid) or 0
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(SAMPLE_EVERY):  # ends when stop_sampling() sets the event
            value = rss_kib(self.proc.pid)
            if value is None:
                return
            self.samples.append((round(time.monotonic() - started, 1), value))

    def stop_sampling(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(5.0)

    def growth_mb(self) -> float:
        """Largest resident memory seen minus the one right after connecting, in MB."""
        peak = max([self.baseline, *(v for _, v in self.samples)])
        return round((peak - self.baseline) / 1024, 1)

    def _read(self, timeout: float) -> str | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        return self.proc.stdout.readline().strip() or None

    def command(self, text: str, timeout: float) -> dict[str, Any] | None:
        """Send one command; its JSON answer, or None when none came within ``timeout``."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        line = self._read(timeout)
        if line is None:
            return None
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:
            return {"error": line[:400]}
        return answer

    def kill(self) -> None:
        self.stop_sampling()
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.communicate(timeout=10.0)


# -- producers -------------------------------------------------------------------------------


class StompProducer:
    """Raw stomp.py sends without receipts, paced; the last one waits for a receipt."""

    def __init__(self, broker: Broker) -> None:
        ep = broker.endpoint("stomp")
        login, passcode = broker.credentials or (None, None)
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.conn = stomp.Connection12(
            [(ep.host, ep.port)],
            heartbeats=(0, 0),
            auto_decode=False,
            vhost=broker.vhost,
            timeout=10.0,
        )
        owner = self

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_receipt(self, frame: Any) -> None:
                with owner.cond:
                    owner.receipts.add(frame.headers.get("receipt-id", ""))
                    owner.cond.notify_all()

        self.conn.set_listener("bench", Listener())
        self.conn.connect(login, passcode, wait=True)
        self.next_id = 0

    def offer(self, dest: str, size: int, rate: float, seconds: float, count: int = 0) -> int:
        """Send at ``rate`` per second for ``seconds`` (or ``count`` as fast as possible);
        returns how many were sent, all confirmed on the broker by a final receipt."""
        body = b"x" * size
        started = time.monotonic()
        # A broker that stops reading (flow control) would block a send for ever: past the
        # deadline the socket is closed under it, which fails the send and the run.
        watchdog = threading.Timer(seconds + 120.0, self.abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            sent = self._offer(dest, body, rate, seconds, count, started)
        finally:
            watchdog.cancel()
        return sent

    def _offer(
        self, dest: str, body: bytes, rate: float, seconds: float, count: int, started: float
    ) -> int:
        sent = 0
        while True:
            now = time.monotonic()
            if count:
                due = count
            else:
                if now - started >= seconds:
                    break
                due = int((now - started) * rate) + 1
            while sent < due:
                self.conn.send(
                    dest, body, headers={"bench-id": str(self.next_id), "persistent": "true"}
                )
                self.next_id += 1
                sent += 1
            if count:
                break
            time.sleep(0.002)
        self._confirm()
        return sent

    def _confirm(self) -> None:
        # One connection's frames are taken in order: a receipt for a last, empty message to a
        # topic nobody reads proves every earlier send reached the broker, and adds nothing to
        # the queue.
        receipt = f"end-{self.next_id}"
        self.conn.send("/topic/bench.consume.end", b"", receipt=receipt)
        with self.cond:
            if not self.cond.wait_for(lambda: receipt in self.receipts, 120.0):
                raise TimeoutError("the producer's last receipt did not come within 120 s")

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # already closed: nothing to abort
            self.conn.transport.disconnect_socket()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a broker already gone has nothing to close
            self.conn.disconnect()


class _AmqpSender(MessagingHandler):  # type: ignore[misc]
    """Sends at a pace (or all at once) and counts acceptances; stops when all are settled."""

    def __init__(
        self, url: str, address: str, auth: dict[str, Any], size: int, rate: float, seconds: float
    ) -> None:
        super().__init__(prefetch=0)
        self.url, self.address, self.auth = url, address, auth
        self.body = b"x" * size
        self.rate, self.seconds = rate, seconds
        self.count = 0
        self.sent = 0
        self.accepted = 0
        self.settled = 0
        self.sender: Any = None
        self.started = 0.0
        self.offering = True
        self.error: str | None = None

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url, reconnect=False, **self.auth)
        self.sender = event.container.create_sender(conn, self.address)
        self.started = time.monotonic()
        event.container.schedule(0.005, self)

    def on_timer_task(self, event: Any) -> None:
        self._send()
        if self.offering:
            event.container.schedule(0.005, self)

    def on_sendable(self, event: Any) -> None:
        self._send()

    def _send(self) -> None:
        if not self.offering or self.sender is None:
            return
        elapsed = time.monotonic() - self.started
        if self.count:
            due = self.count
        else:
            due = int(elapsed * self.rate) + 1
            if elapsed >= self.seconds:
                self.offering = False
                self._maybe_close()
                return
        while self.sent < due and self.sender.credit > 0:
            message = Message(body=self.body, durable=True, properties={"bench-id": str(self.sent)})
            self.sender.send(message)
            self.sent += 1
        if self.count and self.sent >= self.count:
            self.offering = False

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._settled()

    def on_rejected(self, event: Any) -> None:
        self.error = f"rejected: {event.delivery.remote.condition}"
        self._settled()

    def on_released(self, event: Any) -> None:
        self._settled()

    def _settled(self) -> None:
        self.settled += 1
        self._maybe_close()

    def _maybe_close(self) -> None:
        if not self.offering and self.settled >= self.sent and self.sender is not None:
            self.sender.connection.close()
            self.sender = None

    def on_transport_error(self, event: Any) -> None:
        self.error = f"transport: {event.transport.condition}"


def _auth(broker: Broker) -> dict[str, Any]:
    login, passcode = broker.credentials or (None, None)
    if login is None:
        return {"allowed_mechs": "ANONYMOUS"}
    return {"user": login, "password": passcode or "", "allowed_mechs": "PLAIN"}


def amqp_produce(
    broker: Broker, address: str, size: int, rate: float, seconds: float, count: int = 0
) -> int:
    """Send over AMQP (paced, or ``count`` at once); the number the broker accepted."""
    sender = _AmqpSender(broker.uri("amqp"), address, _auth(broker), size, rate, seconds)
    sender.count = count
    thread = threading.Thread(target=Container(sender).run, daemon=True)
    thread.start()
    thread.join(seconds + 180.0)
    if thread.is_alive():
        raise TimeoutError(f"the AMQP producer did not finish ({sender.accepted} accepted)")
    if sender.error:
        raise RuntimeError(f"the AMQP producer failed: {sender.error}")
    return sender.accepted


# -- what is left on the broker --------------------------------------------------------------


FIRST_WAIT = 10.0  # seconds a drain waits for its first message (a broker under load is slow)


def stomp_ids(broker: Broker, dest: str, idle: float = 2.0, limit: float = 600.0) -> list[str]:
    """Consume everything in ``dest`` (auto acks) and return its ``bench-id`` values.

    Ends ``idle`` seconds after the last message, or ``FIRST_WAIT`` after subscribing when
    nothing came.
    """
    ep = broker.endpoint("stomp")
    login, passcode = broker.credentials or (None, None)
    cond = threading.Condition()
    ids: list[str] = []

    class Collect(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            with cond:
                ids.append(frame.headers.get("bench-id", "?"))
                cond.notify_all()

    conn = stomp.Connection12(
        [(ep.host, ep.port)], heartbeats=(0, 0), auto_decode=False, vhost=broker.vhost, timeout=10
    )
    conn.set_listener("drain", Collect())
    conn.connect(login, passcode, wait=True)
    try:
        conn.subscribe(dest, id="drain", ack="auto", headers={"activemq.prefetchSize": "2000"})
        end = time.monotonic() + limit
        with cond:
            while time.monotonic() < end:
                before = len(ids)
                cond.wait_for(
                    lambda before=before: len(ids) != before,  # type: ignore[misc]
                    idle if before else FIRST_WAIT,
                )
                if len(ids) == before:
                    break
    finally:
        conn.disconnect()
    return ids


class _AmqpDrain(MessagingHandler):  # type: ignore[misc]
    """Receives (credit 1,000, each accepted) until ``idle`` seconds pass without a message
    (``FIRST_WAIT`` before the first)."""

    def __init__(self, url: str, address: str, auth: dict[str, Any], idle: float) -> None:
        super().__init__(prefetch=1000)
        self.url, self.address, self.auth, self.idle = url, address, auth, idle
        self.ids: list[str] = []
        self.last = time.monotonic()
        self.conn: Any = None
        self.error: str | None = None

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url, reconnect=False, **self.auth)
        event.container.create_receiver(self.conn, self.address)
        event.container.schedule(self.idle, self)

    def on_message(self, event: Any) -> None:
        self.ids.append(str((event.message.properties or {}).get("bench-id", "?")))
        self.last = time.monotonic()

    def on_timer_task(self, event: Any) -> None:
        wait = self.idle if self.ids else FIRST_WAIT
        quiet = time.monotonic() - self.last
        if quiet >= wait:
            self.conn.close()
        else:
            event.container.schedule(min(self.idle, wait - quiet), self)

    def on_transport_error(self, event: Any) -> None:
        self.error = f"transport: {event.transport.condition}"


def amqp_ids(broker: Broker, queue: str, idle: float = 2.0, limit: float = 600.0) -> list[str]:
    """The ``bench-id`` of every message left in RabbitMQ queue ``queue`` (drained over AMQP)."""
    drain = _AmqpDrain(broker.uri("amqp"), f"/amq/queue/{queue}", _auth(broker), idle)
    thread = threading.Thread(target=Container(drain).run, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive() or drain.error:
        raise RuntimeError(f"the AMQP drain of {queue} failed: {drain.error or 'no end'}")
    return drain.ids
