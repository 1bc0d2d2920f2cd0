"""``close()`` during a connect: it returns at once instead of waiting for ``connectTimeout``.

With ``connectTimeout=30000`` a close used to wait up to 30 s when the reconnect loop was inside
a connect that could not finish. Each case below puts the loop (or the STOMP adapter alone)
into one such connect, checks from the kernel's socket table that it really is there, closes,
and checks that the close was prompt, that the error is the right one, and that no thread and
no descriptor is left:

* a SIGSTOPped ActiveMQ: the TCP connect succeeds (the kernel's backlog) but CONNECTED never
  comes; over ``stomp+ssl://`` the TLS handshake never finishes;
* a blackholed address, where SYNs are dropped: a local listener with a full accept queue
  (Linux drops SYNs to it), and TEST-NET-1 where the network drops them (skipped where it
  does not);
* the adapter on its own (``StompConnector.connect`` with a ``Cancel`` token) against a silent
  listener, in the STOMP handshake, the TLS handshake and the TCP connect.

"Prompt" is not a measured bound (a loaded machine would make one flaky): the connect timeout
is four times the deadline of every wait here, so a close that waited for the connect misses
that deadline, and one that did not never comes near it. The measured time is printed (run
with ``-s``).
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from failover_client import BrokerAddress, ConnectionClosed, FailoverConnection, FailoverOptions
from failover_client._errors import ConnectCancelled
from failover_client.adapter import Cancel
from failover_client.stomp import StompConnector
from failover_client.testing.brokers import Cluster, TlsOptions, fresh_ca_and_broker_tls
from integration.test_failover_common import (
    FAST,
    SAFETY,
    LeakCheck,
    failover_uri,
    library_threads,
)

pytestmark = pytest.mark.integration

CONNECT_TIMEOUT = 4 * SAFETY
"""Seconds a connect may take here: far beyond the deadline of a wait for close() or a cancel
(SAFETY), so one that waited for the connect fails, and one that did not passes however slow
the machine."""

SLOW = {**FAST, "connectTimeout": int(CONNECT_TIMEOUT * 1000)}

TEST_NET_1 = ("192.0.2.1", 61613)

_ESTABLISHED = "01"
_SYN_SENT = "02"


# --- where our sockets are ---------------------------------------------------------------------


def _our_socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _our_tcp_states(remote_port: int) -> list[str]:
    """TCP states (kernel hex codes) of this process's sockets connected to ``remote_port``."""
    ours = _our_socket_inodes()
    states = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if int(remote.rsplit(":", 1)[1], 16) == remote_port and inode in ours:
                states.append(state)
    return states


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (the kernel's socket table offers nothing to wait on)."""
    deadline = time.monotonic() + SAFETY
    while not condition():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.01)


def _in_state(port: int, state: str) -> Callable[[], bool]:
    return lambda: state in _our_tcp_states(port)


def _stomp_io_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("stomp-io")]


# --- running a blocking call beside the test ------------------------------------------------------


class _Call:
    """``call()`` on a helper thread, with its outcome."""

    def __init__(self, call: Callable[[], object], name: str) -> None:
        self.value: object = None
        self.error: BaseException | None = None
        self.ended_at = 0.0
        self._call = call
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = self._call()
        except BaseException as exc:  # handed to the test, whatever it is
            self.error = exc
        finally:
            self.ended_at = time.monotonic()

    def join(self) -> None:
        self.thread.join(SAFETY)
        assert not self.thread.is_alive(), "the call never returned"


def _close_promptly(conn: FailoverConnection, what: str) -> float:
    started = time.monotonic()
    closing = _Call(conn.close, "test-close")
    closing.join()  # within SAFETY: a close that waited for the connect would not be
    assert closing.error is None, repr(closing.error)
    elapsed = closing.ended_at - started
    print(f"\nclose() while {what}: {elapsed * 1000:.1f} ms (connectTimeout {CONNECT_TIMEOUT} s)")
    # close() itself joined everything it started, the adapter's threads included.
    assert [t.name for t in library_threads()] == []
    return elapsed


