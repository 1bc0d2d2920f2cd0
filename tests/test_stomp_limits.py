"""Hostile and hung peers: bounded memory, ERROR ends the session, receipt floods, prompt close.

Each peer is a real loopback socket served by a thread of the test: it answers CONNECT, then
misbehaves in one way. Waits are on events with generous upper bounds, never sleeps.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from failover_client.uri import parse

from failover_client import (
    BrokerAddress,
    BrokerUnavailable,
    ConnectionFailure,
    FailoverOptions,
    OptionError,
    ProtocolViolation,
    SendRejected,
)
from failover_client._clock import SystemClock
from failover_client.adapter import Cancel, Received, SubscriptionSpec
from failover_client.stomp import StompConnector, StompSession, _receipts
from tests.test_stomp_adapter_session import (  # noqa: F401 - predictable_ids: autouse
    REAL_NONCE,
    predictable_ids,
)

WAIT = 10.0
"""Upper bound for waits on events that the code under test is bound to set."""

CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:hostile\n\n\x00"

Script = Callable[[socket.socket], None]


class Peer:
    """A one-connection STOMP peer on loopback: answers CONNECT, then runs ``script``."""

    def __init__(self, script: Script) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._script = script
        self.conn: socket.socket | None = None
        self.received = bytearray()
        self.done = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="hostile-peer", daemon=True)
        self._thread.start()

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress("stomp", "127.0.0.1", self.port)

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
            self.conn = conn
            while b"\x00" not in self.received:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                self.received += chunk
            conn.sendall(CONNECTED)
            self._script(conn)
        except OSError as exc:  # the client hung up on a hostile peer: expected
            self.error = exc
        finally:
            self.done.set()

    def await_frame(self, conn: socket.socket) -> None:
        """Wait for the client's next frame (the test's cue that the session is open)."""
        data = b""
        while b"\x00" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError("client hung up")
            data += chunk

    def read_until_eof(self, conn: socket.socket) -> None:
        """Read (and keep) everything until the client closes the connection."""
        conn.settimeout(WAIT)
        while chunk := conn.recv(65536):
            self.received += chunk

    def close(self) -> None:
        self._server.close()
        if self.conn is not None:
            self.conn.close()
        self._thread.join(WAIT)


class Lost:
    """A SessionListener that records the loss."""

    def __init__(self) -> None:
        self.causes: list[BaseException] = []
        self.event = threading.Event()
        self.messages: list[Received] = []

    def on_message(self, session: Any, message: Received) -> None:
        self.messages.append(message)

    def on_lost(self, session: Any, cause: BaseException) -> None:
        self.causes.append(cause)
        self.event.set()


@pytest.fixture
def peers() -> Iterator[Callable[[Script], Peer]]:
    made: list[Peer] = []

    def make(script: Script) -> Peer:
        peer = Peer(script)
        made.append(peer)
        return peer

    yield make
    for peer in made:
        peer.close()


def connect(peer: Peer, listener: Lost, *, cue: bool = True, **options: Any) -> StompSession:
    """Open a session to ``peer``; with ``cue``, SUBSCRIBE to tell the peer it is open."""
    connector = StompConnector(
        FailoverOptions(**options), heartbeat=(0, 0), clock=SystemClock(), close_timeout=2.0
    )
    session = connector.connect(peer.address, timeout=WAIT, listener=listener, cancel=Cancel())
    if cue:
        session.subscribe(SubscriptionSpec(id="s1", destination="/queue/a"), None)
    return session


# --- 1. one inbound frame is capped ------------------------------------------------------------


def test_max_frame_size_is_a_failover_client_option_with_activemqs_default() -> None:
    assert FailoverOptions().max_frame_size == 104_857_600
    uri = parse("failover:(stomp://a:61613)?maxFrameSize=2048")
    assert uri.options.max_frame_size == 2048
    with pytest.raises(OptionError, match="maxFrameSize"):
        parse("failover:(stomp://a:61613)?maxFrameSize=0")
    with pytest.raises(OptionError, match="max_frame_size"):
        FailoverOptions(max_frame_size=0)


def test_an_endless_frame_ends_the_session_and_its_buffer(
    peers: Callable[[Script], Peer],
) -> None:
    def endless(conn: socket.socket) -> None:
        peer.await_frame(conn)
        conn.sendall(b"MESSAGE\ndestination:/queue/a\nmessage-id:m1\nsubscription:s1\n\n")
        chunk = b"x" * 65536
        while True:  # never a NUL: until the client hangs up
            conn.sendall(chunk)

    peer = peers(endless)
    listener = Lost()
    session = connect(peer, listener, max_frame_size=1 << 20)
    transport = session._state.transport
    assert listener.event.wait(WAIT)
    (cause,) = listener.causes
    assert isinstance(cause, ProtocolViolation)
    assert str(cause).startswith(f"stomp://127.0.0.1:{peer.port}: ")
    assert "maxFrameSize=1048576" in str(cause)
    assert peer.done.wait(WAIT)  # the client hung up: the peer's writes failed
    session.close()
    assert transport is not None
    assert transport._BaseTransport__recvbuf == b""  # nothing of the open frame is kept
    assert listener.messages == []


def _message(message_id: str, size: int) -> bytes:
    """A MESSAGE frame whose header block and body are exactly ``size`` bytes (plus NUL)."""
    head = f"MESSAGE\ndestination:/queue/a\nmessage-id:{message_id}\nsubscription:s1\n\n".encode()
    return head + b"b" * (size - len(head)) + b"\x00"


def test_a_frame_of_exactly_the_limit_passes_and_one_byte_more_does_not(
    peers: Callable[[Script], Peer],
) -> None:
    limit = 4096

    def frames(conn: socket.socket) -> None:
        peer.await_frame(conn)
        # In one write: stomp.py reads both frames and more in one chunk.
        conn.sendall(_message("m1", limit) + b"\n" + _message("m2", limit))
        conn.sendall(_message("m3", limit + 1))
        peer.read_until_eof(conn)

    peer = peers(frames)
    listener = Lost()
    session = connect(peer, listener, max_frame_size=limit)
    assert listener.event.wait(WAIT)
    assert [m.message_id for m in listener.messages] == ["m1", "m2"]
    assert len(listener.messages[0].body) == limit - 60
    (cause,) = listener.causes
    assert isinstance(cause, ProtocolViolation)
    assert f"maxFrameSize={limit}" in str(cause)
    assert peer.done.wait(WAIT)  # the connection was closed: the peer saw its end
    session.close()


def test_many_small_frames_never_add_up_to_the_limit(peers: Callable[[Script], Peer]) -> None:
    def frames(conn: socket.socket) -> None:
        # 64 frames of 1 KiB in every write: far more than the limit per read, never per frame.
        peer.await_frame(conn)
        burst = b"".join(_message(f"m{n}", 1024) for n in range(64))
        for _ in range(8):
            conn.sendall(burst)
        peer.read_until_eof(conn)

    peer = peers(frames)
    listener = Lost()
    session = connect(peer, listener, max_frame_size=2048)
    got = threading.Event()
    original = listener.on_message

    def count(s: Any, m: Received) -> None:
        original(s, m)
        if len(listener.messages) == 512:
            got.set()

    listener.on_message = count  # type: ignore[method-assign]
    assert got.wait(WAIT)
    assert len(listener.messages) == 512
    assert listener.causes == []
    session.close()


# --- 2. an ERROR ends the session --------------------------------------------------------------


def test_an_error_about_no_frame_on_an_open_socket_ends_the_session(
    peers: Callable[[Script], Peer],
) -> None:
    def error_and_stay(conn: socket.socket) -> None:
        peer.await_frame(conn)
        conn.sendall(b"ERROR\nmessage:out of resources\n\nsorry\x00")
        peer.read_until_eof(conn)  # the socket stays open until the client closes it

    peer = peers(error_and_stay)
    listener = Lost()
    session = connect(peer, listener)
    outcomes: list[BaseException | None] = []
    assert listener.event.wait(WAIT)
    (cause,) = listener.causes
    assert isinstance(cause, ConnectionFailure)
    assert str(cause) == (
        f"stomp://127.0.0.1:{peer.port}: broker sent ERROR: out of resources: sorry"
    )
    assert peer.done.wait(WAIT)  # the client closed the socket
    assert not session.is_open
    with pytest.raises(BrokerUnavailable, match="session was lost"):
        session.send("/queue/a", b"x", {}, outcomes.append)
    assert outcomes == []
    session.close()


def test_an_error_naming_a_send_rejects_it_and_the_session_goes_on(
    peers: Callable[[Script], Peer],
) -> None:
    def reject_first(conn: socket.socket) -> None:
        data = b""
        while data.count(b"\x00") < 2:  # the two SEND frames
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        # ActiveMQ's way: the refused frame named, the connection kept, the next one confirmed.
        conn.sendall(b"ERROR\nreceipt-id:fc-1\nmessage:not allowed\n\n\x00")
        conn.sendall(b"RECEIPT\nreceipt-id:fc-2\n\n\x00")
        peer.read_until_eof(conn)

    peer = peers(reject_first)
    listener = Lost()
    session = connect(peer, listener, cue=False, confirm_mode="receipt")
    outcomes: dict[str, BaseException | None] = {}
    both = threading.Event()

    def confirm(name: str) -> Callable[[BaseException | None], None]:
        def done(outcome: BaseException | None) -> None:
            outcomes[name] = outcome
            if len(outcomes) == 2:
                both.set()

        return done

    session.send("/queue/a", b"1", {}, confirm("first"))
    session.send("/queue/a", b"2", {}, confirm("second"))
    assert both.wait(WAIT)
    assert isinstance(outcomes["first"], SendRejected)
    assert "not allowed" in str(outcomes["first"])
    assert outcomes["second"] is None
    assert listener.causes == []
    assert session.is_open
    session.close()
    assert peer.done.wait(WAIT)


# --- 3. a flood of RECEIPTs nobody asked for ---------------------------------------------------


def test_unknown_receipts_are_counted_and_logged_sparingly(
    peers: Callable[[Script], Peer], caplog: pytest.LogCaptureFixture
) -> None:
    flood = 20_000

    def flood_then_answer(conn: socket.socket) -> None:
        peer.await_frame(conn)  # the SEND
        junk = b"".join(b"RECEIPT\nreceipt-id:junk-%d\n\n\x00" % n for n in range(flood))
        conn.sendall(junk + b"RECEIPT\nreceipt-id:fc-1\n\n\x00")
        peer.read_until_eof(conn)

    peer = peers(flood_then_answer)
    listener = Lost()
    session = connect(peer, listener, cue=False, confirm_mode="receipt")
    confirmed = threading.Event()
    outcomes: list[BaseException | None] = []

    def done(outcome: BaseException | None) -> None:
        outcomes.append(outcome)
        confirmed.set()

    session.send("/queue/a", b"x", {}, done)
    assert confirmed.wait(WAIT)
    assert outcomes == [None]
    assert session.unknown_receipts == flood
    assert f"unknown_receipts={flood})" in repr(session)
    lines = [r for r in caplog.records if "which no frame asked for" in r.getMessage()]
    assert len(lines) == 1  # the first one; the rest only counted within the interval
    assert "'junk-0'" in lines[0].getMessage()
    assert session.is_open
    assert listener.causes == []
    session.close()


def test_a_peer_that_answers_guessed_receipt_ids_confirms_nothing(
    peers: Callable[[Script], Peer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A peer that answers RECEIPT fc-0 ... fc-99 (how a naive client numbers its frames) would
    # confirm sends it never stored; with a nonce per session it cannot name one.
    monkeypatch.setattr(_receipts, "new_nonce", REAL_NONCE)

    def guess_then_answer(conn: socket.socket) -> None:
        frame = b""
        while b"\x00" not in frame:  # the SEND
            frame += conn.recv(4096)
        receipt = next(
            line.split(b":", 1)[1] for line in frame.split(b"\n") if line.startswith(b"receipt:")
        )
        guesses = b"".join(b"RECEIPT\nreceipt-id:fc-%d\n\n\x00" % n for n in range(100))
        # The real answer last: frames are read in order, so it comes after every guess.
        conn.sendall(guesses + b"RECEIPT\nreceipt-id:" + receipt + b"\n\n\x00")
        peer.read_until_eof(conn)

    peer = peers(guess_then_answer)
    listener = Lost()
    session = connect(peer, listener, cue=False, confirm_mode="receipt")
    confirmed = threading.Event()
    ignored_before: list[int] = []

    def done(outcome: BaseException | None) -> None:
        assert outcome is None
        ignored_before.append(session.unknown_receipts)
        confirmed.set()

    session.send("/queue/a", b"x", {}, done)
    assert confirmed.wait(WAIT)
    assert ignored_before == [100]  # confirmed by its own receipt, after every guess
    assert session.unknown_receipts == 100
    session.close()


# --- 4. close() does not wait for a hung broker ------------------------------------------------


def test_close_returns_promptly_when_the_broker_stops_answering(
    peers: Callable[[Script], Peer],
) -> None:
    closed = threading.Event()

    def hang(conn: socket.socket) -> None:
        # Hung: reads nothing and answers nothing until the test's close() has returned.
        assert closed.wait(WAIT)
        peer.read_until_eof(conn)

    peer = peers(hang)
    listener = Lost()
    session = connect(peer, listener, cue=False)
    outcomes: list[BaseException | None] = []
    session.send("/queue/a", b"x", {}, outcomes.append)
    clock = SystemClock()
    started = clock.monotonic()
    session.close()  # close_timeout is 2 s: it used to wait all of it for the receipt
    elapsed = clock.monotonic() - started
    closed.set()
    assert elapsed < 1.0
    assert [type(e) for e in outcomes] == [BrokerUnavailable]
    assert listener.causes == []  # close() is not a loss
    assert peer.done.wait(WAIT)
    assert b"DISCONNECT\nreceipt:bye\n" in peer.received  # still said goodbye, then ended
