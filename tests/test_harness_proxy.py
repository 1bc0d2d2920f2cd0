"""FaultProxy against a tiny echo server on loopback.

These are the harness's own tests: the proxy is a network tool, so unlike the rest of
``tests/`` they open loopback sockets. Every wait is a socket timeout or a join with a
deadline; timing bounds are generous.
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from failover_client.testing.brokers import (
    TO_BROKER,
    TO_CLIENT,
    Endpoint,
    FaultProxy,
    proxied_failover_uri,
)

SILENCE = 0.4  # how long "nothing arrives" is watched for


class EchoServer:
    """Echoes every byte back; one thread per connection; ``close()`` joins them all."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()
            thread = threading.Thread(target=self._echo, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)
        conn.close()

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._acceptor.join(5)
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    p = FaultProxy(("127.0.0.1", echo.port), rng=random.Random(7))
    yield p
    p.close()


def dial(proxy: FaultProxy, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection((proxy.host, proxy.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def open_fds() -> set[str]:
    """Open descriptors, less the one the listing itself used (it is gone afterwards)."""
    return {fd for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}


def assert_silent(sock: socket.socket) -> None:
    """Nothing arrives, and the connection is not closed either (no EOF, no reset)."""
    sock.settimeout(SILENCE)
    with pytest.raises(TimeoutError):
        sock.recv(100)
    sock.settimeout(5.0)


def test_forwards_both_ways(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        payload = os.urandom(300_000)
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        assert recv_exactly(sock, len(payload)) == payload
        sender.join(5)
        assert proxy.connections == 1


def test_partition_drops_silently_and_heal_resumes(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        sock.sendall(b"before")
        assert recv_exactly(sock, 6) == b"before"
        proxy.partition()
        sock.sendall(b"lost")
        assert_silent(sock)
        proxy.heal()
        sock.sendall(b"after")
        assert recv_exactly(sock, 5) == b"after"


def test_one_way_to_client_drops_only_the_answers(proxy: FaultProxy, echo: EchoServer) -> None:
    with dial(proxy) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.one_way(TO_CLIENT)
        sock.sendall(b"hello")  # reaches the server, whose echo is dropped
        assert_silent(sock)
        proxy.heal()
        sock.sendall(b"again")
        assert recv_exactly(sock, 5) == b"again"


def test_one_way_to_broker_drops_only_the_requests(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        proxy.one_way(TO_BROKER)
        sock.sendall(b"hello")
        assert_silent(sock)
        proxy.heal()
        sock.sendall(b"again")
        assert recv_exactly(sock, 5) == b"again"  # "hello" never reached the server


def test_one_way_rejects_an_unknown_direction(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="direction"):
        proxy.one_way("sideways")  # type: ignore[arg-type]


def test_reset_gives_connection_reset(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.reset()
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
    assert proxy.connections == 0
    with dial(proxy) as sock:  # new connections are not affected
        sock.sendall(b"y")
        assert recv_exactly(sock, 1) == b"y"


def test_reset_after_cuts_mid_stream(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        sock.sendall(b"x")
        assert recv_exactly(sock, 1) == b"x"
        proxy.reset_after(10)
        sock.sendall(b"0123456789abcdefghij")
        assert recv_exactly(sock, 10) == b"0123456789"
        with pytest.raises(ConnectionResetError):
            sock.recv(100)


def test_blackhole_after_handshake_drops_the_first_answer(proxy: FaultProxy) -> None:
    proxy.blackhole_after_handshake()
    with dial(proxy) as sock:
        sock.sendall(b"CONNECT")
        assert_silent(sock)


def test_blackhole_can_deliver_the_first_answer(proxy: FaultProxy) -> None:
    proxy.blackhole_after_handshake(deliver_reply=True)
    with dial(proxy) as sock:
        sock.sendall(b"CONNECT")
        assert recv_exactly(sock, 7) == b"CONNECT"
        sock.sendall(b"SEND")
        assert_silent(sock)


def test_latency_delays_each_direction(proxy: FaultProxy) -> None:
    with dial(proxy) as sock:
        proxy.latency(0.1)
        started = time.monotonic()
        sock.sendall(b"ping")
        assert recv_exactly(sock, 4) == b"ping"
        elapsed = time.monotonic() - started
        assert 0.18 <= elapsed < 2.0  # 100 ms each way
        # Only lower bounds are asserted: how fast an undelayed echo comes back depends on
        # the machine's load, not on the proxy.
        proxy.latency(0)
        sock.sendall(b"pong")
        assert recv_exactly(sock, 4) == b"pong"


class LateProxy(FaultProxy):
    """A proxy whose thread loses the CPU after each pass over its queues: by the time it
    works out how long to wait, every chunk queued is due (their times move up to now)."""

    def _next_timeout(self) -> float | None:
        now = time.monotonic()
        for conn in self._conns:
            for pipe in (conn.up, conn.down):
                pipe.queue = collections.deque((min(at, now), data) for at, data in pipe.queue)
        return super()._next_timeout()


def test_a_chunk_that_falls_due_after_the_pass_is_still_written(echo: EchoServer) -> None:
    # The loop used to wait without a timeout then, holding the chunk (and the FIN behind
    # it) until some other event: a client's last ACKs and DISCONNECT, queued 1 ms apart,
    # never reached the broker on a loaded machine.
    with LateProxy(("127.0.0.1", echo.port)) as proxy, dial(proxy) as sock:
        proxy.latency(3600.0)  # due only because the loop's time moves on
        sock.sendall(b"ping")
        assert recv_exactly(sock, 4) == b"ping"


def test_loss_delays_by_the_retransmission_timeout_in_order(echo: EchoServer) -> None:
    with FaultProxy(("127.0.0.1", echo.port), rng=random.Random(1), rto=0.1) as proxy:
        proxy.loss(1.0)
        with dial(proxy) as sock:
            started = time.monotonic()
            sock.sendall(b"abc")
            assert recv_exactly(sock, 3) == b"abc"
            assert 0.18 <= time.monotonic() - started < 2.0
        with pytest.raises(ValueError, match="loss"):
            proxy.loss(1.5)


def test_connection_to_a_dead_target_is_reset() -> None:
    port_holder = socket.create_server(("127.0.0.1", 0))
    port = port_holder.getsockname()[1]
    port_holder.close()
    with FaultProxy(Endpoint("stomp", "127.0.0.1", port)) as proxy:
        assert proxy.uri() == f"stomp://127.0.0.1:{proxy.port}"
        # The proxy accepts, fails to reach the target and resets: on loopback the RST can
        # beat connect() back to the caller, so the reset may surface there or on recv.
        with pytest.raises(ConnectionResetError), dial(proxy) as sock:
            sock.recv(100)


def test_client_close_propagates_fin(proxy: FaultProxy, echo: EchoServer) -> None:
    sock = dial(proxy)
    sock.sendall(b"x")
    assert recv_exactly(sock, 1) == b"x"
    sock.shutdown(socket.SHUT_WR)
    assert sock.recv(10) == b""  # the server saw EOF, closed, and that came back
    sock.close()


def test_close_leaves_no_thread_and_no_socket(echo: EchoServer) -> None:
    fds_before = open_fds()
    threads_before = set(threading.enumerate())
    proxy = FaultProxy(("127.0.0.1", echo.port))
    socks = [dial(proxy) for _ in range(3)]
    for sock in socks:
        sock.sendall(b"z")
        assert recv_exactly(sock, 1) == b"z"
    proxy.latency(0.5)
    socks[0].sendall(b"pending")  # still queued in the proxy when it closes
    proxy.close()
    proxy.close()  # idempotent
    for sock in socks:
        sock.close()
    for thread in echo.threads:  # the server's side ends with the proxy's reset
        thread.join(5)
    assert set(threading.enumerate()) - threads_before - set(echo.threads) == set()
    assert open_fds() - fds_before == set()
    with pytest.raises(RuntimeError, match="closed"):
        proxy.partition()


def test_proxied_failover_uri_mixes_proxies_and_endpoints(proxy: FaultProxy) -> None:
    direct = Endpoint("stomp", "127.0.0.1", 61613)
    uri = proxied_failover_uri([proxy, direct], {"randomize": False})
    assert uri == f"failover:({proxy.uri()},stomp://127.0.0.1:61613)?randomize=false"
    assert "connections=0" in repr(proxy)


def test_drop_deliveries_drops_only_stomp_message_frames_until_heal(proxy: FaultProxy) -> None:
    # The echo server plays a STOMP broker: what the client writes comes back as its frames.
    message = b"MESSAGE\nsubscription:s\nmessage-id:1\n\nbody\x00"
    receipt = b"RECEIPT\nreceipt-id:1\n\n\x00"
    connected = b"CONNECTED\nversion:1.2\n\n\x00"
    with dial(proxy) as sock:
        sock.sendall(connected + message)
        assert recv_exactly(sock, len(connected + message)) == connected + message
        proxy.drop_deliveries()
        sock.sendall(message + b"\n" + receipt)  # a delivery, a heart-beat, a receipt
        assert recv_exactly(sock, 1 + len(receipt)) == b"\n" + receipt
        assert proxy.deliveries_dropped == 1
        proxy.heal()
        sock.sendall(message)
        assert recv_exactly(sock, len(message)) == message


def test_drop_deliveries_needs_a_readable_stream(echo: EchoServer) -> None:
    with (
        FaultProxy(Endpoint("stomp+ssl", "127.0.0.1", echo.port)) as tls,
        pytest.raises(ValueError, match="plain stomp or amqp"),
    ):
        tls.drop_deliveries()
