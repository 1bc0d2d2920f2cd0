"""BoundTransport dials through SocketDial and hands stomp.py's I/O loop a ready socket.

A real listening socket on loopback stands for the broker; the resolver is injected.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import struct
from collections.abc import Iterator, Sequence

import pytest
from stomp.utils import Frame

from failover_client._clock import SystemClock
from failover_client.net._dial import AddrInfo
from failover_client.stomp._transport import BoundTransport


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def transport(port: int, asked: list[str]) -> BoundTransport:
    def resolve(host: str, port_: int, family: int, kind: int) -> Sequence[AddrInfo]:
        asked.append(host)
        return socket.getaddrinfo("127.0.0.1", port_, socket.AF_INET, kind)

    clock = SystemClock()
    return BoundTransport(
        "broker.example",
        port,
        deadline=clock.monotonic() + 5.0,
        clock=clock,
        ssl_context=None,
        server_hostname=None,
        on_bytes=lambda data: None,
        on_bad_frame=lambda command: None,
        resolver=resolve,
    )


def test_a_plain_connection_is_a_blocking_socket_for_the_loop(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    asked: list[str] = []
    t = transport(port, asked)
    t.attempt_connection()
    try:
        assert asked == ["broker.example"]
        assert t.socket.getpeername() == ("127.0.0.1", port)
        assert t.socket.getblocking()
        assert t.current_host_and_port == ("broker.example", port)
        assert t.stage == "TCP connect"
        t.stage = "CONNECT"  # the session names the step after the dial
        assert t.stage == "CONNECT"
    finally:
        t.socket.close()


def test_interrupt_reaches_the_dial(listener: socket.socket) -> None:
    asked: list[str] = []
    t = transport(listener.getsockname()[1], asked)
    t.interrupt()
    with pytest.raises(ConnectionAbortedError):
        t.attempt_connection()
    assert asked == []
    assert t.socket is None


class _Receipts:
    """A listener that records the receipts it is told of."""

    def __init__(self) -> None:
        self.receipts: list[str] = []
        self.disconnected = 0

    def on_receipt(self, frame: Frame) -> None:
        self.receipts.append(frame.headers["receipt-id"])

    def on_disconnected(self) -> None:
        self.disconnected += 1


def test_a_receipt_reaches_the_listener_once_directly_or_through_stomp_py(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = transport(9, [])
    heard = _Receipts()
    t.set_listener("test", heard)
    walks: list[str] = []
    notify = BoundTransport.notify

    def counted(self: BoundTransport, frame_type: str, frame: Frame | None = None) -> None:
        walks.append(frame_type)
        notify(self, frame_type, frame)

    monkeypatch.setattr(BoundTransport, "notify", counted)
    t.process_frames([b"RECEIPT\nreceipt-id:r-1\n\n\x00"])
    assert heard.receipts == ["r-1"]
    assert walks == []  # told directly, not through stomp.py's sorted walk
    # A receipt stomp.py registered (its DISCONNECT bookkeeping) takes stomp.py's own path,
    # which also marks the transport disconnected.
    t.set_connected(True)
    t.set_receipt("bye", "DISCONNECT")
    t.process_frames([b"RECEIPT\nreceipt-id:bye\n\n\x00"])
    assert heard.receipts == ["r-1", "bye"]
    assert walks == ["receipt"]
    assert not t.is_connected()
    assert "bye" not in t._BaseTransport__receipts


def test_a_receipt_takes_stomp_py_s_path_when_its_debug_log_is_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = transport(9, [])
    heard = _Receipts()
    t.set_listener("test", heard)
    with caplog.at_level(logging.DEBUG, logger="stomp.py"):
        t.process_frames([b"RECEIPT\nreceipt-id:r-2\n\n\x00"])
    assert heard.receipts == ["r-2"]
    assert any("received frame" in record.getMessage() for record in caplog.records)


_TCP_ESTABLISHED = 1
_TCP_CLOSE = 7


def _tcp_state(sock: socket.socket) -> int:
    """The kernel's TCP state of ``sock`` (``tcpi_state``, the first byte of TCP_INFO)."""
    info: bytes = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
    return info[0]


def _stalled_pair(listener: socket.socket) -> tuple[BoundTransport, socket.socket]:
    """A connected transport whose peer never reads, with the peer's window filled: what a
    broker that stopped reading (its reader waiting for its own blocked write) leaves."""
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    t = transport(listener.getsockname()[1], [])
    t.attempt_connection()
    peer, _ = listener.accept()
    t.socket.setblocking(False)
    chunk = b"ACK\nid:1\n\n\x00" * 4096
    with contextlib.suppress(BlockingIOError):
        while t.socket.send(chunk):
            pass  # until the peer's window and our send buffer are full
    t.socket.setblocking(True)
    return t, peer


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO (Linux) shows the state")
def test_a_reset_abort_ends_the_connection_of_a_peer_that_stopped_reading(
    listener: socket.socket,
) -> None:
    t, peer = _stalled_pair(listener)
    try:
        t.abort(reset=True)
        t.cleanup()  # what the I/O thread does once the loop ends: close the socket
        # The peer's side is gone at once, unread bytes and all: a broker frees the
        # connection's client id instead of refusing the reconnect as "already connected".
        assert _tcp_state(peer) == _TCP_CLOSE
        assert peer.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNRESET
    finally:
        peer.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO (Linux) shows the state")
def test_a_plain_abort_leaves_a_peer_that_stopped_reading_connected(
    listener: socket.socket,
) -> None:
    # Why a lost session resets: the FIN of a plain close waits behind the bytes the peer
    # has not taken, so a peer that does not read never learns that the connection ended.
    t, peer = _stalled_pair(listener)
    try:
        t.abort()
        t.cleanup()
        assert _tcp_state(peer) == _TCP_ESTABLISHED
    finally:
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()  # resets our orphaned end too, so it does not linger after the test