def _close_while_dialing(
    uri: str, port: int, state: str, what: str, *, in_handshake: bool
) -> FailoverConnection:
    """Start connect(), wait until its socket to ``port`` is in ``state``, close, check.

    ``in_handshake``: also wait for the STOMP session's I/O thread, which starts only once
    TCP (and TLS) are up; otherwise check that there is none (the peer cannot get that far).
    """
    leaks = LeakCheck()
    conn = FailoverConnection(uri)
    connecting = _Call(conn.connect, "test-connect")
    try:
        _wait_until(_in_state(port, state), f"{what}: a socket to port {port} in state {state}")
        if in_handshake:
            _wait_until(lambda: bool(_stomp_io_threads()), f"{what}: the session's I/O thread")
        else:
            assert _stomp_io_threads() == []
    finally:
        _close_promptly(conn, what)
    connecting.join()
    assert isinstance(connecting.error, ConnectionClosed), repr(connecting.error)
    leaks.assert_clean(allow_gc=False)
    return conn


# --- a hung broker -------------------------------------------------------------------------------


def test_close_while_a_sigstopped_broker_never_answers_connect(activemq_cluster: Cluster) -> None:
    broker = activemq_cluster[0]
    port = broker.endpoint("stomp").port
    broker.hang()
    conn = _close_while_dialing(
        failover_uri(activemq_cluster, SLOW, order=[0]),
        port,
        _ESTABLISHED,
        "waiting for CONNECTED from a SIGSTOPped broker",
        in_handshake=True,
    )
    # Cancelled, not failed: the broker's record is untouched.
    state = conn.pool.state(f"127.0.0.1:{port}")
    assert (state.failures, state.last_error) == (0, None)


@pytest.fixture(scope="module")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> tuple[TlsOptions, Path]:
    return fresh_ca_and_broker_tls(tmp_path_factory.mktemp("close-tls"))


def test_close_while_a_sigstopped_broker_never_finishes_the_tls_handshake(
    broker_cluster: Callable[..., Cluster], tls_material: tuple[TlsOptions, Path]
) -> None:
    cluster = broker_cluster("activemq", 2, tls=tls_material[0], label="activemq-tls")
    broker = cluster[0]
    port = broker.endpoint("stomp+ssl").port
    broker.hang()
    options = {**SLOW, "tls.caFile": str(tls_material[1])}
    _close_while_dialing(
        failover_uri(cluster, options, order=[0], endpoint="stomp+ssl"),
        port,
        _ESTABLISHED,
        "in the TLS handshake with a SIGSTOPped broker",
        in_handshake=False,
    )


# --- a blackholed address ------------------------------------------------------------------------


