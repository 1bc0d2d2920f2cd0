"""The raw stomp.py baselines every benchmark compares against, written as carefully as we can.

``RawFailoverProducer`` is the hand-written failover recipe an application would have to write
with stomp.py 9 (which never reconnects by itself after a drop):

* on ``on_disconnected`` (or ``on_heartbeat_timeout``) of the current connection, reconnect
  right there, to the NEXT host of the list (a fresh ``Connection12`` per attempt, so the old
  I/O thread's cleanup cannot race the new connect), waiting for CONNECTED with a deadline
  (stomp.py's ``connect(wait=True)`` has none) and moving on to the next host when it passes;
* every send carries a receipt and waits for it; a send whose receipt did not come before the
  connection died is "in doubt" and is re-sent on the new connection with the same id header.

Reconnect sleeps are zero so a refused host costs nothing (stomp.py sleeps between passes).
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import stomp  # type: ignore[import-untyped]
from stomp.exception import StompException

_receipts = itertools.count(1)


class _ConnListener(stomp.ConnectionListener):  # type: ignore[misc]
    """Routes one connection's events to the producer, tagged with the connection's generation."""

    def __init__(self, owner: RawFailoverProducer, generation: int) -> None:
        self.owner = owner
        self.generation = generation

    def on_connected(self, frame: Any) -> None:
        self.owner._on_connected(self.generation)

    def on_receipt(self, frame: Any) -> None:
        self.owner._on_receipt(frame.headers.get("receipt-id", ""))

    def on_error(self, frame: Any) -> None:
        self.owner._on_error(self.generation, frame.headers.get("message", ""))

    def on_disconnected(self) -> None:
        self.owner._on_lost(self.generation)

    def on_heartbeat_timeout(self) -> None:
        self.owner._on_lost(self.generation)


class RawFailoverProducer:
    """Confirmed sends over stomp.py with a hand-written failover to the next host."""

    def __init__(
        self,
        hosts: Sequence[tuple[str, int]],
        *,
        start: int = 0,
        connect_timeout: float = 2.0,
        heartbeats: tuple[int, int] = (0, 0),
    ) -> None:
        self.hosts = list(hosts)
        self.index = start % len(self.hosts)
        self.connect_timeout = connect_timeout
        self.heartbeats = heartbeats
        self.cond = threading.Condition()
        self.generation = 0
        self.conn: Any = None
        self.connected_generation = -1
        self.receipts: set[str] = set()
        self.errors: list[str] = []
        self.closed = False
        self.resent = 0
        self.failovers = 0
        self._reconnecting = False
        self._old: list[Any] = []

    # -- connecting ----------------------------------------------------------------------------

    def _attempt(self, index: int) -> Any | None:
        """One connection to hosts[index], CONNECTED within connect_timeout, else None."""
        with self.cond:
            self.generation += 1
            generation = self.generation
        conn = stomp.Connection12(
            [self.hosts[index]],
            heartbeats=self.heartbeats,
            reconnect_attempts_max=1,
            reconnect_sleep_initial=0.0,
            reconnect_sleep_increase=0.0,
            reconnect_sleep_jitter=0.0,
            reconnect_sleep_max=0.0,
            timeout=self.connect_timeout,
            auto_decode=False,
        )
        conn.set_listener("raw", _ConnListener(self, generation))
        try:
            conn.connect(wait=False)
        except (StompException, OSError):
            return None
        with self.cond:
            ok = self.cond.wait_for(
                lambda: self.connected_generation == generation or self.closed,
                self.connect_timeout,
            )
            if ok and not self.closed:
                self.conn = conn
                self.index = index
                self.cond.notify_all()
                return conn
        # No CONNECTED in time (a hung broker): abandon it without waiting on its socket.
        self._abandon(conn)
        return None

    def _abandon(self, conn: Any) -> None:
        with contextlib.suppress(StompException, OSError):  # already dead: nothing to clean
            conn.transport.stop()
            conn.transport.disconnect_socket()
        self._old.append(conn)

    def connect(self) -> None:
        """Connect to the first host that answers, starting at ``start``."""
        if not self._walk(self.index):
            raise ConnectionError(f"no host of {self.hosts} answered")

    def _walk(self, first: int) -> bool:
        for step in range(len(self.hosts) * 3):
            if self.closed:
                return False
            if self._attempt((first + step) % len(self.hosts)) is not None:
                return True
        return False

    def _on_connected(self, generation: int) -> None:
        with self.cond:
            self.connected_generation = generation
            self.cond.notify_all()

    def _on_receipt(self, receipt: str) -> None:
        with self.cond:
            self.receipts.add(receipt)
            self.cond.notify_all()

    def _on_error(self, generation: int, message: str) -> None:
        with self.cond:
            self.errors.append(message)
            self.cond.notify_all()

    def _on_lost(self, generation: int) -> None:
        """The recipe's core: reconnect to the next host, on the I/O thread that noticed."""
        with self.cond:
            if generation != self.connected_generation or self._reconnecting or self.closed:
                return
            self._reconnecting = True
            dead = self.conn
            self.conn = None
            self.failovers += 1
            self.cond.notify_all()
        if dead is not None:
            self._abandon(dead)
        try:
            self._walk(self.index + 1)
        finally:
            with self.cond:
                self._reconnecting = False
                self.cond.notify_all()

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float = 30.0,
    ) -> int:
        """Send until one copy is confirmed; returns the index of the confirming host."""
        end = time.monotonic() + timeout
        first = True
        while True:
            with self.cond:
                self.cond.wait_for(
                    lambda: self.conn is not None or self.closed, max(0.0, end - time.monotonic())
                )
                if self.closed or self.conn is None:
                    raise TimeoutError("not connected in time")
                conn, generation, index = self.conn, self.connected_generation, self.index
            if not first:
                self.resent += 1
            first = False
            receipt = f"r{next(_receipts)}"
            try:
                conn.send(
                    destination,
                    body,
                    headers={"persistent": "true", **headers},
                    receipt=receipt,
                )
            except (StompException, OSError):
                self._on_lost(generation)
                continue
            with self.cond:
                self.cond.wait_for(
                    lambda receipt=receipt, generation=generation: (  # type: ignore[misc]
                        receipt in self.receipts
                        or self.connected_generation != generation
                        or self.conn is None
                        or self.closed
                    ),
                    max(0.0, end - time.monotonic()),
                )
                if receipt in self.receipts:
                    self.receipts.discard(receipt)
                    return index
                if time.monotonic() >= end:
                    raise TimeoutError("no receipt in time")
            # Disconnected before the receipt: the message is in doubt; send it again.

    def close(self) -> None:
        with self.cond:
            self.closed = True
            conn = self.conn
            self.conn = None
            self.cond.notify_all()
        # The broker may be gone already; dead connections only need their threads stopped.
        for old in [c for c in (conn, *self._old) if c is not None]:
            with contextlib.suppress(StompException, OSError):
                old.disconnect()
        self._old.clear()


