"""LoopReader: a STOMP session's socket read by an event loop, one recv per readiness.

A real loopback socket pair stands for the broker (the bytes a test writes are in the
client's receive buffer when ``sendall`` returns); the event loop is a recording stand-in, so a
test decides when a readiness callback runs.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from failover_client._clock import SystemClock
from failover_client.stomp._loopread import LOOP_READ_BYTES, LoopReader, reads_here
from failover_client.stomp._transport import BoundTransport

WAIT = 5.0
"""Upper bound for waits on what the code under test is bound to do."""


class FakeLoop:
    """Records what the reader asks of an event loop; runs nothing by itself."""

    def __init__(self) -> None:
        self.readers: dict[int, Callable[[], None]] = {}
        self.removed: list[int] = []
        self.soon: list[Callable[[], None]] = []
        self.closed = False

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        assert fd not in self.readers
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> bool:
        self.removed.append(fd)
        return self.readers.pop(fd, None) is not None

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.soon.append(callback)

    def is_closed(self) -> bool:
        return self.closed

    def run_soon(self) -> None:
        soon, self.soon = self.soon, []
        for callback in soon:
            callback()


class Recorder:
    """The session's listener, as stomp.py calls it."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.on_frame: Callable[[], None] = lambda: None

    def on_message(self, frame: Any) -> None:
        self.seen.append(f"MESSAGE {frame.body.decode()}")
        self.on_frame()

    def on_receipt(self, frame: Any) -> None:
        self.seen.append(f"RECEIPT {frame.headers['receipt-id']}")
        self.on_frame()

    def on_heartbeat(self) -> None:
        self.seen.append("heart-beat")

    def on_receiver_loop_completed(self, frame: Any) -> None:
        self.seen.append("receiver_loop_completed")

    def on_disconnected(self) -> None:
        self.seen.append("disconnected")


class Rig:
    def __init__(self, transport: BoundTransport, broker: socket.socket) -> None:
        self.transport = transport
        self.broker = broker
        self.loop = FakeLoop()
        self.listener = Recorder()
        self.chunks: list[int] = []
        transport.set_listener("test", self.listener)

    def reader(self, *, on_loop: bool = True) -> LoopReader:
        thread = threading.get_ident() if on_loop else -1
        return LoopReader(self.transport, (self.loop, thread), "stomp-loop-read test")  # type: ignore[arg-type]

    def readable(self) -> None:
        (callback,) = self.loop.readers.values()
        callback()


@pytest.fixture
def rig() -> Iterator[Rig]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    chunks: list[int] = []
    clock = SystemClock()
    transport = BoundTransport(
        "127.0.0.1",
        server.getsockname()[1],
        deadline=clock.monotonic() + 5.0,
        clock=clock,
        ssl_context=None,
        server_hostname=None,
        on_bytes=lambda data: chunks.append(len(data)),
        on_bad_frame=lambda command: None,
    )
    transport.attempt_connection()
    transport.running = True
    broker, _ = server.accept()
    server.close()
    made = Rig(transport, broker)
    made.chunks = chunks
    yield made
    broker.close()
    if transport.socket is not None:
        transport.socket.close()


def message(body: str) -> bytes:
    return f"MESSAGE\nsubscription:s\nmessage-id:{body}\ndestination:/queue/q\n\n{body}\0".encode()


