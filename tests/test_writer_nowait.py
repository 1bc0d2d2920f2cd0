"""FrameWriter.put(nowait=True): the event loop that reads a socket never blocks writing to it.

A socket pair with small buffers and a peer that reads nothing stands for a broker that stopped
reading; fakes of ``write_nowait`` pin the order of a partial write's rest against frames
queued meanwhile.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from failover_client.net._writer import FrameWriter

WAIT = 5.0
"""Upper bound for waits on what the code under test is bound to do."""

SMALL = 4096
"""Bytes of each side's socket buffer: far less than one of the frames below."""


@dataclass
class Outcome:
    written: int = 0
    failures: list[BaseException] = field(default_factory=list)
    failed: threading.Event = field(default_factory=threading.Event)

    def on_written(self) -> None:
        self.written += 1

    def on_failed(self, exc: BaseException) -> None:
        self.failures.append(exc)
        self.failed.set()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL)
    peer.settimeout(WAIT)  # a lost byte fails the test rather than hanging it
    yield ours, peer
    ours.close()
    peer.close()


def _socket_writer(sock: socket.socket, outcome: Outcome) -> FrameWriter:
    def send(data: bytes) -> int:
        sent: int = sock.send(data, socket.MSG_DONTWAIT)
        return sent

    writer = FrameWriter(
        sock.sendall,
        on_written=outcome.on_written,
        on_failed=outcome.on_failed,
        name="writer",
        write_nowait=send,
    )
    writer.start()
    return writer


def _on_loop(puts: Callable[[], None]) -> threading.Event:
    """Runs ``puts`` on a thread of its own (the loop); the event is set once they returned."""
    returned = threading.Event()

    def run() -> None:
        puts()
        returned.set()

    threading.Thread(target=run, name="loop", daemon=True).start()
    return returned


def _read(peer: socket.socket, total: int) -> bytes:
    received = bytearray()
    while len(received) < total:  # ends: all of it arrives, or recv times out (settimeout)
        chunk = peer.recv(1 << 16)
        assert chunk, "the stream ended early"
        received += chunk
    return bytes(received)


