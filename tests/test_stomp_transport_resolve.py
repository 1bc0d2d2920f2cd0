"""Name resolution in BoundTransport: within the deadline, cancellable, literal addresses inline.

A real listening socket on loopback stands for the broker (only the TCP connect is exercised);
the resolver is injected, so a slow or failing DNS is played without touching the network.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from failover_client._clock import SystemClock
from failover_client.stomp._transport import BoundTransport, GetAddrInfo

AddrInfos = Sequence[tuple[int, int, int, str, Any]]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def transport(host: str, port: int, resolve: GetAddrInfo, within: float = 5.0) -> BoundTransport:
    clock = SystemClock()
    return BoundTransport(
        host,
        port,
        deadline=clock.monotonic() + within,
        clock=clock,
        ssl_context=None,
        server_hostname=None,
        on_bytes=lambda data: None,
        on_bad_frame=lambda command: None,
        getaddrinfo=resolve,
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
    t = transport("broker.example", port, dns)
    t.attempt_connection()
    try:
        assert t.socket.getpeername() == ("127.0.0.1", port)
        assert dns.threads == ["failover-client-resolve"]
        assert t.stage == "TCP connect"
    finally:
        t.socket.close()


def test_a_literal_address_is_resolved_on_the_calling_thread(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    dns = SlowDns(port, blocked=False)
    t = transport("127.0.0.1", port, dns)
    t.attempt_connection()
    t.socket.close()
    assert dns.threads == [threading.current_thread().name]


def test_interrupt_ends_a_hung_resolution_at_once(listener: socket.socket) -> None:
    dns = SlowDns(listener.getsockname()[1])
    t = transport("broker.example", 61613, dns, within=60.0)
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            t.attempt_connection()
        except BaseException as exc:
            failure.append(exc)

    connecting = threading.Thread(target=connect)
    connecting.start()
    assert dns.asked.wait(10)
    t.interrupt()
    connecting.join(10)
    # Ended while the resolver still hangs: it was not waited for.
    assert not connecting.is_alive()
    assert not dns.release.is_set()
    assert [type(exc) for exc in failure] == [ConnectionAbortedError]
    assert t.stage == "name resolution"
    dns.release.set()


def test_the_deadline_bounds_the_resolution(listener: socket.socket) -> None:
    dns = SlowDns(listener.getsockname()[1])
    t = transport("broker.example", 61613, dns, within=0.05)
    with pytest.raises(TimeoutError, match="deadline"):
        t.attempt_connection()
    assert not dns.release.is_set()  # the answer never came; the connect did not wait for it
    assert t.stage == "name resolution"
    dns.release.set()


def test_a_resolver_error_is_raised_on_the_connecting_thread() -> None:
    def fails(host: str, port: int, family: int, kind: int) -> AddrInfos:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    t = transport("no-such-host.example", 61613, fails)
    with pytest.raises(socket.gaierror, match="not known"):
        t.attempt_connection()


def test_the_resolver_wake_up_does_not_end_the_tcp_connect_early() -> None:
    # Left in the socket pair, the resolver's wake-up byte would end the connect's own wait at
    # once, and a connect still under way would pass for a connected socket. Linux drops SYNs
    # while a listener's accept queue is full, so this connect can only time out.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)  # room for one connection not yet accepted
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5.0):
            t = transport("broker.example", port, SlowDns(port, blocked=False), within=0.3)
            with pytest.raises(TimeoutError, match="deadline"):
                t.attempt_connection()
            assert t.stage == "TCP connect"
