"""A scriptable AMQP 1.0 peer on loopback that stands in for Artemis and Qpid routers.

No broker that runs here sends a ``failover-server-list`` or redirects a client, so tests of
the AMQP adapter talk to an :class:`AmqpPeer`: a real listener speaking real AMQP (proton's
engine on the server side) whose answers a test chooses with an :class:`AmqpPeerConfig`:

* the connection properties of its open frame (the Artemis or router shape of
  ``failover-server-list``, or anything else, hostile values included);
* an open refused at once with a condition (``amqp:connection:redirect`` and its info, so two
  peers can redirect a client back and forth);
* SASL ANONYMOUS and PLAIN, or PLAIN with fixed credentials only;
* how messages that clients send are settled (accepted, rejected, released, modified, or held
  until :meth:`AmqpPeer.settle_held`);

and its controls act on live connections: :meth:`~AmqpPeer.close_connections` closes them with
a condition (a redirect, or any error), :meth:`~AmqpPeer.drop_connections` resets them, and
:meth:`~AmqpPeer.enqueue` fills the in-memory queue that client receivers drain as their credit
allows (what a client did not settle goes back when its link or connection ends). The peer records
each open and each message it received, and tests wait on them::

    with AmqpPeer(AmqpPeerConfig(refuse=redirect_condition("127.0.0.1", other.port))) as peer:
        ...  # connect a client to peer.url
        (refused,) = peer.wait_opens(1)

One selector-driven thread owns the listener and every socket; each control is applied on it
before the call returns. ``close()`` resets every connection, closes the listener and joins the
thread. proton is imported when the peer starts, not when the harness is imported.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._amqp_peer_book import Book
from ._amqp_peer_config import AmqpPeerConfig, PeerCondition, PeerMessage, PeerOpen, PeerOutcome
from ._model import Endpoint

if TYPE_CHECKING:
    from ._amqp_peer_conn import PeerConnection

__all__ = ["AmqpPeer"]

_log = logging.getLogger("failover_client.testing")

_T = TypeVar("_T")
_CONTROL_TIMEOUT = 10.0
_ABORTIVE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


class AmqpPeer:
    """An AMQP 1.0 listener on ``host`` (port 0: any free one) answering as ``config`` says.

    :meth:`start` (or ``with``) binds and starts the peer's thread; :meth:`close` ends it.
    Safe to use from any thread.
    """

    def __init__(
        self,
        config: AmqpPeerConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str | None = None,
    ) -> None:
        self._book = Book(config or AmqpPeerConfig())
        self._bind = (host, port)
        self._name = name
        self._lock = threading.Lock()
        self._commands: collections.deque[tuple[Callable[[], None], threading.Event]] = (
            collections.deque()
        )
        self._conns: list[PeerConnection] = []
        self._numbers = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._sel: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self.host, self.port = host, port

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> AmqpPeer:
        """Listen and serve on the peer's own thread; returns the peer."""
        from ._amqp_peer_conn import PeerConnection  # noqa: PLC0415 - needs proton, see doc

        with self._lock:
            used = self._closed or self._thread is not None
            if not used:
                self._thread = self._open(PeerConnection)
        if used:
            raise RuntimeError(f"{self!r} was already started or closed")
        return self

    def _open(self, connection: type[PeerConnection]) -> threading.Thread:
        listener = socket.create_server(self._bind)
        listener.setblocking(False)
        self._listener = listener
        self.host, self.port = listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        thread = threading.Thread(
            target=self._run,
            args=(connection,),
            name=self._name or f"amqp-peer-{self.port}",
            daemon=True,
        )
        thread.start()
        return thread

    def close(self) -> None:
        """Reset every connection, close the listener and join the thread. Idempotent."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return  # never started: nothing was opened
        self._wake()
        thread.join(_CONTROL_TIMEOUT)
        if thread.is_alive():
            raise RuntimeError(f"{self!r}: the peer thread did not stop")

    def __enter__(self) -> AmqpPeer:
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- where ---------------------------------------------------------------------------------

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("amqp", self.host, self.port)

    @property
    def url(self) -> str:
        """``amqp://host:port`` (a failover-URI member, and what proton clients connect to)."""
        return str(self.endpoint)

    # -- configuration and records --------------------------------------------------------------

    @property
    def config(self) -> AmqpPeerConfig:
        return self._book.config

    @config.setter
    def config(self, config: AmqpPeerConfig) -> None:
        """Answer later opens and messages with ``config`` (``dataclasses.replace`` it)."""
        self._book.config = config

    @property
    def opens(self) -> list[PeerOpen]:
        """Every open a client sent so far, in order."""
        with self._book.changed:
            return list(self._book.opens)

    @property
    def received(self) -> list[PeerMessage]:
        """Every message clients sent so far, in arrival order."""
        with self._book.changed:
            return list(self._book.messages)

    def wait_opens(self, count: int, timeout: float = 10.0) -> list[PeerOpen]:
        """Wait until ``count`` opens arrived (TimeoutError otherwise); returns them all."""
        self._book.wait_for(lambda: len(self._book.opens) >= count, timeout, f"{count} opens")
        return self.opens

    def wait_received(self, count: int, timeout: float = 10.0) -> list[PeerMessage]:
        """Wait until ``count`` messages arrived (TimeoutError otherwise); returns them all."""
        self._book.wait_for(lambda: len(self._book.messages) >= count, timeout, f"{count} messages")
        return self.received

    def queued(self, address: str) -> int:
        """Messages waiting in ``address``'s queue for a client receiver."""
        return self._call(lambda: self._book.count(address))

    # -- controls (each applied on the peer thread before it returns) ----------------------------

    def enqueue(
        self,
        address: str,
        *bodies: object,
        properties: Mapping[str, object] | None = None,
        durable: bool = True,
    ) -> None:
        """Queue one message per body for client receivers of ``address``."""
        from proton import Message  # noqa: PLC0415 - optional, see the module doc

        messages = [
            Message(body=cast("Any", body), properties=dict(properties or {}), durable=durable)
            for body in bodies
        ]
        self._call(lambda: self._book.add(address, messages))

    def close_connections(self, condition: PeerCondition | None = None) -> int:
        """Close every open AMQP connection, with ``condition`` as the error when given.

        Returns how many were closed. :func:`redirect_condition` builds a redirect.
        """

        def apply() -> int:
            symbol_keys = self._book.config.symbol_keys
            live = [conn for conn in self._conns if conn.open]
            for conn in live:
                conn.close(condition, symbol_keys)
                conn.flush()
            return len(live)

        return self._call(apply)

    def drop_connections(self) -> int:
        """Reset (RST) every connection now, as a broker that died would; returns how many."""

        def apply() -> int:
            conns = list(self._conns)
            for conn in conns:
                self._end(conn, abort=True)
            return len(conns)

        return self._call(apply)

    def settle_held(self, outcome: PeerOutcome = "accepted") -> int:
        """Settle every message held so far (config ``outcome="held"``); returns how many."""
        return self._call(lambda: sum(conn.settle_held(outcome) for conn in self._conns))

    @property
    def connections(self) -> int:
        """How many client sockets the peer holds now."""
        return self._call(lambda: len(self._conns))

    def __repr__(self) -> str:
        with self._lock:
            state = "closed" if self._closed else ("new" if self._thread is None else "running")
        return f"<AmqpPeer {self.host}:{self.port} {state} {self._book.config!r}>"

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` on the peer thread and return its result (or raise its error)."""
        results: list[_T] = []
        errors: list[BaseException] = []

        def apply() -> None:
            try:
                results.append(fn())
            except Exception as exc:  # noqa: BLE001 - handed to the caller, raised there
                errors.append(exc)

        done = threading.Event()
        with self._lock:
            running = not self._closed and self._thread is not None
            if running:
                self._commands.append((apply, done))
        if not running:
            raise RuntimeError(f"{self!r} is not running")
        self._wake()
        if not done.wait(_CONTROL_TIMEOUT):
            raise RuntimeError(f"{self!r}: the peer thread did not apply a control")
        if errors:
            raise errors[0]
        if not results:
            raise RuntimeError(f"{self!r} closed before the control was applied")
        return results[0]

    def _wake(self) -> None:
        # BlockingIOError: a wake-up is already pending; OSError: the peer is closed.
        with contextlib.suppress(OSError):
            if self._wake_w is not None:
                self._wake_w.send(b"x")

    # -- the peer thread -----------------------------------------------------------------------

    def _run(self, connection: type[PeerConnection]) -> None:
        assert self._sel is not None
        deadline: float | None = None
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                for key, mask in self._sel.select(timeout):
                    self._on_event(key, mask, connection)
                self._run_commands()
                deadline = self._service()
        finally:
            self._shutdown()

    def _on_event(
        self, key: selectors.SelectorKey, mask: int, connection: type[PeerConnection]
    ) -> None:
        if key.fileobj is self._wake_r:
            with contextlib.suppress(BlockingIOError):
                while self._wake_r.recv(4096):
                    pass
        elif key.fileobj is self._listener:
            self._accept(connection)
        else:
            conn: PeerConnection = key.data
            if mask & selectors.EVENT_READ:
                conn.on_readable()
            if mask & selectors.EVENT_WRITE:
                conn.flush()

    def _accept(self, connection: type[PeerConnection]) -> None:
        assert self._listener is not None
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = connection(next(self._numbers), sock, self._book)
        self._conns.append(conn)
        self._set_mask(conn, selectors.EVENT_READ)

    def _run_commands(self) -> None:
        while True:
            with self._lock:
                if not self._commands:
                    return
                apply, done = self._commands.popleft()
            try:
                apply()
            finally:
                done.set()

    def _service(self) -> float | None:
        """Move every connection on; close the finished ones; returns the next tick."""
        now = time.monotonic()
        deadline: float | None = None
        for conn in list(self._conns):
            try:
                due = conn.service(now)
            except Exception:  # noqa: BLE001 - one broken connection must not stop the peer
                _log.exception("AMQP peer connection %d failed; resetting it", conn.number)
                self._end(conn, abort=True)
                continue
            if conn.done:
                self._end(conn, abort=False)
                continue
            if due is not None:
                deadline = due if deadline is None else min(deadline, due)
            mask = (selectors.EVENT_READ if conn.wants_read else 0) | (
                selectors.EVENT_WRITE if conn.wants_write else 0
            )
            self._set_mask(conn, mask)
        return deadline

    def _set_mask(self, conn: PeerConnection, mask: int) -> None:
        """Watch each socket for exactly what it can do now (no event without work)."""
        assert self._sel is not None
        try:
            current = self._sel.get_key(conn.sock).events
        except KeyError:
            current = 0
        if mask == current:
            return
        if current == 0:
            self._sel.register(conn.sock, mask, conn)
        elif mask == 0:
            self._sel.unregister(conn.sock)
        else:
            self._sel.modify(conn.sock, mask, conn)

    def _end(self, conn: PeerConnection, *, abort: bool) -> None:
        if conn not in self._conns:
            return
        self._conns.remove(conn)
        self._set_mask(conn, 0)
        if abort:
            with contextlib.suppress(OSError):
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _ABORTIVE)
        conn.sock.close()
        conn.ended()

    def _shutdown(self) -> None:
        for conn in list(self._conns):
            self._end(conn, abort=True)
        with self._lock:
            commands = list(self._commands)
            self._commands.clear()
        for _, done in commands:
            done.set()
        if self._sel is not None:
            self._sel.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