def test_a_put_on_the_loop_returns_at_once_and_the_rest_follows_in_order(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    outcome = Outcome()
    writer = _socket_writer(ours, outcome)
    frames = [bytes([65 + n]) * size + b"\0" for n, size in enumerate((300_000, 10, 200_000, 5))]

    def puts() -> None:
        writer.put(frames[0], urgent=True, nowait=True)  # idle writer: inline, partly written
        for frame in frames[1:]:
            writer.put(frame, urgent=True, nowait=True)

    # Bounded: with the peer reading nothing, a blocking sendall would never return.
    assert _on_loop(puts).wait(WAIT), "a nowait put blocked on a full socket"
    assert writer.thread is not None  # what the loop could not write went to the thread
    assert _read(peer, sum(map(len, frames))) == b"".join(frames)
    assert writer.flush(WAIT)
    assert outcome.failures == []
    writer.cancel()
    assert writer.join(WAIT)


def test_a_failure_of_the_deferred_rest_is_reported_like_any_write_failure(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    outcome = Outcome()
    writer = _socket_writer(ours, outcome)
    assert _on_loop(lambda: writer.put(b"x" * 500_000, urgent=True, nowait=True)).wait(WAIT)
    peer.close()  # the broker is gone: the writer thread's sendall of the rest fails
    assert outcome.failed.wait(WAIT)
    (failure,) = outcome.failures
    assert isinstance(failure, OSError)
    with pytest.raises(ConnectionError) as raised:
        writer.put(b"more", nowait=True)
    assert raised.value.__cause__ is failure
    assert not writer.flush(WAIT)


class PartialSend:
    """A fake ``write_nowait`` that writes ``room`` bytes (none: BlockingIOError); ``during``
    runs inside it, as another thread's put would."""

    def __init__(self, room: int, during: Callable[[], None] = lambda: None) -> None:
        self.room = room
        self.during = during
        self.sent: list[bytes] = []

    def __call__(self, data: bytes) -> int:
        self.during()
        if self.room == 0:
            raise BlockingIOError("socket buffer full")
        self.sent.append(data[: self.room])
        return min(self.room, len(data))


class Sendall:
    """A fake ``sendall`` recording what each thread wrote."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.done = threading.Event()
        self.expected = -1

    def __call__(self, data: bytes) -> None:
        self.calls.append((threading.current_thread().name, data))
        if sum(len(d) for _, d in self.calls) >= self.expected:
            self.done.set()


def _fake_writer(sendall: Sendall, send: PartialSend, outcome: Outcome) -> FrameWriter:
    writer = FrameWriter(
        sendall,
        on_written=outcome.on_written,
        on_failed=outcome.on_failed,
        name="writer",
        write_nowait=send,
        inline_after=0.001,
        monotonic=lambda: 7.0,  # time stands still: only urgency writes inline
    )
    writer.start()
    return writer


def test_the_half_written_frame_is_finished_before_frames_queued_during_its_write() -> None:
    sendall = Sendall()
    sendall.expected = 3 + 2
    outcome = Outcome()
    holder: list[FrameWriter] = []

    def other_thread_puts() -> None:
        # Another thread's frame arrives while the loop's send is under way: it queues.
        thread = threading.Thread(target=lambda: holder[0].put(b"B1"), name="other")
        thread.start()
        thread.join(WAIT)

    send = PartialSend(3, during=other_thread_puts)
    writer = _fake_writer(sendall, send, outcome)
    holder.append(writer)
    writer.put(b"AAAAAA", urgent=True, nowait=True)
    assert send.sent == [b"AAA"]
    assert outcome.written == 1  # part of it went out: the heart-beat bookkeeping counts it
    assert sendall.done.wait(WAIT)
    assert writer.flush(WAIT)
    assert sendall.calls == [("writer", b"AAAB1")]  # the rest first, then the other frame
    assert outcome.failures == []


def test_a_socket_with_no_room_at_all_leaves_the_whole_frame_to_the_thread() -> None:
    sendall = Sendall()
    sendall.expected = 5
    outcome = Outcome()
    writer = _fake_writer(sendall, PartialSend(0), outcome)
    writer.put(b"frame", urgent=True, nowait=True)
    assert outcome.written == 0  # nothing was written here
    assert sendall.done.wait(WAIT)
    assert writer.flush(WAIT)
    assert sendall.calls == [("writer", b"frame")]


def test_a_failed_nowait_write_raises_to_its_caller_and_ends_the_writer() -> None:
    def broken(data: bytes) -> int:
        raise BrokenPipeError("peer gone")

    sendall = Sendall()
    outcome = Outcome()
    writer = FrameWriter(
        sendall, on_written=outcome.on_written, on_failed=outcome.on_failed, write_nowait=broken
    )
    writer.start()
    with pytest.raises(BrokenPipeError):
        writer.put(b"frame", urgent=True, nowait=True)
    with pytest.raises(ConnectionError):
        writer.put(b"next", nowait=True)
    assert outcome.failures == []  # raised to the caller, like an inline write's failure
    assert sendall.calls == []


def test_a_put_cancelled_during_its_nowait_write_drops_the_rest() -> None:
    sendall = Sendall()
    outcome = Outcome()
    send = PartialSend(2)
    writer = _fake_writer(sendall, send, outcome)
    send.during = writer.cancel  # the session is closed while the loop's send is under way
    writer.put(b"frame", urgent=True, nowait=True)
    assert writer.buffered == 0
    assert writer.thread is None  # nothing was handed to a thread
    assert sendall.calls == []


def test_without_nowait_an_idle_writer_writes_on_the_caller_thread_with_sendall() -> None:
    sendall = Sendall()
    send = PartialSend(1)
    writer = _fake_writer(sendall, send, Outcome())
    writer.put(b"frame", urgent=True, force=True)  # the sync path, reader thread included
    assert sendall.calls == [(threading.current_thread().name, b"frame")]
    assert send.sent == []


def test_nowait_without_a_write_nowait_leaves_the_frame_to_the_thread() -> None:
    sendall = Sendall()
    sendall.expected = 5
    writer = FrameWriter(
        sendall, on_written=lambda: None, on_failed=lambda exc: None, name="writer"
    )
    writer.start()
    writer.put(b"frame", urgent=True, nowait=True)
    assert sendall.done.wait(WAIT)
    assert writer.flush(WAIT)
    assert sendall.calls == [("writer", b"frame")]
