"""The STOMP adapter against misbehaving servers: junk, truncated frames, silence, bad frames.

Each test runs a tiny scripted server on a loopback port that answers the client's CONNECT
in one particular wrong way.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from failover_client import BrokerAddress, BrokerUnavailable, ProtocolViolation
from failover_client.adapter import Cancel, Received
from failover_client.stomp import StompConnector

pytestmark = pytest.mark.integration

SAFETY = 10.0

CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00"


class Recorder:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.lost: list[BaseException] = []

    def on_message(self, session: Any, message: Received) -> None:
        raise AssertionError("no message expected")

    def on_lost(self, session: Any, cause: BaseException) -> None:
        with self.cond:
            self.lost.append(cause)
            self.cond.notify_all()

    def wait_lost(self) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: bool(self.lost), SAFETY)


def _read_connect(conn: socket.socket) -> bytes:
    data = b""
    while b"\x00" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


GO = threading.Event()
"""Set by a test once connect() returned; a script that acts after the handshake waits on it."""


@contextlib.contextmanager
def scripted_server(answer: Callable[[socket.socket], None]) -> Iterator[BrokerAddress]:
    """A one-connection server on loopback that runs ``answer`` after reading CONNECT."""
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    GO.clear()

    def serve() -> None:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            _read_connect(conn)
            answer(conn)
            done.wait(SAFETY)

    thread = threading.Thread(target=serve, name="scripted-server", daemon=True)
    thread.start()
    try:
        yield BrokerAddress("stomp", "127.0.0.1", server.getsockname()[1])
    finally:
        done.set()
        server.close()
        thread.join(SAFETY)


def _adapter_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("stomp-")]


def test_junk_answer_is_a_protocol_violation() -> None:
    junk = b"HTTP/1.1 400 Bad Request\r\n\r\n"
    with (
        scripted_server(lambda c: c.sendall(junk)) as address,
        pytest.raises(ProtocolViolation, match="not a STOMP frame") as info,
    ):
        StompConnector(passcode="pw-1").connect(
            address, timeout=5.0, listener=Recorder(), cancel=Cancel()
        )
    print(f"\n{info.value}")
    assert str(address) in str(info.value)
    assert _adapter_threads() == []


def test_echo_server_does_not_reveal_the_passcode() -> None:
    def echo(conn: socket.socket) -> None:
        conn.sendall(b"CONNECT\nlogin:app\npasscode:pw-secret\n\n\x00")

    with scripted_server(echo) as address, pytest.raises(ProtocolViolation) as info:
        StompConnector(login="app", passcode="pw-secret").connect(
            address, timeout=5.0, listener=Recorder(), cancel=Cancel()
        )
    assert "pw-secret" not in str(info.value)


def test_close_in_the_middle_of_connected_is_broker_unavailable() -> None:
    def truncated(conn: socket.socket) -> None:
        conn.sendall(b"CONNECTED\nversion:1.2\n")
        conn.close()

    with (
        scripted_server(truncated) as address,
        pytest.raises(BrokerUnavailable, match="closed by the broker during the handshake"),
    ):
        StompConnector().connect(address, timeout=5.0, listener=Recorder(), cancel=Cancel())
    assert _adapter_threads() == []


def test_silent_server_times_out_within_the_deadline() -> None:
    with scripted_server(lambda c: None) as address:
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable, match=r"no CONNECTED frame within 0\.5 s"):
            StompConnector().connect(address, timeout=0.5, listener=Recorder(), cancel=Cancel())
        print(f"\nsilent server: gave up after {time.monotonic() - started:.3f} s")
    assert _adapter_threads() == []


def test_undefined_frame_after_the_handshake_ends_the_session() -> None:
    def bad_frame(conn: socket.socket) -> None:
        conn.sendall(CONNECTED)
        GO.wait(SAFETY)
        conn.sendall(b"BOGUS\nx:y\n\n\x00")

    listener = Recorder()
    with scripted_server(bad_frame) as address:
        session = StompConnector().connect(address, timeout=5.0, listener=listener, cancel=Cancel())
        GO.set()
        assert listener.wait_lost()
        session.close()
    (cause,) = listener.lost
    assert isinstance(cause, ProtocolViolation)
    assert "'BOGUS'" in str(cause)
    assert _adapter_threads() == []


def test_server_closing_after_connected_is_reported_once() -> None:
    def close_soon(conn: socket.socket) -> None:
        conn.sendall(CONNECTED)
        GO.wait(SAFETY)
        conn.shutdown(socket.SHUT_RDWR)

    listener = Recorder()
    with scripted_server(close_soon) as address:
        session = StompConnector().connect(address, timeout=5.0, listener=listener, cancel=Cancel())
        GO.set()
        assert listener.wait_lost()
        session.close()
    assert [type(c) for c in listener.lost] == [BrokerUnavailable]
    assert _adapter_threads() == []
