"""The batching frame writer and its use by the STOMP transport, with fake writes (no sockets)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from stomp.utils import Frame, convert_frame, pack

from failover_client._clock import SystemClock
from failover_client.net._writer import FrameWriter
from failover_client.stomp._transport import BoundTransport

WAIT = 5.0
"""Upper bound for waits on events that the code under test is bound to set."""


class GatedWrite:
    """A fake ``sendall``: records each call; calls wait for ``release`` while ``gated``."""

    def __init__(
        self, *, gated: bool = False, error: BaseException | None = None, fail_from: int = 0
    ) -> None:
        self.calls: list[bytes] = []
        self.gated = gated
        self.error = error
        self.fail_from = fail_from
        self.threads: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done = threading.Semaphore(0)

    def __call__(self, data: bytes) -> None:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        if self.gated:
            assert self.release.wait(WAIT)
        if self.error is not None and len(self.calls) >= self.fail_from:
            raise self.error
        self.calls.append(data)
        self.done.release()

    def wait_writes(self, count: int) -> None:
        for _ in range(count):
            assert self.done.acquire(timeout=WAIT)


class Outcome:
    """Collects on_written / on_failed calls."""

    def __init__(self) -> None:
        self.written = 0
        self.failures: list[BaseException] = []
        self.failed = threading.Event()

    def on_written(self) -> None:
        self.written += 1

    def on_failed(self, exc: BaseException) -> None:
        self.failures.append(exc)
        self.failed.set()


def make(
    write: GatedWrite,
    limit: int = 1 << 20,
    inline_after: float | None = None,
    now: list[float] | None = None,
) -> tuple[FrameWriter, Outcome]:
    outcome = Outcome()
    times = now if now is not None else []
    writer = FrameWriter(
        write,
        on_written=outcome.on_written,
        on_failed=outcome.on_failed,
        limit=limit,
        name="writer",
        inline_after=inline_after,
        monotonic=(lambda: times[0]) if times else time.monotonic,
    )
    writer.start()
    return writer, outcome


def finish(writer: FrameWriter) -> None:
    writer.cancel()
    assert writer.join(WAIT)


def test_an_idle_writer_writes_a_lone_frame_at_once() -> None:
    write = GatedWrite()
    writer, outcome = make(write)
    writer.put(b"SEND\n\n\x00")
    write.wait_writes(1)
    assert write.calls == [b"SEND\n\n\x00"]
    assert writer.flush(WAIT) is True
    assert outcome.written == 1
    finish(writer)


def test_frames_queued_during_a_write_go_out_together_in_order() -> None:
    write = GatedWrite(gated=True)
    writer, outcome = make(write)
    writer.put(b"a")
    assert write.entered.wait(WAIT)
    for chunk in (b"b", b"c", b"d"):
        writer.put(chunk)
    assert writer.buffered == 3
    write.release.set()
    write.wait_writes(2)
    assert write.calls == [b"a", b"bcd"]
    assert writer.flush(WAIT) is True
    assert outcome.written == 2
    assert outcome.failures == []
    finish(writer)


def test_a_full_buffer_blocks_the_sender_until_the_writer_takes_it() -> None:
    write = GatedWrite(gated=True)
    writer, _ = make(write, limit=4)
    writer.put(b"aaaa")
    assert write.entered.wait(WAIT)
    writer.put(b"bbbb")  # the buffer now holds the limit
    returned = threading.Event()

    def sender() -> None:
        writer.put(b"c")
        returned.set()

    thread = threading.Thread(target=sender)
    thread.start()
    assert not returned.wait(0.05)
    assert writer.buffered == 4
    write.release.set()
    assert returned.wait(WAIT)
    thread.join(WAIT)
    write.wait_writes(3)
    assert write.calls == [b"aaaa", b"bbbb", b"c"]
    finish(writer)


def test_a_failed_write_is_reported_once_and_fails_every_later_put() -> None:
    error = BrokenPipeError(32, "Broken pipe")
    write = GatedWrite(gated=True, error=error)
    writer, outcome = make(write, limit=1)
    writer.put(b"a")
    assert write.entered.wait(WAIT)
    writer.put(b"b")
    blocked: list[BaseException] = []

    def sender() -> None:
        try:
            writer.put(b"c")
        except ConnectionError as exc:
            blocked.append(exc)

    thread = threading.Thread(target=sender)
    thread.start()
    write.release.set()
    assert outcome.failed.wait(WAIT)
    thread.join(WAIT)
    assert writer.join(WAIT)
    assert outcome.failures == [error]
    assert len(blocked) == 1
    assert blocked[0].__cause__ is error
    with pytest.raises(ConnectionError, match=r"no longer writable: .*Broken pipe") as info:
        writer.put(b"d")
    assert info.value.__cause__ is error
    assert writer.buffered == 0
    assert writer.flush(WAIT) is False
    assert writer.offer(b"\n") is False
    assert outcome.written == 0
    assert repr(writer) == "FrameWriter(state=failed, buffered=0, limit=1)"


def test_cancel_drops_the_buffer_ends_the_thread_and_reports_nothing() -> None:
    write = GatedWrite(gated=True, error=OSError(9, "Bad file descriptor"))
    writer, outcome = make(write)
    writer.put(b"a")
    assert write.entered.wait(WAIT)
    writer.put(b"b")
    writer.cancel()
    assert writer.buffered == 0
    with pytest.raises(ConnectionError, match="connection closed"):
        writer.put(b"c")
    write.release.set()  # the write in progress then fails, as on a shut-down socket
    assert writer.join(WAIT)
    assert outcome.failures == []
    assert write.calls == []


def test_flush_waits_for_the_write_in_progress_and_gives_up_at_its_timeout() -> None:
    write = GatedWrite(gated=True)
    writer, _ = make(write)
    writer.put(b"a")
    assert write.entered.wait(WAIT)
    assert writer.flush(0.01) is False
    write.release.set()
    assert writer.flush(WAIT) is True
    assert write.calls == [b"a"]
    finish(writer)


def test_offer_queues_only_when_nothing_is_on_its_way() -> None:
    write = GatedWrite(gated=True)
    writer, _ = make(write)
    assert writer.offer(b"\n") is True
    assert write.entered.wait(WAIT)
    assert writer.offer(b"\n") is False  # a write is in progress: that is traffic already
    write.release.set()
    assert writer.flush(WAIT) is True
    assert writer.offer(b"\n") is True
    write.wait_writes(2)
    assert write.calls == [b"\n", b"\n"]
    finish(writer)


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit must be >= 1 byte, got 0"):
        FrameWriter(GatedWrite(), on_written=lambda: None, on_failed=lambda e: None, limit=0)


# -- the transport's use of the writer ----------------------------------------------------------


class FakeSocket:
    """Stands in for a connected plain socket."""

    def __init__(self, write: GatedWrite) -> None:
        self.sendall = write
        self.shutdowns: list[int] = []
        self.direct: list[bytes] = []

    def send(self, data: bytes, flags: int = 0) -> int:
        self.direct.append(data)
        return len(data)

    def shutdown(self, how: int) -> None:
        self.shutdowns.append(how)


def transport_with(write: GatedWrite) -> tuple[BoundTransport, FakeSocket]:
    transport = BoundTransport(
        "broker.example",
        61613,
        deadline=0.0,
        clock=SystemClock(),
        ssl_context=None,
        server_hostname=None,
        on_bytes=lambda data: None,
        on_bad_frame=lambda command: None,
    )
    sock = FakeSocket(write)
    transport.socket = sock
    return transport, sock


def test_transport_writes_directly_until_the_writer_starts_then_through_it() -> None:
    write = GatedWrite()
    transport, sock = transport_with(write)
    transport.send(b"CONNECT\n\n\x00")
    assert write.calls == [b"CONNECT\n\n\x00"]
    outcome = Outcome()
    assert transport.start_writer(
        on_written=outcome.on_written, on_failed=outcome.on_failed, name="w"
    )
    assert not transport.start_writer(
        on_written=outcome.on_written, on_failed=outcome.on_failed, name="w"
    )
    write.gated = True
    write.entered.clear()
    # The first frame after a quiet spell is written on the sender's own thread.
    first = threading.Thread(target=transport.send, args=(b"1",), name="sender")
    first.start()
    assert write.entered.wait(WAIT)
    transport.send(b"2")
    with pytest.raises(BlockingIOError):
        transport.write_heartbeat()  # never beside a write in progress
    write.release.set()
    first.join(WAIT)
    assert transport.flush(WAIT)
    transport.write_heartbeat()
    assert transport.flush(WAIT)
    assert write.calls == [b"CONNECT\n\n\x00", b"1", b"2", b"\n"]
    assert write.threads == ["MainThread", "sender", "w", "w"]
    assert sock.direct == []
    transport.abort()
    assert transport.join_writer(WAIT)
    assert sock.shutdowns == [socket.SHUT_RDWR]


def test_transport_reports_a_failed_write_then_shuts_the_socket_down() -> None:
    error = ConnectionResetError(104, "Connection reset by peer")
    write = GatedWrite(gated=True, error=error, fail_from=1)
    transport, sock = transport_with(write)
    seen: list[tuple[BaseException, list[int]]] = []
    reported = threading.Event()

    def on_failed(exc: BaseException) -> None:
        seen.append((exc, list(sock.shutdowns)))
        reported.set()

    assert transport.start_writer(on_written=lambda: None, on_failed=on_failed, name="w")
    first = threading.Thread(target=transport.send, args=(b"1",))
    first.start()  # written inline, held in the write
    assert write.entered.wait(WAIT)
    transport.send(b"2")  # queued for the writer thread, whose write then fails
    write.release.set()
    first.join(WAIT)
    assert reported.wait(WAIT)
    assert transport.join_writer(WAIT)
    assert seen == [(error, [])]
    assert sock.shutdowns == [socket.SHUT_RDWR]
    with pytest.raises(ConnectionError):
        transport.send(b"SEND\n\n\x00")


def test_a_tls_transport_keeps_stomp_py_queue_and_gets_no_writer() -> None:
    transport, _ = transport_with(GatedWrite())
    transport.blocking = False
    assert not transport.start_writer(on_written=lambda: None, on_failed=lambda e: None, name="w")
    assert transport.flush(0.0) is True
    assert transport.join_writer(0.0) is True


def test_writer_repr_shows_live_state() -> None:
    write = GatedWrite(gated=True)
    writer, _ = make(write, limit=64)
    assert repr(writer).startswith("FrameWriter(state=")
    writer.put(b"a")
    assert write.entered.wait(WAIT)
    writer.put(b"bc")
    assert repr(writer) == "FrameWriter(state=writing, buffered=2, limit=64)"
    write.release.set()
    assert writer.flush(WAIT)
    assert repr(writer) == "FrameWriter(state=idle, buffered=0, limit=64)"
    finish(writer)


def test_transmit_writes_stomp_py_rendering_and_disconnect_takes_stomp_py_path() -> None:
    write = GatedWrite()
    transport, _ = transport_with(write)
    heard: list[str] = []

    class Listener:
        def on_send(self, frame: Frame) -> None:
            heard.append(frame.cmd)

    transport.set_listener("probe", Listener())
    headers = {"destination": "/queue/a", "content-length": "3", "receipt": "r-1"}
    expected = pack(convert_frame(Frame("SEND", dict(headers), b"abc")))
    transport.transmit(Frame("SEND", dict(headers), b"abc"))
    transport.transmit(Frame("DISCONNECT", {"receipt": "bye"}, b""))
    assert write.calls == [expected, b"DISCONNECT\nreceipt:bye\n\n\x00"]
    assert heard == ["DISCONNECT"]  # only the full stomp.py path walks the listeners


def test_a_writer_thread_may_close_itself_without_waiting_for_itself() -> None:
    joined: list[bool] = []
    holder: list[FrameWriter] = []

    def write(data: bytes) -> None:
        holder[0].cancel()
        joined.append(holder[0].join(WAIT))

    writer = FrameWriter(write, on_written=lambda: None, on_failed=lambda e: None)
    holder.append(writer)
    assert writer.join(0.0) is True  # never started
    writer.start()
    writer.put(b"a")
    assert writer.join(WAIT)
    assert joined == [True]


def test_after_a_quiet_spell_an_idle_writer_lets_the_caller_write_itself() -> None:
    now = [10.0]
    write = GatedWrite()
    writer, outcome = make(write, inline_after=0.001, now=now)
    writer.put(b"a")  # first frame: written on this thread before put returns
    assert write.calls == [b"a"]
    assert outcome.written == 1
    now[0] += 0.0005
    writer.put(b"b")  # right after another: through the writer thread
    write.wait_writes(2)
    assert writer.flush(WAIT)
    now[0] += 0.002
    writer.put(b"c")
    assert write.calls == [b"a", b"b", b"c"]
    assert write.threads == ["MainThread", "writer", "MainThread"]
    finish(writer)


def test_frames_queued_during_an_inline_write_follow_it_through_the_thread() -> None:
    write = GatedWrite(gated=True)
    writer, _ = make(write, inline_after=0.0)
    first = threading.Thread(target=writer.put, args=(b"a",), name="sender")
    first.start()
    assert write.entered.wait(WAIT)
    writer.put(b"b")
    writer.put(b"c")
    assert writer.buffered == 2
    write.release.set()
    first.join(WAIT)
    assert writer.flush(WAIT)
    assert write.calls == [b"a", b"bc"]
    assert write.threads == ["sender", "writer"]
    finish(writer)


def test_a_failed_inline_write_raises_to_its_caller_and_ends_the_writer() -> None:
    error = BrokenPipeError(32, "Broken pipe")
    write = GatedWrite(error=error)
    writer, outcome = make(write, inline_after=0.0)
    with pytest.raises(BrokenPipeError):
        writer.put(b"a")
    assert writer.join(WAIT)
    assert outcome.failures == []  # the caller saw it, as with a direct write
    with pytest.raises(ConnectionError, match="no longer writable"):
        writer.put(b"b")


def test_a_nowait_write_goes_out_at_once_without_the_writer_thread_or_waiting() -> None:
    # The I/O thread's page-in pairs: written on the caller's thread with a non-blocking send
    # when the writer is idle (no wake-up of its thread per pair); behind a write in progress
    # they are queued, never waited for.
    write = GatedWrite()
    transport, sock = transport_with(write)
    outcome = Outcome()
    assert transport.start_writer(
        on_written=outcome.on_written, on_failed=outcome.on_failed, name="w"
    )
    transport.send_deferred(b"PAIR-1", force=True, inline=True, nowait=True)
    assert sock.direct == [b"PAIR-1"]
    assert write.calls == []
    write.gated = True
    write.entered.clear()
    busy = threading.Thread(target=transport.send, args=(b"frame",), name="sender")
    busy.start()
    assert write.entered.wait(WAIT)  # a blocking write is in progress (on either thread)
    transport.send_deferred(b"PAIR-2", force=True, inline=True, nowait=True)  # returns at once
    assert sock.direct == [b"PAIR-1"]
    write.release.set()
    busy.join(WAIT)
    assert transport.flush(WAIT)
    assert write.calls == [b"frame", b"PAIR-2"]
    assert write.threads[1] == "w"  # ("frame" went inline or through the writer: timing's call)
    transport.abort()
    assert transport.join_writer(WAIT)
