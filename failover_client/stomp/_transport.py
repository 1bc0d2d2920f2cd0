"""A stomp.py transport bound to one broker, with a deadline and the client's own TLS context.

stomp.py's ``Transport`` walks a host list with its own retries and sleeps, sorts localhost
first, builds a TLS context from file names per attempt, and has no deadline over the TLS
handshake. This subclass replaces only ``attempt_connection`` with one
:class:`~failover_client.net._dial.SocketDial` (name resolution, one TCP connect to one address,
then the TLS handshake with the caller's ``ssl.SSLContext``, all within the deadline and ended
early by ``interrupt``) and keeps stomp.py's framing and I/O loop (on a plain TCP socket that
loop without its write half: see ``_ioloop``). It relies on the attributes stomp.py 8 and 9 use
for that loop (``socket``, ``blocking``, ``send_queue``, ``sel``, ``running``,
``current_host_and_port``).

Two more hooks:

* ``receive`` reports every chunk read (the heart-beat watchdog counts any byte as life) and
  turns end-of-file on a TLS socket into the end of the I/O loop: stomp.py treats an empty TLS
  read as "no data yet" and would spin on a closed connection.
* ``process_frame`` reports frames whose command STOMP does not define, and hands a MESSAGE,
  a RECEIPT stomp.py has no bookkeeping for and a heart-beat to the listeners directly
  (``_direct``).
* ``_BaseTransport__read_frames`` is stomp.py's own loop over the frames read, with the
  header parser of ``_decode`` (the same frames, a fraction of the work per header), and
  ``_BaseTransport__read`` its read of one burst, with the frame split of ``_decode`` (the
  same frames, without a copy of the rest of the buffer per frame).

A cap on one inbound frame (``max_frame_size``, header block and body): stomp.py reads until
it sees a NUL and keeps everything it read, so a peer that never ends a frame would grow
memory without bound (and, since bytes keep arriving, the heart-beat watchdog never fires).
``receive`` counts the bytes read since the last frame ended and ``process_frame`` resets the
count to what stomp.py keeps of the next, unfinished frame: two integer operations per chunk
and per frame, never a rescan of the buffer. Over the limit, ``on_frame_too_large`` is told
and the I/O loop ends; ``cleanup`` drops the buffer, so a closed connection keeps none.

Writes: the session hands frames it encoded itself to ``write_encoded`` (other frames come
through stomp.py's ``transmit``). On a plain TCP socket, once
:meth:`BoundTransport.start_writer` has run, ``send`` (the last step of both) only queues the
encoded frame for a :class:`~failover_client.net._writer.FrameWriter`, which writes frames
queued meanwhile in one system call. A TLS socket keeps stomp.py's own arrangement (its I/O
thread writes from a queue), because a TLS socket must not be written by one thread while
another reads it.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from typing import Any

from stomp import log as stomp_log
from stomp import utils as stomp_utils
from stomp.transport import Transport

from failover_client._clock import Clock
from failover_client._lazy import LazyCondition
from failover_client.net._dial import Resolver, SocketDial
from failover_client.net._writer import FrameWriter, Item, Render, join_frames
from failover_client.stomp._decode import split_frames
from failover_client.stomp._direct import told_directly
from failover_client.stomp._ioloop import process_frames, read_burst, read_loop
from failover_client.stomp._loopread import on_reading_loop

__all__ = ["BoundTransport"]

_RECV_BYTES = 16384
_RECV_SMALL = 512 - 33
"""Bytes asked of ``recv`` after a read that did not fill this much (see ``receive``).

A blocked ``recv`` holds a buffer of the size it asked for: 16 KiB for every idle connection
(heart-beats only), for as long as it waits. After a small read the next asks for 479 bytes (a
RECEIPT or a heart-beat fits): with the bytes object's 33-byte header that is 512, the largest
block Python's small-object allocator serves, where a bigger one comes from malloc. A read that
fills it switches back to 16 KiB. Plain TCP only.
"""

_CONDITIONS = tuple(
    f"_BaseTransport__{name}_condition"
    for name in ("listeners_change", "io_thread_exit", "send_wait", "connect_wait")
)
"""stomp.py's conditions of a transport (9.0.x; setup.cfg pins that range)."""

