"""The adapter's read of a burst splits it into exactly stomp.py's frames, however it arrives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from stomp.exception import ConnectionClosedException
from stomp.transport import BaseTransport

from failover_client._clock import SystemClock
from failover_client.stomp._decode import split_frames
from failover_client.stomp._transport import BoundTransport

# Pieces that exercise every rule: NULs (inside bodies too), content-length headers that are
# right, short, long or not at a line start, blank lines both ways, EOLs between frames.
PIECES = [
    b"MESSAGE\n", b"a:b\n", b"content-length:3\n", b"content-length: 0\n", b"content-length:9\n",
    b"x-content-length:2\n", b"\n", b"\r\n", b"\r\n\r\n", b"\n\n", b"\x00", b"ab", b"\x00\x00",
    b"\n\x00", b"body",
]  # fmt: skip


class _Chunks:
    """``receive`` of a transport: the given chunks, then b"" (the end of the connection)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def __call__(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


class _Stomp(BaseTransport):  # type: ignore[misc]
    def __init__(self, chunks: list[bytes]) -> None:
        super().__init__(auto_decode=False)
        self.running = True
        self.blocking = True
        self.receive = _Chunks(chunks)


class _Ours(BoundTransport):
    def __init__(
        self, chunks: list[bytes], on_frames_done: Callable[[], None] | None = None
    ) -> None:
        super().__init__(
            "127.0.0.1",
            61613,
            deadline=0.0,
            clock=SystemClock(),
            ssl_context=None,
            server_hostname=None,
            on_bytes=lambda data: None,
            on_bad_frame=lambda command: None,
            on_frames_done=on_frames_done,
        )
        self.running = True
        self.blocking = True
        self._chunks = _Chunks(chunks)

    def receive(self) -> bytes:
        return self._chunks()


def _reads(transport: Any) -> tuple[list[list[bytes]], bytes]:
    """Every read's frames until the chunks run out, and what was left unframed."""
    reads = []
    while True:
        try:
            reads.append(transport._BaseTransport__read())
        except ConnectionClosedException:  # the chunks ran out: the end of the connection
            return reads, transport._BaseTransport__recvbuf


@given(
    st.lists(st.sampled_from(PIECES), max_size=30).map(b"".join),
    st.lists(st.integers(min_value=1, max_value=12), max_size=8),
)
def test_the_same_frames_as_stomp_py(data: bytes, cuts: list[int]) -> None:
    chunks, rest = [], data
    for cut in cuts:
        if rest:
            chunks.append(rest[:cut])
            rest = rest[cut:]
    if rest:
        chunks.append(rest)
    assert _reads(_Ours(chunks)) == _reads(_Stomp(chunks))


def test_a_body_with_a_nul_waits_for_its_length() -> None:
    frame = b"MESSAGE\ncontent-length:3\n\na\x00b"
    assert split_frames(frame) == ([], 0)  # its NUL may still come: nothing framed yet
    burst = frame + b"\x00\n\nMESSAGE\n\nx\x00"
    assert split_frames(burst) == ([frame, b"MESSAGE\n\nx"], len(burst))


def test_an_unfinished_frame_is_left() -> None:
    assert split_frames(b"RECEIPT\n\n\x00\nMESS") == ([b"RECEIPT\n\n"], 11)


class _Listener:
    """A stomp.py listener that records MESSAGE ids, and raises on one it is told to."""

    def __init__(self, raise_on: str | None = None) -> None:
        self.ids: list[str] = []
        self.raise_on = raise_on

    def on_message(self, frame: Any) -> None:
        self.ids.append(frame.headers["message-id"])
        if frame.headers["message-id"] == self.raise_on:
            raise RuntimeError("listener failed")


def _reads_with_done(listener: _Listener, frames: list[bytes]) -> list[tuple[str, list[str]]]:
    """process_frames of one read, the listener's ids and each ``on_frames_done`` in order."""
    seen: list[tuple[str, list[str]]] = []
    transport = _Ours([], on_frames_done=lambda: seen.append(("done", list(listener.ids))))
    transport.set_listener("l", listener)
    try:
        transport.process_frames(frames)
    except RuntimeError:
        seen.append(("raised", list(listener.ids)))
    return seen


def _message(n: int) -> bytes:
    return f"MESSAGE\nmessage-id:m{n}\nsubscription:s\ndestination:/queue/q\n\nx".encode()


def test_a_read_of_several_frames_ends_with_one_frames_done() -> None:
    # The session counts per read what it used to count per message (its watchdog's dispatch,
    # page-in): the end of the read must come once, after every frame of it.
    assert _reads_with_done(_Listener(), [_message(n) for n in range(3)]) == [
        ("done", ["m0", "m1", "m2"])
    ]
    assert _reads_with_done(_Listener(), []) == []


def test_frames_done_comes_even_when_a_listener_raises() -> None:
    # A dispatch bracket left open would stop the watchdog from ever seeing silence.
    listener = _Listener(raise_on="m1")
    assert _reads_with_done(listener, [_message(n) for n in range(3)]) == [
        ("done", ["m0", "m1"]),
        ("raised", ["m0", "m1"]),
    ]
