"""BoundTransport dials through SocketDial and hands stomp.py's I/O loop a ready socket.

A real listening socket on loopback stands for the broker; the resolver is injected.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence

import pytest

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
