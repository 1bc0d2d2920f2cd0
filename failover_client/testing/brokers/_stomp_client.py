"""A raw stomp.py client that tests use to put messages in and count what came out.

It speaks to ONE broker with the plain library, never through failover_client, so a test can
compare what the library under test claims with what the brokers really hold (its AMQP 1.0
twin is :mod:`._amqp_client`). Sends wait for a STOMP receipt per message: without that a
SIGKILL loses what was still in socket buffers, and the count would lie.

Waits are on a condition variable fed by the library's I/O thread, not sleeps. stomp.py is
imported when a client is made, so importing the harness does not need it.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._errors import ClientError
from ._model import ReceivedMessage

__all__ = ["StompClient", "as_bytes"]


def as_bytes(body: object) -> bytes:
    """A message body as bytes, whatever type the library handed over."""
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return repr(body).encode()


class _Listener:
    """Collects what the stomp.py I/O thread reports, under one condition variable.

    stomp.py calls a listener's ``on_<frame>`` methods by name, so no base class is needed
    (and none is imported before stomp.py is).
    """

    def __init__(self, secret: str | None = None) -> None:
        self.cond = threading.Condition()
        self._secret = secret
        self.connected = False
        self.disconnected = False
        self.errors: list[str] = []
        self.receipts: set[str] = set()
        self.messages: list[ReceivedMessage] = []
        self.ack_with: Any = None  # the connection, when messages are to be acked one by one

    def moved_since(self, count: int) -> bool:
        """More than ``count`` messages, or the end of the session (call holding ``cond``)."""
        return len(self.messages) > count or self.disconnected or bool(self.errors)

    def on_connected(self, frame: Any) -> None:
        with self.cond:
            self.connected = True
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            self.disconnected = True
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        message, body = frame.headers.get("message", ""), as_bytes(frame.body)
        if self._secret:
            # A broker that quotes the CONNECT frame back must not put the passcode in a
            # ClientError (pytest prints those). Before repr(), which would escape it.
            message = message.replace(self._secret, "***")
            body = body.replace(self._secret.encode(), b"***")
        text = f"{message} {body!r}"
        with self.cond:
            self.errors.append(text)
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        if self.ack_with is not None:
            # STOMP 1.2: a message of a client-ack subscription names its ack id.
            self.ack_with.ack(frame.headers["ack"])
        with self.cond:
            self.messages.append(ReceivedMessage(as_bytes(frame.body), dict(frame.headers)))
            self.cond.notify_all()


def _done_or_moved(condition: Callable[[], bool], progress: Callable[[], int], before: int) -> bool:
    return condition() or progress() != before


class StompClient:
    """One stomp.py connection with waits that have deadlines.

    stomp.py's ``connect(wait=True)`` has no timeout (it blocks for good on a hung broker), so
    the handshake is started without waiting and the CONNECTED frame awaited here.
    """

    def __init__(
        self,
        host: str,
        port: int,
        login: str | None = None,
        passcode: str | None = None,
        *,
        vhost: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        import stomp  # noqa: PLC0415 - optional dependency, see the module docstring

        self.where = f"stomp://{host}:{port}"
        self._timeout = timeout
        self._listener = _Listener(secret=passcode)
        self.conn = stomp.Connection12(
            [(host, port)],
            heartbeats=(0, 0),
            reconnect_attempts_max=1,  # this client never reconnects: a drop is a failure
            auto_decode=False,
            timeout=timeout,
            vhost=vhost,
        )
        self.conn.set_listener("harness", self._listener)
        try:
            self.conn.connect(login, passcode, wait=False)
        except stomp.exception.StompException as exc:
            raise ClientError(f"{self.where}: connect failed: {exc!r}") from exc
        self._wait_for(lambda: self._listener.connected, "CONNECTED")

    def __enter__(self) -> StompClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.conn.is_connected():
            self.conn.disconnect()
        # stomp.py's disconnect() returns before its I/O thread has ended (it still tells the
        # listeners): join it, so that a caller's count of threads (a test's leak check, on a
        # loaded machine) never finds this client's thread winding down.
        thread = getattr(self.conn.transport, "io_thread", None)
        if isinstance(thread, threading.Thread) and thread is not threading.current_thread():
            thread.join(self._timeout)

    def _wait_for(self, condition: Any, what: str, timeout: float | None = None) -> None:
        listener = self._listener
        with listener.cond:
            ok = listener.cond.wait_for(
                lambda: condition() or listener.errors or listener.disconnected,
                timeout if timeout is not None else self._timeout,
            )
            if listener.errors:
                raise ClientError(
                    f"{self.where}: ERROR frame while waiting for {what}: {listener.errors[0]}"
                )
            if not condition():
                state = "disconnected" if listener.disconnected else f"no answer ({ok=})"
                raise ClientError(f"{self.where}: {state} while waiting for {what}")

    def send(
        self,
        destination: str,
        bodies: Iterable[bytes | str],
        headers: Mapping[str, str] | None = None,
        persistent: bool = True,
    ) -> int:
        """Send each body with a receipt and return once every receipt has come back."""
        pending: set[str] = set()
        count = 0
        for body in bodies:
            receipt = uuid.uuid4().hex
            all_headers = {"persistent": "true" if persistent else "false", **(headers or {})}
            self.conn.send(destination, body, headers=all_headers, receipt=receipt)
            pending.add(receipt)
            count += 1
        listener = self._listener
        self._wait_progressing(
            lambda: pending <= listener.receipts,
            lambda: len(listener.receipts),
            f"{len(pending)} receipts",
        )
        return count

    def _wait_progressing(
        self, condition: Callable[[], bool], progress: Callable[[], int], what: str
    ) -> None:
        """Like ``_wait_for``, but the deadline counts from the last sign of ``progress``.

        A broker writes a large batch of persistent messages at the speed of its disk and of
        the machine (10,000 took more than 10 s on a loaded one): it fails when nothing
        moves for the timeout, not when the whole batch takes longer.
        """
        listener = self._listener
        while True:
            with listener.cond:
                if condition():
                    return
                before = progress()
            # A wait that ends without the condition raises; one that ends in progress loops.
            self._wait_for(functools.partial(_done_or_moved, condition, progress, before), what)

    def subscribe(
        self,
        destination: str,
        headers: Mapping[str, str] | None = None,
        ack: str = "client-individual",
        auto_ack: bool = True,
    ) -> str:
        """SUBSCRIBE; with a client ack mode each message is acked on arrival if ``auto_ack``.

        Acking on arrival (not ``ack:auto``) means only messages this session really read are
        removed: whatever is still in flight when it closes goes back to the queue.
        """
        sub_id = uuid.uuid4().hex
        if ack != "auto" and auto_ack:
            self._listener.ack_with = self.conn
        self.conn.subscribe(destination, id=sub_id, ack=ack, headers=dict(headers or {}))
        return sub_id

    def unsubscribe(self, sub_id: str) -> None:
        """UNSUBSCRIBE and wait for its receipt (so the broker has acted on what came before)."""
        receipt = uuid.uuid4().hex
        self.conn.unsubscribe(id=sub_id, headers={"receipt": receipt})
        listener = self._listener
        self._wait_for(lambda: receipt in listener.receipts, "UNSUBSCRIBE receipt")

    def collect(
        self, timeout: float, idle: float, expect: int | None = None
    ) -> list[ReceivedMessage]:
        """Messages received so far and until ``idle`` s pass without one (max ``timeout``).

        With ``expect``, keep waiting (up to ``timeout``) until at least that many arrived,
        then still until ``idle`` passes, so duplicates after the expected ones are seen too.
        """
        listener = self._listener
        end = time.monotonic() + timeout
        with listener.cond:
            while True:
                seen = len(listener.messages)
                left = end - time.monotonic()
                if left <= 0 or listener.disconnected or listener.errors:
                    break
                need_more = expect is not None and seen < expect
                listener.cond.wait_for(
                    functools.partial(listener.moved_since, seen),
                    left if need_more else min(idle, left),
                )
                if len(listener.messages) == seen and not need_more:
                    break
            if listener.errors:
                raise ClientError(f"{self.where}: ERROR frame while draining: {listener.errors[0]}")
            return list(listener.messages)

    def wait_for_message(
        self, predicate: Callable[[ReceivedMessage], bool], timeout: float, after: int = 0
    ) -> ReceivedMessage:
        """The first message (from index ``after`` on) that satisfies ``predicate``.

        Raises ClientError when none arrives within ``timeout``.
        """
        listener = self._listener

        def find() -> ReceivedMessage | None:
            return next((m for m in listener.messages[after:] if predicate(m)), None)

        with listener.cond:
            listener.cond.wait_for(
                lambda: find() is not None or listener.disconnected or bool(listener.errors),
                timeout,
            )
            found = find()
            if found is None:
                raise ClientError(
                    f"{self.where}: no matching message within {timeout}s "
                    f"({len(listener.messages) - after} others arrived)"
                )
            return found

    @property
    def messages(self) -> list[ReceivedMessage]:
        with self._listener.cond:
            return list(self._listener.messages)
