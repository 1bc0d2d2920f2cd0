"""A fault-injecting TCP proxy: real network faults between a client and a broker.

A :class:`FaultProxy` listens on a loopback port and forwards each accepted connection to one
broker endpoint, the way ActiveMQ's own tests put a ``SocketProxy`` in front of a broker. Its
controls act on every current and future connection through it, and take effect before they
return:

* ``partition()`` / ``heal()``: bytes are silently dropped in both directions. No RST, no FIN:
  the sockets stay open and each side hears silence (only heart-beats can tell). Dropped bytes
  are gone for good (TCP would retransmit them after the partition), so a connection that
  carried data while partitioned is usually corrupt after ``heal()``; a client is expected to
  have given it up by then. An end-of-stream read while dropping is swallowed too.
* ``one_way(TO_BROKER | TO_CLIENT)``: drop only that direction.
* ``latency(seconds)``: each chunk is held ``seconds`` in each direction (round trip + 2x).
* ``loss(fraction)``: packet loss on a byte stream cannot drop bytes without corrupting it, so
  it is modelled as what TCP makes of it: with probability ``fraction`` a chunk (one read, up
  to 64 KiB) waits one retransmission timeout (``rto``, 200 ms) more, and, as TCP delivers in
  order, holds up every chunk behind it. The draws come from the injected ``random.Random``.
* ``reset()`` / ``reset_after(nbytes)``: close every current connection with RST (SO_LINGER 0)
  on both sides, at once or after ``nbytes`` more bytes from the broker reached the client (a
  reset mid-frame). New connections are not affected.
* ``blackhole_after_handshake()``: on each connection forward until the broker first answers
  (STOMP CONNECTED), then drop everything, that answer included (a connect that never
  completes); ``deliver_reply=True`` lets that first answer through (a handshake that completes
  into silence). ``heal()`` ends it.
* ``drop_deliveries()``: drop only the frames that deliver messages to the client (STOMP
  ``MESSAGE``, AMQP ``transfer``), whole, and pass everything else (heart-beats, receipts):
  a deaf session (``_frame_filter``; plain ``stomp`` / ``amqp`` only). ``heal()`` ends it.

One selector-driven thread does all the I/O; timed releases use the selector's timeout. Each
direction buffers at most ``buffer_size`` bytes, beyond which the proxy stops reading from the
sender (backpressure, as a real network's windows give). ``close()`` closes every socket and
joins the thread.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, cast
from urllib.parse import urlencode

from ._frame_filter import DeliveryFilter, delivery_filter_for
from ._model import Endpoint

__all__ = ["TO_BROKER", "TO_CLIENT", "Direction", "FaultProxy", "proxied_failover_uri"]

Direction = Literal["to_broker", "to_client"]
TO_BROKER: Final = "to_broker"
TO_CLIENT: Final = "to_client"

_CHUNK = 65536
_CONTROL_TIMEOUT = 10.0
_ABORTIVE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


def _abort(sock: socket.socket) -> None:
    """Close with RST instead of FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _ABORTIVE)
    sock.close()


@dataclass(eq=False)
class _Pipe:
    """One direction of one connection: bytes read from ``src``, queued, written to ``dst``."""

    direction: Direction
    src: socket.socket
    dst: socket.socket
    queue: collections.deque[tuple[float, bytes]] = field(default_factory=collections.deque)
    buffered: int = 0
    eof: bool = False  # src ended; FIN goes to dst once the queue is written
    done: bool = False  # nothing more will ever flow this way
    cut_after: int | None = None  # RST the connection after this many more bytes out

    def last_release(self) -> float:
        return self.queue[-1][0] if self.queue else 0.0


@dataclass(eq=False)
class _Conn:
    client: socket.socket
    broker: socket.socket
    up: _Pipe
    down: _Pipe
    connected: bool = False
    broker_spoke: bool = False
    frames: DeliveryFilter | None = None  # follows the broker's frames (drop_deliveries)