DEFAULT_MAX_FRAME_SIZE = 104_857_600
"""Bytes of one inbound frame at most (ActiveMQ's own ``maxFrameSize`` default, 100 MiB)."""

_ABORTIVE = struct.pack("ii", 1, 0)
"""``SO_LINGER`` on with a zero timeout: ``close`` resets the connection (RST, not FIN)."""

_SERVER_FRAMES = frozenset({"connected", "message", "receipt", "error", "heartbeat"})


class BoundTransport(Transport):  # type: ignore[misc]  # stomp.py ships no type hints
    """A stomp.py transport for exactly one broker address."""

    # Attributes of stomp.py's Transport that this class reads and sets.
    socket: Any
    sel: selectors.BaseSelector | None
    send_queue: Any
    blocking: bool
    running: bool
    io_thread: Any
    recv_flags = 0
    """Flags of a plain TCP ``recv`` (``MSG_DONTWAIT`` when the event loop reads it)."""
    recv_max = _RECV_BYTES
    """Bytes of a plain TCP ``recv`` once data flows (less when the event loop reads it, as
    one read and its frames are one step of the loop: ``_loopread.LOOP_READ_BYTES``)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        deadline: float,
        clock: Clock,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        on_bytes: Callable[[bytes], None],
        on_bad_frame: Callable[[str], None],
        resolver: Resolver = socket.getaddrinfo,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        on_frame_too_large: Callable[[int], None] | None = None,
        on_frames_done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            host_and_ports=[(host, port)],
            prefer_localhost=False,
            try_loopback_connect=False,
            reconnect_attempts_max=1,
            reconnect_sleep_initial=0.0,
            reconnect_sleep_increase=0.0,
            reconnect_sleep_jitter=0.0,
            reconnect_sleep_max=0.0,
            auto_decode=False,
        )
        # stomp.py gives each transport four conditions and a semaphore (about 6 KiB): the
        # conditions become ones that make their waiter queue only when waited on (only
        # close-time waits, if any), over one reentrant lock (stomp.py holds each only around
        # a few assignments, never while calling out, and a wait releases it whole); the
        # semaphore (a mutex around sendall) a lock.
        shared = threading.RLock()
        for name in _CONDITIONS:
            setattr(self, name, LazyCondition(shared))
        self._Transport__socket_semaphore = threading.Lock()
        self._address = (host, port)
        self._dial = SocketDial(
            host,
            port,
            deadline=deadline,
            clock=clock,
            tls_context=ssl_context,
            server_hostname=server_hostname,
            resolver=resolver,
        )
        self._on_bytes = on_bytes
        self._on_bad_frame = on_bad_frame
        self._max_frame = max_frame_size
        self._on_frame_too_large = on_frame_too_large
        self._on_frames_done = on_frames_done
        self._unframed = 0
        self._recv_size = _RECV_SMALL
        """Bytes read since the last complete frame (an upper bound of the open frame's size)."""
        self._stage: str | None = None
        self._writer: FrameWriter | None = None

    @property
    def stage(self) -> str:
        """What the connect was doing (for error messages): the dial's step, or the later one
        the session named (``CONNECT``)."""
        return self._stage if self._stage is not None else self._dial.stage

    @stage.setter
    def stage(self, value: str) -> None:
        self._stage = value

    def attempt_connection(self) -> None:
        """Dial the one address (see :class:`SocketDial`) and prepare the socket for the loop.

        Raises TimeoutError at the deadline, ConnectionAbortedError after :meth:`interrupt`,
        the OSError / SSLError of the attempt otherwise.
        """
        self.connection_error = False
        sock = self._dial.connect()
        try:
            if isinstance(sock, ssl.SSLSocket):
                # A TLS socket cannot be read and written from two threads at once: like
                # stomp.py, hand writes to the I/O thread through its pollable queue.
                self.send_queue = stomp_utils.PollableQueue()
                self.sel = selectors.DefaultSelector()
                self.sel.register(self.send_queue, selectors.EVENT_READ)
                self.sel.register(sock, selectors.EVENT_READ)
                self.blocking = False
            sock.setblocking(self.blocking)
            # Frames go out whole, gathered by the writer (``net._writer``): Nagle's algorithm
            # would only hold a small frame back. It holds an ACK until the broker acknowledges
            # the previous segment, which a broker whose window is full (it sends nothing until
            # that ACK) does after its delayed-ACK timer (40 ms on Linux): the consumer stalls.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            self._drop_queue()
            sock.close()
            raise
        self.socket = sock
        self.current_host_and_port = self._address

    def interrupt(self) -> None:
        """Make a running or later :meth:`attempt_connection` fail at once (any thread)."""
        self._dial.interrupt()

    def shutdown_queue(self) -> None:
        # stomp.py's own version forgets the selector without closing it, so its epoll
        # descriptor would stay open until garbage collection.
        self._drop_queue()

    def _drop_queue(self) -> None:
        if self.sel is not None:
            self.sel.close()
            self.sel = None
        if self.send_queue is not None:
            self.send_queue.shutdown()
            self.send_queue = None
        self.blocking = True

    def start_writer(
        self,
        *,
        on_written: Callable[[], None],
        on_failed: Callable[[BaseException], None],
        name: str,
        render: Render | None = None,
    ) -> bool:
        """Route later writes through a batching writer thread; False for a TLS socket.

        ``on_written`` runs after each real write; ``on_failed`` once when one fails (the
        socket is shut down first, so the I/O thread also ends). ``render`` encodes the
        :class:`Deferred` items of :meth:`send_deferred` at write time.
        """
        sock = self.socket
        if not self.blocking or sock is None or self._writer is not None:
            return False

        def failed(exc: BaseException) -> None:
            # Report first, so the loss carries the write's own cause rather than the
            # "closed" that the I/O thread sees once the socket is shut down.
            try:
                on_failed(exc)
            finally:
                self.abort()

        def write_nowait(data: bytes) -> int:
            # MSG_DONTWAIT: a hung broker's full receive window must not block the shared
            # timer thread that writes heart-beats (it has to notice the hang), nor the event
            # loop that reads this socket (send(), send_deferred()). A beat is one byte, so
            # its send is all or nothing; the writer queues what a frame's send left.
            sent: int = sock.send(data, socket.MSG_DONTWAIT)
            return sent

        writer = FrameWriter(
            sock.sendall,
            on_written=on_written,
            on_failed=failed,
            name=name,
            render=render if render is not None else join_frames,
            write_nowait=write_nowait,
        )
        writer.start()
        self._writer = writer
        return True

    def transmit(self, frame: Any) -> None:
        """Render ``frame`` with stomp.py's encoder and write it; DISCONNECT goes through stomp.py.

        stomp.py's version also sorts its listeners under a lock and calls each one's
        ``on_send`` for every frame; this transport's one listener, the session's, does
        nothing there, and that walk was a measurable share of a small send. DISCONNECT keeps
        the full path, which also notes the frame's receipt for stomp.py's own bookkeeping.
        """
        if frame.cmd == "DISCONNECT":
            super().transmit(frame)
            return
        self.write_encoded(stomp_utils.pack(stomp_utils.convert_frame(frame)))

    def write_encoded(self, data: bytes) -> None:
        """Write one encoded frame: through the writer thread, or stomp.py's queue under TLS."""
        if stomp_log.isEnabledFor(stomp_log.DEBUG):
            # stomp.py's debug line, masking a passcode as it does (CONNECT, which carries
            # one, never comes here: see write_quietly).
            stomp_log.debug("sending frame: %s", stomp_utils.clean_lines(data))
        if self.blocking:
            self.send(data)
        else:
            self.send_queue.put(data)

    def send(self, encoded_frame: bytes) -> None:
        """Queue one encoded frame for the writer thread, or write it here before it runs."""
        writer = self._writer
        if writer is not None:
            # Never wait, for room or for the socket, on the loop that reads this socket
            # (see _loopread and FrameWriter.put's nowait).
            writer.put(encoded_frame, nowait=on_reading_loop(self.io_thread))
        else:
            super().send(encoded_frame)

    def send_deferred(
        self, item: Item, *, force: bool = False, inline: bool = True, nowait: bool = False
    ) -> None:
        """Queue ``item`` for the writer, which renders it when it writes (see start_writer).

        ``force`` never blocks on a full buffer (for the I/O thread). ``inline`` says the
        caller waits for the broker's answer to ``item`` before it writes more (a confirmed
        send that is the only one outstanding): it is written on the caller's thread whenever
        the writer is idle with nothing queued (``urgent`` in :meth:`FrameWriter.put`);
        ``inline=False`` never writes on the caller's thread. ``nowait``: such a write never
        waits for the socket either (what it could not write, the writer thread does; always
        so on the event loop that reads this socket). An encoded frame (``bytes``) may come
        this way too. Raises ConnectionError when there is no writer or it has failed.
        """
        writer = self._writer
        if writer is None:
            raise ConnectionError("no writer thread: deferred frames need a plain TCP socket")
        if isinstance(item, bytes) and stomp_log.isEnabledFor(stomp_log.DEBUG):
            stomp_log.debug("sending frame: %s", stomp_utils.clean_lines(item))
        nowait = nowait or on_reading_loop(self.io_thread)
        writer.put(item, force=force, inline=inline, urgent=inline, nowait=nowait)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until queued frames are written (True without a writer)."""
        writer = self._writer
        return True if writer is None else writer.flush(timeout)

    def join_writer(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the writer thread to end (after :meth:`abort`)."""
        writer = self._writer
        return True if writer is None else writer.join(timeout)

    def receive(self) -> bytes:
        """Read one chunk; b"" means the connection is over.

        Replaces stomp.py's version, which returns None for any socket error while the STOMP
        session is not yet CONNECTED (including a TLS socket's "no data yet"), so the
        handshake could not be read without this.
        """
        sock = self.socket
        try:
            # TLS asks for a whole record (16 KiB) every time: stomp.py's loop selects on the
            # socket, which does not show plaintext left in the TLS buffer by a short read.
            if self.blocking:
                data: bytes = sock.recv(self._recv_size, self.recv_flags)
            else:
                data = sock.recv(_RECV_BYTES)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise  # no TLS record complete yet: stomp.py's loop selects again
        except BlockingIOError:
            raise  # read on the event loop, which woke for nothing (see _loopread)
        except (OSError, AttributeError):  # reset, closed under us, or socket already None
            data = b""
        if data:
            self._recv_size = self.recv_max if len(data) >= _RECV_SMALL else _RECV_SMALL
            unframed = self._unframed + len(data)
            self._unframed = unframed
            if unframed > self._max_frame and self._too_large(data, unframed):
                # b"" ends stomp.py's read at once (its loop sees "connection over"), so the
                # chunks of the open frame it gathered are dropped, not parsed.
                self.running = False
                return b""
            self._on_bytes(data)
        elif not self.blocking:
            # TLS end of file: stomp.py reads an empty TLS read as "no data yet" and would
            # spin. Ending the loop makes it clean up and report the disconnection.
            self.running = False
        return data

    def _too_large(self, data: bytes, unframed: int) -> bool:
        """Whether the open frame is over the limit (rare path: only past the limit).

        The frame may still end inside ``data``: it is within the limit when a NUL comes
        early enough. (A NUL inside a ``content-length`` body can pass for that end; the
        count is not reset by it, so the next chunk is judged again: the overshoot is at most
        one chunk.)
        """
        room = self._max_frame - (unframed - len(data))  # bytes the open frame may still take
        if room >= 0 and data.find(b"\x00", 0, room + 1) >= 0:
            return False
        limit = self._max_frame
        report = self._on_frame_too_large
        if report is not None:
            report(limit)
        return True

    def cleanup(self) -> None:
        # stomp.py clears its receive buffer only on some paths (not when the loop was
        # stopped from outside first): a closed connection must not keep an open frame alive.
        self._BaseTransport__recvbuf = b""
        self._unframed = 0
        super().cleanup()

    def _BaseTransport__io_loop(self) -> None:
        # stomp.py's loop keeps a deque for TLS writes on every connection: see _ioloop.
        if self.blocking:
            read_loop(self)
        else:
            super()._BaseTransport__io_loop()

    def _BaseTransport__read_frames(self) -> None:
        self.process_frames(self._BaseTransport__read())

    def process_frames(self, frames: list[bytes]) -> None:
        """Parse and hand on frames split off the buffer (also the event loop's reader)."""
        process_frames(self, frames, self._on_frames_done)

    def _BaseTransport__read(self) -> list[bytes]:
        return read_burst(self)  # stomp.py 9's __read, with the frame split of _decode

    def split_chunks(self, chunks: list[bytes]) -> list[bytes]:
        """The whole frames of the buffer with ``chunks`` added; the rest stays buffered."""
        buffer = self._BaseTransport__recvbuf + b"".join(chunks)
        if not buffer or not self.running:
            self._BaseTransport__recvbuf = buffer
            return []
        frames, rest = split_frames(buffer)
        self._BaseTransport__recvbuf = buffer[rest:] if rest else buffer
        return frames

    def process_frame(self, f: Any, frame_str: bytes) -> None:
        # stomp.py has cut this frame off its buffer; what it keeps is the next frame's start.
        self._unframed = len(self._BaseTransport__recvbuf)
        command = str(f.cmd).lower()
        if command not in _SERVER_FRAMES:
            self._on_bad_frame(str(f.cmd)[:40])
            return
        if told_directly(self.listeners, self._BaseTransport__receipts, command, f):  # see _direct
            return
        super().process_frame(f, frame_str)

    def write_quietly(self, frame: Any) -> None:
        """Write ``frame`` without stomp.py's listeners or debug log (used for CONNECT).

        stomp.py's debug log only masks ``passcode: x`` written with a space, so a CONNECT
        sent through ``transmit`` would log the password when debug logging is on.
        """
        packed = stomp_utils.pack(stomp_utils.convert_frame(frame))
        if self.blocking:
            self.send(packed)
        else:
            self.send_queue.put(packed)

    def write_heartbeat(self) -> None:
        """Write one EOL without ever blocking; a full socket buffer skips this beat.

        Raises OSError when the socket is gone or full.
        """
        if not self.blocking:
            queue = self.send_queue
            if queue is None:
                raise ConnectionError("transport is closed")
            queue.put(b"\n")
            return
        writer = self._writer
        if writer is not None:
            # Through the writer, never beside it: an EOL written while it is inside a
            # sendall would land in the middle of a frame. With no writer thread running it
            # is written at once without blocking (write_nowait above).
            if not writer.offer(b"\n"):
                raise BlockingIOError("frames are queued or being written; beat skipped")
            return
        sock = self.socket
        if sock is None:
            raise ConnectionError("transport is closed")
        # MSG_DONTWAIT: a hung broker's full receive window must not block the watchdog
        # thread, which is the one that has to notice the hang.
        sock.send(b"\n", socket.MSG_DONTWAIT)

    def abort(self, *, reset: bool = False) -> None:
        """End the I/O loop from any thread, without a polite goodbye.

        Shutting the socket down wakes a thread blocked in ``recv``/``select`` and one blocked
        in ``sendall`` (a hung broker's full receive window); the I/O thread then closes the
        socket and the send queue itself. Frames still queued for the writer are dropped.

        ``reset``: the close that follows sends RST instead of FIN (for a lost session, see
        :func:`~failover_client.stomp._teardown.lose`). A FIN waits in the send queue behind
        every byte the broker has not taken, so a broker that stopped reading never sees it:
        it keeps the connection, and refuses the client id of the reconnect ("already
        connected"), until the kernel gives up on the orphaned socket, about 100 s of
        zero-window probes on Linux. A RST goes out at once, with the sequence number the
        broker expects even when its window is closed (Linux sends it at the window's edge),
        and ends the connection on the broker's side too.
        """
        self.running = False
        writer = self._writer
        if writer is not None:
            writer.cancel()
        sock = self.socket
        if sock is not None:
            if reset:
                # The I/O thread may have closed it already: then there is nothing to reset.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _ABORTIVE)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close_unstarted(self) -> None:
        """Release the socket and queue when the I/O thread never ran."""
        self.running = False
        if self._writer is not None:
            self._writer.cancel()
        sock, self.socket = self.socket, None
        self._drop_queue()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