def test_each_readiness_is_one_recv_and_the_frames_it_completes(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    rig.broker.sendall(message("a") + message("b") + message("c")[:20])
    rig.readable()
    assert rig.listener.seen == ["MESSAGE a", "MESSAGE b"]
    assert len(rig.chunks) == 1
    rig.broker.sendall(message("c")[20:] + b"\n")
    rig.readable()
    assert rig.listener.seen == ["MESSAGE a", "MESSAGE b", "MESSAGE c"]
    rig.broker.sendall(b"\n")  # a heart-beat to an empty buffer
    rig.readable()
    assert rig.listener.seen[-1] == "heart-beat"
    assert reader.is_alive()


def test_heart_beats_reach_the_listeners_and_never_count_towards_a_frame(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    for _ in range(3):
        rig.broker.sendall(b"\n")
        rig.readable()
    assert rig.listener.seen == ["heart-beat"] * 3
    assert rig.transport._unframed == 0  # the frame-size limit counts frames, not beats


def test_a_large_burst_is_read_a_chunk_per_readiness(rig: Rig) -> None:
    rig.reader().start()
    burst = b"".join(message(f"{n:04}") for n in range(1000))  # about 70 KiB
    sender = threading.Thread(target=rig.broker.sendall, args=(burst,))
    sender.start()
    steps = 0
    while len(rig.listener.seen) < 1000:
        before = len(rig.listener.seen)
        rig.readable()
        steps += 1
        assert len(rig.listener.seen) - before <= LOOP_READ_BYTES // len(message("0000")) + 1
    sender.join()  # ends: every byte was read
    # Readinesses that found nothing yet (the sender still writing) read nothing.
    assert steps >= len(rig.chunks) > 4
    assert max(rig.chunks) <= LOOP_READ_BYTES
    assert rig.listener.seen == [f"MESSAGE {n:04}" for n in range(1000)]


def test_a_readiness_with_nothing_to_read_neither_blocks_nor_ends(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    rig.readable()  # the socket is blocking for the writer; this recv is not
    assert rig.listener.seen == []
    assert rig.chunks == []
    assert reader.is_alive()
    assert rig.transport.running


def test_a_frame_split_over_chunks_is_joined_once_its_end_arrives(rig: Rig) -> None:
    rig.reader().start()
    frame = message("x" * 3000)
    for start in range(0, len(frame), 1000):
        assert rig.listener.seen == []
        rig.broker.sendall(frame[start : start + 1000])
        rig.readable()
    assert rig.listener.seen == ["MESSAGE " + "x" * 3000]


def test_end_of_stream_runs_the_io_loops_finally_once(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    fd = rig.transport.socket.fileno()
    rig.broker.sendall(message("last") + message("cut")[:10])
    rig.broker.close()
    callback = rig.loop.readers[fd]
    callback()  # the message (one recv takes all that was sent)
    assert reader.is_alive()
    callback()  # end of stream
    assert rig.listener.seen == ["MESSAGE last", "receiver_loop_completed", "disconnected"]
    assert rig.loop.removed == [fd]
    assert rig.loop.readers == {}
    assert rig.transport.socket is None
    assert not rig.transport.running
    assert rig.transport._BaseTransport__recvbuf == b""
    assert rig.transport._BaseTransport__io_thread_exited
    assert not reader.is_alive()
    callback()  # a readiness already queued: nothing more happens
    reader.finish()
    reader.join(0.0)
    assert rig.listener.seen == ["MESSAGE last", "receiver_loop_completed", "disconnected"]
    assert rig.loop.removed == [fd]


def test_disconnected_is_not_told_twice(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    rig.transport.notify("disconnected")  # stomp.py already told it (disconnect_socket)
    rig.broker.close()
    rig.readable()
    assert rig.listener.seen == ["disconnected", "receiver_loop_completed"]
    assert not rig.transport.notified_on_disconnect  # reset as stomp.py's loop does
    assert not reader.is_alive()


def test_a_failing_listener_ends_the_session(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()

    def fail() -> None:
        raise ValueError("listener bug")

    rig.listener.on_frame = fail
    rig.broker.sendall(message("a"))
    rig.readable()
    assert rig.listener.seen == ["MESSAGE a", "receiver_loop_completed", "disconnected"]
    assert not reader.is_alive()
    assert rig.transport.socket is None


def test_start_off_the_loop_registers_through_the_loop(rig: Rig) -> None:
    reader = rig.reader(on_loop=False)
    reader.start()
    assert rig.loop.readers == {}
    assert len(rig.loop.soon) == 1
    rig.loop.run_soon()
    assert list(rig.loop.readers) == [rig.transport.socket.fileno()]
    assert not reads_here(reader)
    assert reads_here(rig.reader())


def test_closed_before_the_loop_registered_it(rig: Rig) -> None:
    reader = rig.reader(on_loop=False)
    reader.start()
    rig.transport.abort()  # close() from another thread, before the loop ran
    reader.join(0.0)  # off the loop: waits for the loop, which has not run
    assert reader.is_alive()
    rig.loop.run_soon()
    assert rig.loop.readers == {}
    assert rig.loop.removed == []
    assert rig.listener.seen == ["receiver_loop_completed", "disconnected"]
    assert not reader.is_alive()


def test_close_while_registered_ends_at_the_next_readiness(rig: Rig) -> None:
    reader = rig.reader(on_loop=False)
    reader.start()
    rig.loop.run_soon()
    rig.transport.abort()  # shuts the socket down: the loop sees it readable
    assert reader.is_alive()
    rig.readable()
    assert rig.loop.readers == {}
    assert rig.listener.seen == ["receiver_loop_completed", "disconnected"]
    reader.join(5.0)  # returns at once: reading ended
    assert not reader.is_alive()


def test_join_on_the_loop_thread_never_waits(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    joined: list[bool] = []

    def join_inside() -> None:
        reader.join(30.0)  # inside the readiness callback: returns at once
        joined.append(reader.is_alive())
        rig.transport.abort()

    rig.listener.on_frame = join_inside
    rig.broker.sendall(message("a"))
    rig.readable()
    assert joined == [True]  # it returned without finishing the callback's own reader
    assert not reader.is_alive()  # the callback finished it on its way out


def test_join_on_the_loop_thread_outside_a_callback_finishes_there(rig: Rig) -> None:
    reader = rig.reader()
    reader.start()
    rig.transport.abort()
    reader.join(30.0)  # would wait for the loop this very thread runs: finishes here
    assert not reader.is_alive()
    assert rig.loop.readers == {}
    assert rig.listener.seen == ["receiver_loop_completed", "disconnected"]


def test_join_once_the_loop_is_closed_finishes_there(rig: Rig) -> None:
    reader = rig.reader(on_loop=False)
    reader.start()
    rig.loop.run_soon()
    rig.loop.closed = True
    rig.transport.abort()
    reader.join(30.0)
    assert not reader.is_alive()
    assert rig.listener.seen == ["receiver_loop_completed", "disconnected"]
    assert rig.transport.socket is None


def test_a_closed_loop_refuses_the_start(rig: Rig) -> None:
    rig.loop.closed = True
    with pytest.raises(RuntimeError):
        rig.reader(on_loop=False).start()
    # A thread reads it after all: as much at once as any I/O thread does.
    assert (rig.transport.recv_flags, rig.transport.recv_max) == (0, BoundTransport.recv_max)


def test_the_loop_reads_smaller_chunks_than_a_thread(rig: Rig) -> None:
    assert BoundTransport.recv_max > LOOP_READ_BYTES
    rig.reader().start()
    assert rig.transport.recv_max == LOOP_READ_BYTES


class RecordingWriter:
    def __init__(self) -> None:
        self.calls: list[tuple[bool, bool]] = []

    def put(self, data: object, *, force: bool = False, nowait: bool = False, **_: object) -> None:
        self.calls.append((force, nowait))


def test_writes_from_the_reading_loop_never_wait(rig: Rig) -> None:
    writer = RecordingWriter()
    rig.transport._writer = writer  # type: ignore[assignment]
    rig.transport.io_thread = None  # a thread reads it (or none yet): a full buffer is waited on
    rig.transport.send(b"ACK\n\n\0")
    rig.transport.io_thread = rig.reader(on_loop=False)  # read by a loop this thread is not
    rig.transport.send_deferred(b"ACK\n\n\0")
    rig.transport.send_deferred(b"ACK\n\n\0", force=True)  # the sync reader thread's force
    rig.transport.io_thread = rig.reader()  # read by the loop running this very code
    rig.transport.send(b"ACK\n\n\0")
    rig.transport.send_deferred(b"ACK\n\n\0")
    # nowait: neither for room in the buffer nor for the socket (FrameWriter.put)
    assert writer.calls == [
        (False, False),
        (False, False),
        (True, False),
        (False, True),
        (False, True),
    ]


def test_a_large_frame_written_on_the_reading_loop_never_blocks_it(rig: Rig) -> None:
    """The broker reads nothing: the loop's send returns, the writer thread finishes it."""
    transport = rig.transport
    sock = transport.socket
    assert sock is not None
    # Small enough that no frame here fits in what the two buffers hold (the broker's grows
    # only as it reads), large enough to stream quickly once the broker reads.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
    failed: list[BaseException] = []
    assert transport.start_writer(on_written=lambda: None, on_failed=failed.append, name="w")
    frames = [b"SEND\n\n" + bytes([65 + n]) * (2 << 20) + b"\0" for n in range(3)]
    done = threading.Event()

    def on_loop() -> None:
        transport.io_thread = rig.reader()  # read by the loop running this very code
        for frame in frames:
            transport.send(frame)
        done.set()

    loop_thread = threading.Thread(target=on_loop, name="loop")
    loop_thread.start()
    # Bounded: a blocking sendall would never return, as nothing reads the other end.
    assert done.wait(WAIT), "a write on the reading loop blocked on a full socket"
    rig.broker.settimeout(WAIT)  # a lost rest fails the test rather than hanging it
    received = bytearray()
    total = sum(map(len, frames))
    while len(received) < total:  # ends: the writer thread writes all of it, or recv fails
        chunk = rig.broker.recv(1 << 20)
        assert chunk, "the stream ended before every frame arrived"
        received += chunk
    assert bytes(received) == b"".join(frames)
    assert transport.flush(WAIT)
    assert failed == []
    loop_thread.join(WAIT)