@contextmanager
def _full_backlog() -> Iterator[int]:
    """A local port whose SYNs are dropped: Linux drops them while the accept queue is full."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)  # room for one connection not yet accepted
        port: int = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=SAFETY):
            yield port


def failover_uri_for(member: str) -> str:
    """A one-member failover URI with the ``SLOW`` options."""
    query = "&".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in SLOW.items())
    return f"failover:({member})?{query}"


def test_close_while_the_tcp_connect_gets_no_answer() -> None:
    with _full_backlog() as port:
        _close_while_dialing(
            failover_uri_for(f"stomp://127.0.0.1:{port}"),
            port,
            _SYN_SENT,
            "in a TCP connect whose SYNs are dropped",
            in_handshake=False,
        )


def test_close_while_connecting_to_a_blackholed_test_net_address() -> None:
    host, port = TEST_NET_1
    started = time.monotonic()
    try:
        with socket.create_connection(TEST_NET_1, timeout=1.0):
            answer = "accepted the connection (a proxy intercepts it)"
    except TimeoutError:
        answer = ""
    except OSError as exc:
        answer = f"answered with {exc.strerror or exc!r}"
    if answer:
        took = (time.monotonic() - started) * 1000
        pytest.skip(
            f"{host}:{port} {answer} in {took:.0f} ms: this network does not drop SYNs to "
            "TEST-NET-1 (the full-backlog case covers a dropped SYN instead)"
        )
    _close_while_dialing(
        failover_uri_for(f"stomp://{host}:{port}"),
        port,
        _SYN_SENT,
        "connecting to a blackholed TEST-NET-1 address",
        in_handshake=False,
    )


# --- the adapter on its own ----------------------------------------------------------------------


class _Listener:
    def on_message(self, session: object, message: object) -> None:
        """Unused: the session never opens."""

    def on_lost(self, session: object, cause: BaseException) -> None:
        """Unused: a connect that raises reports no loss."""


@contextmanager
def _silent_peer(host: str) -> Iterator[tuple[int, Callable[[], bytes]]]:
    """A peer on ``host`` that accepts and reads but never answers.

    Yields its port and a function that accepts the client and returns its first bytes
    (waiting for them), which shows the client is past the TCP connect.
    """
    accepted: list[socket.socket] = []
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as server:
        try:
            server.bind((host, 0))
        except OSError as exc:
            pytest.skip(f"cannot listen on {host} here: {exc}")
        server.listen(8)
        server.settimeout(SAFETY)

        def first_bytes() -> bytes:
            peer, _ = server.accept()
            accepted.append(peer)
            peer.settimeout(SAFETY)
            return peer.recv(64, socket.MSG_PEEK)

        try:
            yield server.getsockname()[1], first_bytes
        finally:
            for peer in accepted:
                peer.close()


@pytest.mark.parametrize(
    ("scheme", "host", "first", "stage"),
    [
        ("stomp", "127.0.0.1", b"CONNECT\n", "the STOMP handshake"),
        ("stomp", "::1", b"CONNECT\n", "the STOMP handshake"),
        # A TLS handshake record (the ClientHello) is what the peer reads first.
        ("stomp+ssl", "127.0.0.1", b"\x16\x03", "TLS handshake"),
    ],
    ids=["stomp-handshake", "stomp-handshake-ipv6", "tls-handshake"],
)
def test_a_cancelled_adapter_handshake_raises_connect_cancelled_at_once(
    scheme: str, host: str, first: bytes, stage: str
) -> None:
    leaks = LeakCheck()
    with _silent_peer(host) as (port, first_bytes):
        address = BrokerAddress(scheme, host, port)
        connecting, token = _adapter_connect(address)
        assert first_bytes().startswith(first)  # the client now waits for the answer
        elapsed = _cancel(connecting, token)
    _check_cancelled(connecting, address, stage, elapsed, leaks)


def test_a_cancelled_adapter_tcp_connect_raises_connect_cancelled_at_once() -> None:
    leaks = LeakCheck()
    with _full_backlog() as port:
        address = BrokerAddress("stomp", "127.0.0.1", port)
        connecting, token = _adapter_connect(address)
        _wait_until(_in_state(port, _SYN_SENT), f"a SYN to port {port} with no answer")
        elapsed = _cancel(connecting, token)
    _check_cancelled(connecting, address, "TCP connect", elapsed, leaks)


def _adapter_connect(address: BrokerAddress) -> tuple[_Call, Cancel]:
    context = ssl.create_default_context()  # never gets as far as checking a certificate
    connector = StompConnector(FailoverOptions(), ssl_context=context)
    token = Cancel()
    connecting = _Call(
        lambda: connector.connect(
            address, timeout=CONNECT_TIMEOUT, listener=_Listener(), cancel=token
        ),
        "test-connect",
    )
    return connecting, token


def _cancel(connecting: _Call, token: Cancel) -> float:
    cancelled_at = time.monotonic()
    token.cancel()
    connecting.join()  # within SAFETY: a connect that ignored the cancel would not be
    return connecting.ended_at - cancelled_at


def _check_cancelled(
    connecting: _Call, address: BrokerAddress, stage: str, elapsed: float, leaks: LeakCheck
) -> None:
    print(f"\nconnect() cancelled during {stage}: ended {elapsed * 1000:.1f} ms later")
    assert isinstance(connecting.error, ConnectCancelled), repr(connecting.error)
    assert str(connecting.error) == f"{address}: connect cancelled during {stage}"
    assert [t.name for t in library_threads()] == []
    leaks.assert_clean(allow_gc=False)
