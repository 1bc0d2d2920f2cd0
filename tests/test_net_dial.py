"""SocketDial's name resolution: within the deadline, cancellable, literal addresses inline.

A real listening socket on loopback stands for the broker (only the TCP connect is exercised);
the resolver is injected, so a slow or failing DNS is played without touching the network.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Iterator, Sequence

import pytest

from failover_client._clock import SystemClock
from failover_client.net._dial import AddrInfo, Resolver, SocketDial

AddrInfos = Sequence[AddrInfo]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def dial(host: str, port: int, resolve: Resolver, within: float = 5.0) -> SocketDial:
    clock = SystemClock()
    return SocketDial(
        host, port, deadline=clock.monotonic() + within, clock=clock, resolver=resolve
    )


class SlowDns:
    """Answers with loopback once ``release`` is set; records the threads that asked."""

    def __init__(self, port: int, *, blocked: bool = True) -> None:
        self.port = port
        self.release = threading.Event()
        if not blocked:
            self.release.set()
        self.asked = threading.Event()
        self.threads: list[str] = []

    def __call__(self, host: str, port: int, family: int, kind: int) -> AddrInfos:
        self.threads.append(threading.current_thread().name)
        self.asked.set()
        self.release.wait(30)
        return socket.getaddrinfo("127.0.0.1", self.port, socket.AF_INET, kind)


def test_a_name_is_resolved_off_thread_and_connects(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    dns = SlowDns(port, blocked=False)
    d = dial("broker.example", port, dns)
    sock = d.connect()
    try:
        assert sock.getpeername() == ("127.0.0.1", port)
        assert dns.threads == ["failover-client-resolve"]
        assert d.stage == "TCP connect"
    finally:
        sock.close()


def test_a_literal_address_is_resolved_on_the_calling_thread(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    dns = SlowDns(port, blocked=False)
    d = dial("127.0.0.1", port, dns)
    d.connect().close()
    assert dns.threads == [threading.current_thread().name]


def test_interrupt_ends_a_hung_resolution_at_once(listener: socket.socket) -> None:
    dns = SlowDns(listener.getsockname()[1])
    d = dial("broker.example", 61613, dns, within=60.0)
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            d.connect()
        except BaseException as exc:
            failure.append(exc)

    connecting = threading.Thread(target=connect)
    connecting.start()
    assert dns.asked.wait(10)
    d.interrupt()
    connecting.join(10)
    # Ended while the resolver still hangs: it was not waited for.
    assert not connecting.is_alive()
    assert not dns.release.is_set()
    assert [type(exc) for exc in failure] == [ConnectionAbortedError]
    assert d.stage == "name resolution"
    dns.release.set()


def test_the_deadline_bounds_the_resolution(listener: socket.socket) -> None:
    dns = SlowDns(listener.getsockname()[1])
    d = dial("broker.example", 61613, dns, within=0.05)
    with pytest.raises(TimeoutError, match="deadline"):
        d.connect()
    assert not dns.release.is_set()  # the answer never came; the connect did not wait for it
    assert d.stage == "name resolution"
    dns.release.set()


def test_a_resolver_error_is_raised_on_the_connecting_thread() -> None:
    def fails(host: str, port: int, family: int, kind: int) -> AddrInfos:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    d = dial("no-such-host.example", 61613, fails)
    with pytest.raises(socket.gaierror, match="not known"):
        d.connect()


def test_the_resolver_wake_up_does_not_end_the_tcp_connect_early() -> None:
    # Left in the socket pair, the resolver's wake-up byte would end the connect's own wait at
    # once, and a connect still under way would pass for a connected socket. Linux drops SYNs
    # while a listener's accept queue is full, so this connect can only time out.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)  # room for one connection not yet accepted
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5.0):
            d = dial("broker.example", port, SlowDns(port, blocked=False), within=0.3)
            with pytest.raises(TimeoutError, match="deadline"):
                d.connect()
            assert d.stage == "TCP connect"


# --- the connect itself: refused addresses, interrupts, the TLS handshake -----------------------


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_interrupt_before_the_connect_opens_nothing(listener: socket.socket) -> None:
    dns = SlowDns(listener.getsockname()[1], blocked=False)
    d = dial("broker.example", 61613, dns)
    d.interrupt()
    with pytest.raises(ConnectionAbortedError, match="cancelled"):
        d.connect()
    assert dns.threads == []


def test_a_refused_address_gives_way_to_the_next_one(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    closed = refused_port()

    def two_addresses(host: str, port_: int, family: int, kind: int) -> AddrInfos:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", closed)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
        ]

    sock = dial("127.0.0.1", port, two_addresses).connect()
    with sock:
        assert sock.getpeername() == ("127.0.0.1", port)


def test_when_every_address_refuses_the_first_error_is_raised() -> None:
    port = refused_port()
    d = dial("127.0.0.1", port, socket.getaddrinfo)
    with pytest.raises(ConnectionRefusedError):
        d.connect()
    assert d.stage == "TCP connect"


def _client_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def test_interrupt_ends_a_tls_handshake_with_a_silent_peer(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    clock = SystemClock()
    d = SocketDial(
        "127.0.0.1",
        port,
        deadline=clock.monotonic() + 60.0,
        clock=clock,
        tls_context=_client_context(),
        server_hostname="broker.example",
    )
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            d.connect()
        except BaseException as exc:
            failure.append(exc)

    connecting = threading.Thread(target=connect)
    connecting.start()
    peer, _ = listener.accept()
    with peer:
        peer.settimeout(10)
        assert peer.recv(1, socket.MSG_PEEK) == b"\x16"  # a TLS handshake record: ClientHello
        d.interrupt()
        connecting.join(10)
        assert not connecting.is_alive()
    assert [type(exc) for exc in failure] == [ConnectionAbortedError]
    assert d.stage == "TLS handshake"


def _open_sockets() -> int:
    """Sockets this process holds (Linux: the descriptors that link to ``socket:[...]``)."""
    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if _link(f"/proc/self/fd/{fd}").startswith("socket:"))


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # the descriptor listdir itself used is gone by now
        return ""


def test_the_deadline_bounds_the_tls_handshake_and_nothing_stays_open(
    listener: socket.socket,
) -> None:
    port = listener.getsockname()[1]
    clock = SystemClock()
    before = _open_sockets()
    d = SocketDial(
        "127.0.0.1",
        port,
        deadline=clock.monotonic() + 0.2,
        clock=clock,
        tls_context=_client_context(),
    )
    with pytest.raises(TimeoutError, match="deadline"):
        d.connect()  # the listener's backlog accepts the TCP connection; no one answers TLS
    assert d.stage == "TLS handshake"
    assert _open_sockets() == before  # neither the TLS socket nor the wake-up pair is left