class RawSender:
    """One stomp.py connection for throughput loops (receipt per message, or none)."""

    def __init__(self, host: tuple[str, int]) -> None:
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.id_prefix = secrets.token_hex(6)  # as long as a failover-client connection's
        self.conn = stomp.Connection12(
            [host], heartbeats=(0, 0), reconnect_attempts_max=1, auto_decode=False, timeout=5.0
        )
        owner = self

        class _L(stomp.ConnectionListener):  # type: ignore[misc]
            def on_receipt(self, frame: Any) -> None:
                with owner.cond:
                    owner.receipts.add(frame.headers.get("receipt-id", ""))
                    owner.cond.notify_all()

        self.conn.set_listener("raw", _L())
        self.conn.connect(wait=True)

    def send_confirmed(self, destination: str, body: bytes, headers: Mapping[str, str]) -> None:
        receipt = f"r{next(_receipts)}"
        self.conn.send(destination, body, headers=dict(headers), receipt=receipt)
        with self.cond:
            if not self.cond.wait_for(lambda: receipt in self.receipts, 30.0):
                raise TimeoutError("no receipt within 30 s")
            self.receipts.discard(receipt)

    def send(self, destination: str, body: bytes, headers: Mapping[str, str]) -> None:
        self.conn.send(destination, body, headers=dict(headers))

    def send_with_receipt(self, destination: str, body: bytes, headers: Mapping[str, str]) -> str:
        receipt = f"r{next(_receipts)}"
        self.conn.send(destination, body, headers=dict(headers), receipt=receipt)
        return receipt

    def send_transaction(
        self, destination: str, body: bytes, headers: Mapping[str, str], count: int
    ) -> str:
        """BEGIN, ``count`` SENDs, COMMIT asking for a receipt; returns that receipt id."""
        tx = f"t{next(_receipts)}"
        self.conn.begin(transaction=tx)
        for _ in range(count):
            self.conn.send(destination, body, headers={**headers, "transaction": tx})
        receipt = f"r{next(_receipts)}"
        self.conn.commit(transaction=tx, headers={"receipt": receipt})
        return receipt

    def send_transaction_with_ids(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        count: int,
        names: Sequence[str] = ("failover-message-id",),
    ) -> str:
        """:meth:`send_transaction` with a unique id under each of ``names`` on each SEND, in
        failover-client's format (``<12 hex>-<n>``): by default the one id header it writes
        to ActiveMQ Classic (``dedup=auto`` adds ``_AMQ_DUPL_ID`` only where a broker may
        drop copies by it)."""
        tx = f"t{next(_receipts)}"
        self.conn.begin(transaction=tx)
        for _ in range(count):
            message_id = f"{self.id_prefix}-{next(_receipts)}"
            self.conn.send(
                destination,
                body,
                headers={**headers, "transaction": tx, **dict.fromkeys(names, message_id)},
            )
        receipt = f"r{next(_receipts)}"
        self.conn.commit(transaction=tx, headers={"receipt": receipt})
        return receipt

    def wait_receipts(self, receipts: list[str], timeout: float = 120.0) -> None:
        # One connection's receipts come back in order: wait for the last, then check all.
        wanted = set(receipts)
        last = receipts[-1]
        with self.cond:
            self.cond.wait_for(lambda: last in self.receipts, timeout)
            if not wanted <= self.receipts:
                raise TimeoutError(f"{len(wanted - self.receipts)} receipts missing")
            self.receipts -= wanted

    def close(self) -> None:
        self.conn.disconnect()


def purge(host: tuple[str, int], destination: str, idle: float = 0.5, limit: float = 120.0) -> int:
    """Consume (ack auto, big prefetch) whatever ``destination`` holds; returns the count.

    For throwing away benchmark traffic fast; never for counting what arrived (an auto-acked
    message still in the prefetch buffer at close is gone).
    """
    cond = threading.Condition()
    seen = [0]

    class _Count(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            with cond:
                seen[0] += 1
                cond.notify_all()

    conn = stomp.Connection12([host], heartbeats=(0, 0), reconnect_attempts_max=1, timeout=5.0)
    conn.set_listener("purge", _Count())
    conn.connect(wait=True)
    try:
        conn.subscribe(
            destination, id="purge", ack="auto", headers={"activemq.prefetchSize": "5000"}
        )
        end = time.monotonic() + limit
        with cond:
            while time.monotonic() < end:
                before = seen[0]
                cond.wait_for(lambda before=before: seen[0] != before, idle)  # type: ignore[misc]
                if seen[0] == before:
                    break
        return seen[0]
    finally:
        conn.disconnect()