class FaultProxy:
    """A loopback TCP proxy in front of ``target`` whose faults are switched on at will."""

    def __init__(
        self,
        target: Endpoint | tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        rng: random.Random | None = None,
        rto: float = 0.2,
        buffer_size: int = 1 << 20,
        name: str | None = None,
    ) -> None:
        if isinstance(target, Endpoint):
            self.scheme = target.scheme
            self.target: tuple[str, int] = (target.host, target.port)
        else:
            self.scheme = "stomp"
            self.target = (target[0], int(target[1]))
        self._rng = rng if rng is not None else random.Random()
        self.rto = rto
        self._limit = buffer_size
        self._conns: list[_Conn] = []
        self._drop: set[Direction] = set()
        self._blackhole: Literal["off", "drop_reply", "deliver_reply"] = "off"
        self._deaf = False
        self.deliveries_dropped = 0
        """Delivery frames ``drop_deliveries()`` removed so far (read it after a control)."""
        self._latency = 0.0
        self._loss = 0.0
        self._commands: collections.deque[tuple[Callable[[], None], threading.Event]] = (
            collections.deque()
        )
        self._lock = threading.Lock()
        self._closed = False
        self._sel = selectors.DefaultSelector()
        self._listener = socket.create_server((host, port))
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self.host, self.port = self._listener.getsockname()[:2]
        self._thread = threading.Thread(
            target=self._run, name=name or f"fault-proxy-{self.port}", daemon=True
        )
        self._thread.start()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def endpoint(self) -> Endpoint:
        """Where clients connect: the proxy's own address, with the target's scheme."""
        return Endpoint(self.scheme, self.host, self.port)

    def uri(self) -> str:
        return str(self.endpoint)

    # -- controls (each applied on the proxy thread before it returns) -------------------------

    def partition(self) -> None:
        """Drop every byte in both directions until ``heal()``."""
        self._control(lambda: self._drop.update((TO_BROKER, TO_CLIENT)))

    def one_way(self, direction: Direction) -> None:
        """Drop every byte going ``direction`` (``TO_BROKER`` or ``TO_CLIENT``) until ``heal()``."""
        if direction not in (TO_BROKER, TO_CLIENT):
            raise ValueError(f"direction must be {TO_BROKER!r} or {TO_CLIENT!r}, not {direction!r}")
        self._control(lambda: self._drop.add(direction))

    def heal(self) -> None:
        """End ``partition()``, ``one_way()`` and ``blackhole_after_handshake()``."""

        def apply() -> None:
            self._drop.clear()
            self._blackhole = "off"
            self._deaf = False

        self._control(apply)

    def latency(self, seconds: float) -> None:
        """Hold each chunk ``seconds`` in each direction (0 switches it off)."""
        if seconds < 0:
            raise ValueError(f"latency must be >= 0, not {seconds}")
        self._control(lambda: setattr(self, "_latency", float(seconds)))

    def loss(self, fraction: float) -> None:
        """Delay a chunk by one ``rto`` with probability ``fraction`` (see the module doc)."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"loss must be within [0, 1], not {fraction}")
        self._control(lambda: setattr(self, "_loss", float(fraction)))

    def reset(self) -> None:
        """RST every current connection on both sides now."""
        self.reset_after(0)

    def reset_after(self, nbytes: int) -> None:
        """RST every current connection once ``nbytes`` more broker bytes reached the client."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, not {nbytes}")

        def apply() -> None:
            for conn in list(self._conns):
                conn.down.cut_after = nbytes
                if nbytes == 0:
                    self._close_conn(conn, abort=True)

        self._control(apply)

    def blackhole_after_handshake(self, *, deliver_reply: bool = False) -> None:
        """Forward until the broker's first answer, then drop everything (see the module doc)."""
        mode: Literal["drop_reply", "deliver_reply"] = (
            "deliver_reply" if deliver_reply else "drop_reply"
        )
        self._control(lambda: setattr(self, "_blackhole", mode))

    def drop_deliveries(self) -> None:
        """Drop the frames delivering messages to the client until ``heal()`` (module doc)."""
        if delivery_filter_for(self.scheme) is None:
            raise ValueError(f"drop_deliveries() reads plain stomp or amqp, not {self.scheme!r}")
        self._control(lambda: setattr(self, "_deaf", True))

    @property
    def connections(self) -> int:
        """How many connections the proxy holds now."""
        with self._lock:
            return len(self._conns)

    def close(self) -> None:
        """Close every connection and the listener; join the proxy thread. Idempotent."""
        with self._lock:
            self._closed = True
        self._wake()
        self._thread.join(_CONTROL_TIMEOUT)
        if self._thread.is_alive():
            raise RuntimeError(f"{self!r}: proxy thread did not stop")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state: list[str] = sorted(self._drop) or ["forwarding"]
        return (
            f"<FaultProxy {self.host}:{self.port} -> {self.target[0]}:{self.target[1]}"
            f" {','.join(state)} latency={self._latency} loss={self._loss}"
            f" blackhole={self._blackhole} connections={len(self._conns)}>"
        )

    def _control(self, apply: Callable[[], None]) -> None:
        done = threading.Event()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            self._commands.append((apply, done))
        self._wake()
        if not done.wait(_CONTROL_TIMEOUT):
            raise RuntimeError(f"{self!r}: the proxy thread did not apply a control")

    def _wake(self) -> None:
        # BlockingIOError: a wake-up is already pending; OSError: the proxy is closed.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the proxy thread --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                for key, mask in self._sel.select(self._next_timeout()):
                    self._on_event(cast(socket.socket, key.fileobj), mask)
                self._run_commands()
                now = time.monotonic()
                for conn in list(self._conns):
                    for pipe in (conn.up, conn.down):
                        if conn in self._conns:
                            self._flush(conn, pipe, now)
        finally:
            self._shutdown()

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

    def _next_timeout(self) -> float | None:
        """Seconds until the first queued chunk is due; 0 for one due already: it fell due
        after the last pass read the clock (the thread lost the CPU), and no event comes for
        it. A socket that waits for room is skipped: its EVENT_WRITE wakes the loop."""
        now = time.monotonic()
        keys = self._sel.get_map().values()
        waiting = {key.fileobj for key in keys if key.events & selectors.EVENT_WRITE}
        pipes = [pipe for conn in self._conns for pipe in (conn.up, conn.down)]
        heads = [pipe.queue[0][0] for pipe in pipes if pipe.queue and pipe.dst not in waiting]
        return max(0.0, min(heads) - now) if heads else None

    def _on_event(self, sock: socket.socket, mask: int) -> None:
        if sock is self._wake_r:
            try:
                while self._wake_r.recv(4096):
                    pass
            except BlockingIOError:
                pass
            return
        if sock is self._listener:
            self._accept()
            return
        conn = next((c for c in self._conns if sock in (c.client, c.broker)), None)
        if conn is None:
            return
        if sock is conn.broker and not conn.connected:
            self._finish_connect(conn)
            return
        if mask & selectors.EVENT_READ:
            self._read(conn, conn.up if sock is conn.client else conn.down)
        if conn in self._conns and mask & selectors.EVENT_WRITE:
            self._flush(conn, conn.down if sock is conn.client else conn.up, time.monotonic())

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        client.setblocking(False)
        broker = socket.socket(socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET)
        broker.setblocking(False)
        for sock in (client, broker):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(
            client, broker, _Pipe(TO_BROKER, client, broker), _Pipe(TO_CLIENT, broker, client)
        )
        conn.frames = delivery_filter_for(self.scheme)
        with self._lock:
            self._conns.append(conn)
        err = broker.connect_ex(self.target)
        if err not in (0, errno.EINPROGRESS):
            self._close_conn(conn, abort=True)
            return
        self._sel.register(broker, selectors.EVENT_WRITE)
        self._sel.register(client, selectors.EVENT_READ)

    def _finish_connect(self, conn: _Conn) -> None:
        if conn.broker.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._close_conn(conn, abort=True)  # the client sees the refusal as a reset
            return
        conn.connected = True
        self._interest(conn)

    def _dropping(self, conn: _Conn, pipe: _Pipe) -> bool:
        if pipe.direction in self._drop:
            return True
        if self._blackhole == "off":
            return False
        if pipe.direction == TO_CLIENT and not conn.broker_spoke:
            conn.broker_spoke = True
            return self._blackhole == "drop_reply"
        return conn.broker_spoke

    def _read(self, conn: _Conn, pipe: _Pipe) -> None:
        try:
            data = pipe.src.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close_conn(conn, abort=True)
            return
        dropping = self._dropping(conn, pipe)
        if not data:
            pipe.eof = True
            pipe.done = dropping  # a dropped FIN never arrives
            self._finish_if_idle(conn)
            if conn in self._conns:
                self._interest(conn)
            return
        frames = conn.frames
        if frames is not None and pipe is conn.down:  # fed while dropping too: it keeps track
            before = frames.dropped
            data = frames.feed(data, drop=self._deaf)
            self.deliveries_dropped += frames.dropped - before
        if dropping or not data:
            return
        now = time.monotonic()
        release = now + self._latency
        if self._loss and self._rng.random() < self._loss:
            release += self.rto
        pipe.queue.append((max(release, pipe.last_release()), data))
        pipe.buffered += len(data)
        self._flush(conn, pipe, now)

    def _flush(self, conn: _Conn, pipe: _Pipe, now: float) -> None:
        """Write what is due; then FIN, RST or re-arm as the pipe's state says."""
        if pipe.direction == TO_BROKER and not conn.connected:
            return
        while pipe.queue and pipe.queue[0][0] <= now:
            release, data = pipe.queue[0]
            if pipe.cut_after is not None:
                data = data[: pipe.cut_after]
            try:
                sent = pipe.dst.send(data) if data else 0
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close_conn(conn, abort=True)
                return
            if pipe.cut_after is not None:
                pipe.cut_after -= sent
                if pipe.cut_after == 0:
                    self._close_conn(conn, abort=True)
                    return
            whole = pipe.queue[0][1]
            pipe.buffered -= sent
            if sent < len(whole):
                pipe.queue[0] = (release, whole[sent:])
                break
            pipe.queue.popleft()
        if pipe.cut_after == 0:
            self._close_conn(conn, abort=True)
            return
        if pipe.eof and not pipe.queue and not pipe.done:
            pipe.done = True
            with contextlib.suppress(OSError):
                pipe.dst.shutdown(socket.SHUT_WR)
            self._finish_if_idle(conn)
        if conn in self._conns:
            self._interest(conn)

    def _finish_if_idle(self, conn: _Conn) -> None:
        if conn.up.done and conn.down.done:
            self._close_conn(conn, abort=False)

    def _interest(self, conn: _Conn) -> None:
        """Register each socket for exactly what it can do now (no event without work)."""
        now = time.monotonic()
        for sock, inbound, outbound in (
            (conn.client, conn.up, conn.down),
            (conn.broker, conn.down, conn.up),
        ):
            mask = 0
            readable = sock is conn.client or conn.connected
            if readable and not inbound.eof and inbound.buffered < self._limit:
                mask |= selectors.EVENT_READ
            if outbound.queue and outbound.queue[0][0] <= now:
                mask |= selectors.EVENT_WRITE
            if sock is conn.broker and not conn.connected:
                mask = selectors.EVENT_WRITE
            self._set_mask(sock, mask)

    def _set_mask(self, sock: socket.socket, mask: int) -> None:
        try:
            current = self._sel.get_key(sock).events
        except KeyError:
            current = 0
        if mask == current:
            return
        if current == 0:
            self._sel.register(sock, mask)
        elif mask == 0:
            self._sel.unregister(sock)
        else:
            self._sel.modify(sock, mask)

    def _close_conn(self, conn: _Conn, *, abort: bool) -> None:
        with self._lock:
            if conn not in self._conns:
                return
            self._conns.remove(conn)
        for sock in (conn.client, conn.broker):
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            if abort:
                _abort(sock)
            else:
                sock.close()

    def _shutdown(self) -> None:
        for conn in list(self._conns):
            self._close_conn(conn, abort=True)
        with self._lock:
            commands = list(self._commands)
            self._commands.clear()
        for _, done in commands:
            done.set()
        self._sel.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()


def proxied_failover_uri(
    members: Sequence[FaultProxy | Endpoint | str],
    options: Mapping[str, str | int | float | bool] | None = None,
) -> str:
    """``failover:(m1,m2,...)?options`` over proxies, endpoints or member URIs, in that order.

    A proxy stands for the broker behind it (``FaultProxy.uri()``); booleans are written the
    ActiveMQ way. Build proxies for a cluster with
    ``[FaultProxy(b.endpoint("stomp")) for b in cluster]`` and mix them with direct members.
    """
    parts = [m.uri() if isinstance(m, FaultProxy) else str(m) for m in members]
    uri = f"failover:({','.join(parts)})"
    if not options:
        return uri
    pairs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
    return f"{uri}?{urlencode(pairs, safe=',:/')}"
