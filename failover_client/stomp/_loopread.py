"""Reading a plain-TCP STOMP session on an asyncio event loop instead of an I/O thread.

A session of an :class:`~failover_client.aio.AsyncFailoverConnection` has its socket read by
the connection's event loop: :class:`LoopReader` registers the socket with ``loop.add_reader``
and each readiness callback does ONE ``recv`` (the transport's ``receive``, at most 4 KiB)
and processes the frames that chunk completes (the transport's ``split_chunks`` and
``process_frames``, the very steps of stomp.py's I/O loop). One step of the loop is so
bounded, confirmations and deliveries arrive on the loop's own thread (no hand-off between
threads), and the session has no reader thread.

It stands in for the I/O thread stomp.py would start: it has the interface the rest of the
adapter uses of that thread (``join(timeout)``, ``is_alive()``, ``name``), and when reading
ends (end of stream, a failed read, the transport stopped by ``abort``) it removes the reader
and does what stomp.py 9.0's ``BaseTransport.__io_loop`` does in its ``finally``, in the same
order: ``cleanup()``, the I/O-thread-exit condition, ``receiver_loop_completed``,
``disconnected`` unless already notified, the connect-wait condition.

Only plain TCP: a TLS socket buffers decrypted application data that the selector does not
show, and stomp.py writes TLS through its I/O thread (a TLS socket must not be read and written
by two threads at once), so TLS sessions keep the thread.

Nothing on the loop's thread may wait for what only the loop delivers: :meth:`join` called on
the loop thread finishes the reader there and then instead of waiting (outside a readiness
callback), :func:`reads_here` tells the session's close not to await the DISCONNECT receipt on
the thread that would have to read it, and :func:`on_reading_loop` has frames written from the
loop never wait: not for room in the writer's buffer (bounded all the same: the asyncio
connection's confirmation window and the subscriptions' prefetch bound what it writes), nor
for the socket (a frame written inline goes out with one non-blocking send, and the writer
thread writes what it left: ``FrameWriter.put``'s ``nowait``).

stomp.py private names used beyond those ``_transport`` relies on (setup.cfg pins stomp.py
9.0.x): ``_BaseTransport__io_thread_exited``, and, to signal them as its loop does,
``_BaseTransport__io_thread_exit_condition`` and ``_BaseTransport__connect_wait_condition``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

from stomp import exception as stomp_exception

from failover_client.stomp._ioloop import end_io_loop

__all__ = ["LOOP_READ_BYTES", "LoopReader", "ReadLoop", "on_reading_loop", "reads_here"]

_stomp_log = logging.getLogger("stomp.py")


LOOP_READ_BYTES = 4096
"""Bytes of one read on the loop at most: a read and the frames it completes are one step of
the loop, which nothing else on it can interrupt. 4 KiB (about 15 small deliveries) kept
that step's CPU at 0.3 ms (99th percentile), 0.8 ms at most, during bursts of 10,000
deliveries, where 16 KiB took up to 3 ms, at the same throughput (docs/asyncio.md); an I/O
thread reads 16 KiB."""

ReadLoop = tuple[asyncio.AbstractEventLoop, int]
"""An event loop that reads sessions, and the ident of the thread that runs it."""


class LoopReader:
    """Reads one session's socket on ``loop`` (see the module docstring).

    ``transport`` is the session's :class:`~failover_client.stomp._transport.BoundTransport`,
    started on a plain TCP socket. :meth:`start` registers the socket (from any thread).
    """

    def __init__(self, transport: Any, where: ReadLoop, name: str) -> None:
        self._transport = transport
        self._loop, self._thread_id = where
        self.name = name
        self._fd = -1
        self._chunks: list[bytes] = []
        """Chunks of a frame whose end (a NUL) has not arrived yet."""
        self._registered = False
        self._reading = False
        self._finished = False
        self._done = threading.Event()

    def start(self) -> None:
        """Register the socket with the loop (RuntimeError when the loop is closed)."""
        transport = self._transport
        transport.recv_flags = socket.MSG_DONTWAIT  # a readiness never to be trusted blindly
        transport.recv_max = LOOP_READ_BYTES
        self._fd = transport.socket.fileno()
        if self.on_loop_thread():
            self._register()
            return
        try:
            self._loop.call_soon_threadsafe(self._register)
        except RuntimeError:  # the loop is closed: a thread reads the session after all
            transport.recv_flags = 0
            transport.recv_max = type(transport).recv_max
            raise

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's thread (where this reader reads)."""
        return threading.get_ident() == self._thread_id

    def _register(self) -> None:
        if self._finished:
            return
        if not self._transport.running or self._transport.socket is None:
            self.finish()  # stopped before the loop got to it
            return
        self._loop.add_reader(self._fd, self.on_readable)
        self._registered = True

    def on_readable(self) -> None:
        """One readiness: one ``recv``, and the frames it completes."""
        if self._finished:
            return
        transport = self._transport
        if not transport.running:
            self.finish()
            return
        self._reading = True
        try:
            self._read_once(transport)
        except Exception as exc:  # noqa: BLE001 - stomp.py's rule: a failure ends the loop
            # stomp.py's loop logs it, closes the socket, and its next read sees the end.
            _stomp_log.warning(exc)
            transport._BaseTransport__recvbuf = b""
            transport.running = False
        finally:
            self._reading = False
        if not transport.running:
            self.finish()

    def _read_once(self, transport: Any) -> None:
        try:
            data: bytes = transport.receive()
        except BlockingIOError:
            return  # woken for nothing
        except stomp_exception.InterruptedException:
            return
        except Exception:  # noqa: BLE001 - stomp.py's own rule: a failed read ends the loop
            data = b""
        if not data:
            # stomp.py's ConnectionClosedException: drop the half-received frame.
            if transport.running:
                transport._BaseTransport__recvbuf = b""
                transport.running = False
            return
        chunks = self._chunks
        if (
            transport._BaseTransport__is_eol(data)
            and not transport._BaseTransport__recvbuf
            and not chunks
        ):
            transport.process_frames([data])  # a heart-beat
            return
        chunks.append(data)
        if b"\x00" not in data:
            return  # the frame goes on in the next chunk (joined once, as stomp.py does)
        self._chunks = []
        transport.process_frames(transport.split_chunks(chunks))

    def finish(self) -> None:
        """Stop reading and end as stomp.py's I/O loop ends (on the loop thread; once)."""
        if self._finished:
            return
        self._finished = True
        self._chunks = []
        transport = self._transport
        if self._registered:
            self._registered = False
            # Before cleanup() closes the socket: a closed descriptor cannot be unregistered.
            self._loop.remove_reader(self._fd)
        try:
            try:
                transport.cleanup()
            except Exception as exc:  # noqa: BLE001 - stomp.py logs and carries on here too
                _stomp_log.warning(exc)
        finally:
            try:
                end_io_loop(transport)
            finally:
                self._done.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` s for reading to end (a thread's ``join``).

        On the loop thread nothing can be waited for: inside a readiness callback this
        returns at once (as a thread joining itself must not wait), elsewhere on that thread
        the reader is finished here and now. When the loop is closed, also here and now.
        """
        if self._done.is_set():
            return
        if self.on_loop_thread():
            if not self._reading:
                self.finish()
            return
        if self._loop.is_closed():
            self._finished_without_loop()
            return
        self._done.wait(timeout)  # ends: the loop ran finish(), or the timeout

    def _finished_without_loop(self) -> None:
        # The loop is gone, and its selector with it: nothing to unregister.
        self._registered = False
        self.finish()

    def is_alive(self) -> bool:
        """True until reading ended (a thread's ``is_alive``)."""
        return not self._done.is_set()

    def __repr__(self) -> str:
        return f"<LoopReader {self.name} {'alive' if self.is_alive() else 'ended'}>"


def on_reading_loop(io_thread: object) -> bool:
    """Whether the caller runs on the event loop that reads the session (``io_thread`` a
    :class:`LoopReader`). Such a caller must never wait for the writer's buffer to drain nor
    for room in the socket's send buffer: the broker may be waiting for this very loop to
    read before it reads more of what we write (stomp.py's I/O thread is in the same position
    for the writer's buffer, and writes with ``force``)."""
    return isinstance(io_thread, LoopReader) and io_thread.on_loop_thread()


def reads_here(io_thread: object) -> bool:
    """Whether the caller runs where the session's socket is read (its I/O thread, or the
    loop's thread for a :class:`LoopReader`): it cannot wait there for what is read."""
    if isinstance(io_thread, LoopReader):
        return io_thread.on_loop_thread()
    return io_thread is threading.current_thread()
