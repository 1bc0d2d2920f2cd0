"""Group commit for one socket: frames queued by any thread go out in as few writes as possible.

One ``sendall`` per frame is the largest cost of a small send, and most of it is the system
call, not the copy. :class:`FrameWriter` keeps a buffer of encoded frames and one thread that
writes whatever has gathered in a single call. While that thread is inside the system call
(the GIL released), senders keep appending, so under load each write carries many frames;
when the writer is idle a frame is handed over at once, with no linger timer. A frame that
comes after a quiet spell (``inline_after``, longer than the gap between sends in any loop)
and finds the writer idle is written on the caller's own thread instead, and so is a frame
whose caller says it waits for the answer before it puts anything else (``urgent``: a
blocking, confirmed send), whatever the quiet time, as long as nothing is queued or being
written ahead of it. Such a send then costs no thread hand-off at all, however quickly the
broker answered the one before (an in-memory broker answers within the quiet time), while
a burst goes through the thread. A caller that must not block on the socket either (the event
loop that reads it, ``put(nowait=True)``) writes such a frame with one non-blocking send and
leaves what it did not write to the thread, ahead of everything else.

The thread exists only while there is a backlog: it starts when a frame is queued behind
another (or behind a write in progress) and ends after ``linger`` seconds with nothing to
write, so an idle connection has no writer thread (a heart-beat on an idle socket is written
without blocking by the timer that sends it, see :meth:`FrameWriter.offer`).

Order is the order of ``put`` calls. The buffer is bounded: a sender blocks while it holds
``limit`` bytes or more, so a broker that stops reading (flow control, a hang) still slows
the application down instead of filling memory.

A write that fails ends the writer: the buffered frames are dropped, every later ``put``
raises, and ``on_failed`` runs once on the writer thread. A frame accepted by ``put`` has
therefore not necessarily reached the socket; only a broker's RECEIPT confirms anything.

Besides encoded frames the buffer may hold :class:`Deferred` items, which a ``render``
function turns into bytes at the moment they are written, together with everything that
gathered with them. Rendering is how STOMP group commit works (``stomp._batch``): the sends that
happen to be queued together become one broker transaction, so its shape follows the load
instead of a timer. ``render`` runs on whichever thread writes (the writer thread, or a caller
writing inline), never on two at once and always in buffer order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = [
    "DEFAULT_INLINE_AFTER",
    "DEFAULT_LIMIT",
    "DEFAULT_LINGER",
    "Deferred",
    "FrameWriter",
    "Item",
    "Render",
    "join_frames",
]

DEFAULT_LIMIT = 1 << 20
"""Bytes buffered before senders block (one batch more may be inside the system call)."""

DEFAULT_INLINE_AFTER = 0.0002
"""Seconds since the previous frame after which an idle writer lets the caller write itself.

Sends in a loop come every few microseconds; a blocking send waits a broker round trip
(hundreds of microseconds) between frames.
"""


DEFAULT_LINGER = 1.0
"""Seconds the writer thread waits for more frames before it ends (a new backlog starts it again).

Long enough that a steady stream of bursts keeps one thread; short enough that a connection
left idle soon holds none.
"""

WRITE_SLICE = 64 * 1024
"""Bytes handed to ``write`` at once: a large batch goes out in slices, each reported through
``on_written``, so a close that waits for a busy broker sees the writer's progress (a broker
that reads our ACKs one by one answers nothing meanwhile) and tells it from a hung one."""


class Deferred(Protocol):
    """An item encoded only when written (see ``render``)."""

    @property
    def nbytes(self) -> int:
        """About how many bytes it will take (counted against the buffer limit)."""


Item = bytes | Deferred
Render = Callable[[Sequence[Item]], bytes]


def join_frames(items: Sequence[Item]) -> bytes:
    """The default render: the buffer holds encoded frames only."""
    if len(items) == 1 and isinstance(items[0], bytes):
        return items[0]
    try:
        # join itself refuses anything but bytes: no scan of the batch on the hot path
        return b"".join(items)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError("a Deferred item was queued to a writer without a render function") from exc


def _size(item: Item) -> int:
    return len(item) if isinstance(item, bytes) else item.nbytes


class FrameWriter:
    """A buffer of encoded frames and the thread that writes them, batched, in order.

    :param write: writes all of one ``bytes`` (``socket.sendall``); runs on the writer thread.
    :param on_written: called after each successful write (heart-beat bookkeeping).
    :param on_failed: called once, on the writer thread, with the exception of the first
        failed write; not called for a failure after :meth:`cancel`.
    :param limit: buffered bytes at which :meth:`put` blocks until the writer takes them.
    :param name: the writer thread's name.
    :param inline_after: quiet seconds after which a frame that finds the writer idle is
        written on the caller's thread (None: always through the writer thread). A failure
        of such a write is raised by :meth:`put` and not passed to ``on_failed``, exactly
        like a direct write.
    :param monotonic: bounds :meth:`flush`; real time, because the waits it bounds are
        waits on a condition variable, which a virtual clock cannot shorten.
    :param render: turns what is written in one go into bytes; default: joins encoded
        frames (and refuses :class:`Deferred` items). It may raise: that counts as a failed
        write.
    :param write_nowait: writes what the socket buffer has room for without blocking and
        returns how many bytes it wrote (``socket.send`` with ``MSG_DONTWAIT``; raising
        ``BlockingIOError`` when there is no room at all); lets :meth:`offer` write on the
        caller's thread when no writer thread runs, and a ``put(nowait=True)`` write inline.
        None: :meth:`offer` always queues, and so does a ``put(nowait=True)``.
    :param linger: seconds the writer thread waits for more frames before it ends (real
        time, like ``monotonic``).
    """

    __slots__ = (
        "_chunks",
        "_error",
        "_idle",
        "_inline_after",
        "_last_put",
        "_limit",
        "_linger",
        "_lock",
        "_monotonic",
        "_name",
        "_on_failed",
        "_on_written",
        "_progress",
        "_render",
        "_running",
        "_size",
        "_started",
        "_stopping",
        "_thread",
        "_work",
        "_write",
        "_write_nowait",
        "_writing",
    )

    def __init__(
        self,
        write: Callable[[bytes], object],
        *,
        on_written: Callable[[], None],
        on_failed: Callable[[BaseException], None],
        limit: int = DEFAULT_LIMIT,
        name: str = "frame-writer",
        inline_after: float | None = DEFAULT_INLINE_AFTER,
        monotonic: Callable[[], float] = time.monotonic,
        render: Render = join_frames,
        write_nowait: Callable[[bytes], int] | None = None,
        linger: float = DEFAULT_LINGER,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1 byte, got {limit}")
        self._write = write
        self._write_nowait = write_nowait
        self._linger = linger
        self._name = name
        self._render = render
        self._on_written = on_written
        self._on_failed = on_failed
        self._limit = limit
        self._monotonic = monotonic
        self._lock = threading.Lock()
        # Two conditions on one lock: a sender's notify must never wake another sender
        # instead of the writer, nor the writer's wake a waiting writer instead of senders.
        # Each is made (under the lock) by its first waiter, and a notify skips one not made
        # yet, as nobody can wait on it: an idle session keeps neither. ``_work`` goes with
        # the writer thread that waited on it.
        self._work: threading.Condition | None = None
        self._progress: threading.Condition | None = None
        self._chunks: list[Item] = []
        self._size = 0
        self._writing = False
        # _idle: no writer thread is about to write (it is parked, or there is none); False
        # until start(), so that nothing is written before it.
        self._idle = False
        self._running = False
        """A writer thread runs and has not decided to end (see :meth:`_wake_locked`)."""
        self._started = False
        self._stopping = False
        self._error: BaseException | None = None
        self._inline_after = inline_after
        self._last_put = float("-inf")
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        """The writer thread now running, or the last one (None: there never was a backlog)."""
        return self._thread

    @property
    def buffered(self) -> int:
        """Bytes accepted but not yet handed to ``write``."""
        with self._lock:
            return self._size

    @property
    def waiting(self) -> bool:
        """Whether no writer thread is about to write (a ``put`` may go inline)."""
        with self._lock:
            return self._idle

    def start(self) -> None:
        """Allow the writer thread from now on (it starts with the first backlog)."""
        with self._lock:
            self._started = True
            if self._chunks:
                self._wake_locked()
            else:
                self._idle = True

    def _wake_locked(self) -> None:
        """Hand queued frames to the writer thread: wake the parked one, or start one."""
        if self._running:
            if self._work is not None:
                self._work.notify()
        elif self._started and not self._stopping:
            self._running = True
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def put(
        self,
        data: Item,
        *,
        force: bool = False,
        inline: bool = True,
        urgent: bool = False,
        nowait: bool = False,
    ) -> None:
        """Queue ``data`` after everything queued before; block while the buffer is full.

        ``force`` queues even when the buffer is full (never blocks): for the reader thread,
        which must not wait for the writer (the writer may be waiting for the broker, which
        may be waiting for us to read). ``inline=False`` never writes on the caller's thread:
        for a caller that knows more frames are coming (a burst whose gaps may exceed
        ``inline_after`` on a busy machine), so that they gather and go together.
        ``urgent`` (with ``inline``): the caller waits for an answer to this frame before its
        next ``put``, so no burst can gather behind it: it is written on the caller's thread
        whenever the writer is idle with nothing queued, however short the quiet time.
        ``nowait`` (implies ``force``): the caller must not block on the socket either (the
        event loop that reads it: see :meth:`_write_inline_nowait`); a frame it writes
        inline goes out with one non-blocking ``write_nowait``, and what that did not write
        is queued for the writer thread ahead of anything else.

        Raises :class:`ConnectionError` (from the cause) once a write failed or the writer
        was cancelled, and the write's own error when this call wrote inline and failed.
        """
        with self._lock:
            while self._size >= self._limit and self._error is None and not (force or nowait):
                self._progress_locked().wait()  # woken by progress, or by the failure a hung
                # peer ends in
            if self._error is not None:
                raise ConnectionError(f"connection is no longer writable: {self._error}") from (
                    self._error
                )
            write_here = False
            # A put that may not go inline skips the clock: the quiet time it would have
            # ended only decides whether a later put goes inline, and writing inline a frame
            # that finds nothing queued and the writer idle is never wrong, only slower in a
            # burst (a burst of group-committed sends puts with inline=False).
            if self._inline_after is not None and inline:
                now = self._monotonic()
                quiet = urgent or now - self._last_put >= self._inline_after
                self._last_put = now
                write_here = (
                    inline and quiet and self._idle and not self._chunks and not self._writing
                )
            if not write_here:
                self._chunks.append(data)
                self._size += len(data) if isinstance(data, bytes) else data.nbytes
                if self._idle:
                    # Only an idle writer waits on the condition (or there is none yet); a
                    # busy one looks again when its write returns, so the hot path skips this.
                    self._idle = False
                    self._wake_locked()
                return
            self._writing = True  # the writer thread waits until this write is done
            write_nowait = self._write_nowait if nowait else None
        if write_nowait is not None:
            self._write_inline_nowait(data, write_nowait)
        elif nowait:
            self._queue_rest(data, 0)  # no way to write without blocking: the thread writes
        else:
            self._write_inline(data)

    def _write_inline(self, data: Item) -> None:
        try:
            self._write(data if isinstance(data, bytes) else self._render([data]))
        except BaseException as exc:
            self._failed_inline(exc)
            raise
        self._inline_written()

    def _write_inline_nowait(self, data: Item, write_nowait: Callable[[bytes], int]) -> None:
        """One non-blocking write of ``data``; the writer thread writes what it left.

        For the event loop that reads this socket: were it to block in ``sendall`` on a full
        send buffer, it would stop reading, and a broker that in turn blocks writing to us
        (its own send buffer full) would never drain ours: both would wait for ever, and
        every other connection on that loop with them. The part not written goes first in
        the buffer, so the half-written frame is finished before any other byte.
        """
        try:
            raw = data if isinstance(data, bytes) else self._render([data])
            try:
                sent = write_nowait(raw)
            except BlockingIOError:
                sent = 0  # no room at all: the thread writes it all
        except BaseException as exc:
            self._failed_inline(exc)
            raise
        if sent >= len(raw):
            self._inline_written()
            return
        self._queue_rest(raw[sent:] if sent else raw, sent)

    def _queue_rest(self, rest: Item, sent: int) -> None:
        """Put ``rest`` of an inline write ahead of everything queued meanwhile, and hand it
        to the writer thread (its failure is then reported through ``on_failed``)."""
        with self._lock:
            self._writing = False
            if self._error is None:  # else cancelled meanwhile: dropped with the buffer
                self._chunks.insert(0, rest)
                self._size += _size(rest)
                if self._idle:
                    self._idle = False
                    self._wake_locked()
        if sent:
            self._on_written()

    def _failed_inline(self, exc: BaseException) -> None:
        with self._lock:
            self._writing = False
            self._stopping = True
            if self._error is None:
                self._error = exc
            self._drop_locked()

    def _inline_written(self) -> None:
        with self._lock:
            self._writing = False
            if self._chunks:
                if self._idle:
                    self._idle = False
                    self._wake_locked()  # frames queued meanwhile: the thread takes them
            else:
                self._notify_progress_locked()
        self._on_written()

    def offer(self, data: bytes) -> bool:
        """Queue ``data`` only when nothing is buffered or being written; never blocks.

        For heart-beats: any frame on its way already counts as traffic. With no writer
        thread running and a ``write_nowait``, ``data`` is written here without blocking
        (no thread is started for a beat); False when the socket buffer is full.
        Raises the error of such a write when it fails otherwise (the writer is then failed).
        """
        with self._lock:
            if self._error is not None or self._chunks or self._writing:
                return False
            if self._running or self._write_nowait is None:
                self._chunks.append(data)
                self._size += len(data)
                if self._idle:
                    self._idle = False
                    self._wake_locked()
                return True
            self._writing = True  # a put meanwhile queues behind this write
        try:
            self._write_nowait(data)
        except BlockingIOError:
            with self._lock:
                self._writing = False
                if self._chunks and self._idle:
                    self._idle = False
                    self._wake_locked()
            return False
        except BaseException as exc:
            self._failed_inline(exc)
            raise
        self._inline_written()
        return True

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until everything queued has been written; False if not.

        Returns False at once when the writer failed or was cancelled.
        """
        deadline: float | None = None
        with self._lock:
            while self._chunks or self._writing:
                if self._error is not None:
                    return False
                if deadline is None:
                    deadline = self._monotonic() + timeout
                remaining = deadline - self._monotonic()
                if remaining <= 0:
                    return False
                self._progress_locked().wait(remaining)
            return self._error is None

    def cancel(self) -> None:
        """Stop at once from any thread: drop what is buffered, fail later puts, end the thread.

        A write already in progress is not interrupted (shut the socket down for that).
        """
        with self._lock:
            self._stopping = True
            if self._error is None:
                self._error = ConnectionAbortedError("connection closed")
            self._drop_locked()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the thread to end; True at once on the writer thread.

        (On the writer thread, e.g. a loss listener that closes the session, the thread is
        on its way out: it returns once that callback does.)
        """
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True  # no backlog ever started one, or the caller is the thread
        thread.join(timeout)
        return not thread.is_alive()

    def _progress_locked(self) -> threading.Condition:
        if self._progress is None:
            self._progress = threading.Condition(self._lock)
        return self._progress

    def _notify_progress_locked(self) -> None:
        if self._progress is not None:
            self._progress.notify_all()

    def _drop_locked(self) -> None:
        self._chunks = []
        self._size = 0
        if self._work is not None:
            self._work.notify_all()
        self._notify_progress_locked()

    def _run(self) -> None:
        while True:
            with self._lock:
                while (not self._chunks or self._writing) and not self._stopping:
                    self._idle = True
                    if self._work is None:
                        self._work = threading.Condition(self._lock)
                    # Queued work or cancel() wakes it; ``linger`` quiet seconds end the backlog.
                    if not self._work.wait(self._linger) and self._idle and not self._stopping:
                        # Under the lock with _idle still set: a put from now on sees
                        # _running False and starts a new thread for its frame.
                        self._running = False
                        self._work = None
                        return
                self._idle = False
                if self._stopping:
                    self._running = False
                    return
                batch, self._chunks, self._size = self._chunks, [], 0
                self._writing = True
                self._notify_progress_locked()  # room for senders blocked on a full buffer
            try:
                data = self._render(batch)
                if len(data) <= WRITE_SLICE:
                    self._write(data)
                else:
                    for start in range(0, len(data), WRITE_SLICE):
                        self._write(data[start : start + WRITE_SLICE])
                        if start + WRITE_SLICE < len(data):
                            self._on_written()  # progress inside one batch (WRITE_SLICE)
            except BaseException as exc:  # noqa: BLE001 - reported through on_failed
                self._fail(exc)
                return
            with self._lock:
                self._writing = False
                if not self._chunks:
                    self._notify_progress_locked()  # flush() waiters
            self._on_written()

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            self._writing = False
            self._running = False
            cancelled = self._stopping
            self._stopping = True
            if self._error is None:
                self._error = exc
            self._drop_locked()
        if not cancelled:
            self._on_failed(exc)

    def __repr__(self) -> str:
        with self._lock:
            size, writing, error = self._size, self._writing, self._error
        state = "failed" if error is not None else ("writing" if writing else "idle")
        return f"FrameWriter(state={state}, buffered={size}, limit={self._limit})"
