"""StompConnector / StompSession driven through a scripted transport: no sockets, no sleeps.

The scripted transport stands where stomp.py's transport stands: it records the frames the
session writes, and the test plays the I/O thread by calling the stomp.py listener the session
registered (``on_connected``, ``on_receipt``, ``on_error``, ``on_message``, ``on_disconnected``).
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from stomp.utils import Frame

from failover_client import (
    AuthenticationFailed,
    BrokerAddress,
    BrokerRefused,
    BrokerUnavailable,
    ConfigurationError,
    FailoverOptions,
    ProtocolViolation,
    SendRejected,
    SubscriptionRefused,
    TLSFailure,
)
from failover_client.adapter import Cancel, Received, SubscriptionSpec
from failover_client.stomp import StompConnector, StompSession, _receipts
from failover_client.stomp._teardown import BYE_SILENCE

REAL_NONCE = _receipts.new_nonce

ADDRESS = BrokerAddress("stomp", "b1", 61613)


@pytest.fixture(autouse=True)
def predictable_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Receipt and transaction ids without their random nonce (``fc-1``, ``fx-1``), so tests
    can name them; the tests of the nonce itself put the real one back (``REAL_NONCE``)."""
    monkeypatch.setattr(_receipts, "new_nonce", lambda: "")


CONNECTED = {"version": "1.2", "heart-beat": "0,0", "server": "test"}


class StepClock:
    """Virtual time: ``wait`` returns at once, moving time forward by the timeout."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if not event.is_set() and timeout is not None:
            self.now += timeout
        return event.is_set()


class ScriptedTransport:
    """Records what the session writes; ``on_connect`` plays the broker's answer to CONNECT."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.host, self.port = args
        self.kwargs = kwargs
        self.listeners: dict[str, Any] = {}
        self.frames: list[tuple[str, dict[str, str], Any]] = []
        self.connect_frame: Any = None
        self.on_connect: Callable[[ScriptedTransport], None] = lambda t: t.play(
            "connected", CONNECTED
        )
        self.start_error: BaseException | None = None
        self.write_error: BaseException | None = None
        self.aborted = 0
        self.resets = 0
        """Aborts that end the connection with RST (a lost session), not FIN."""
        self.closed_unstarted = 0
        self.io_thread = None
        self.stage = "TCP connect"
        self.vhost = None

    # -- what stomp.py's Transport offers the session --
    def override_threading(self, factory: Any) -> None:
        self.thread_factory = factory

    def set_listener(self, name: str, listener: Any) -> None:
        self.listeners[name] = listener

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error

    def transmit(self, frame: Any) -> None:
        if self.write_error is not None:
            raise self.write_error
        self.frames.append((frame.cmd, dict(frame.headers), frame.body))

    def write_encoded(self, data: bytes) -> None:
        # Recorded like transmit's frames: command, headers as written (escaped), body.
        if self.write_error is not None:
            raise self.write_error
        # One write may carry several frames (a page-in pair): each ends at its NUL, or after
        # its content-length.
        while data:
            head, _, rest = data.partition(b"\n\n")
            command, *lines = head.decode().split("\n")
            headers = dict(line.split(":", 1) for line in lines)
            length = headers.get("content-length")
            end = int(length) if length is not None else rest.index(b"\0")
            assert rest[end : end + 1] == b"\0", data
            self.frames.append((command, headers, rest[:end]))
            data = rest[end + 1 :]

    def write_quietly(self, frame: Any) -> None:
        self.connect_frame = frame
        self.on_connect(self)

    def write_heartbeat(self) -> None:
        self.frames.append(("<beat>", {}, None))

    def start_writer(self, **kwargs: Any) -> bool:
        # Like a TLS transport: frames are recorded by transmit, synchronously.
        self.writer_kwargs = kwargs
        return False

    def flush(self, timeout: float) -> bool:
        return True

    def join_writer(self, timeout: float) -> bool:
        return True

    def abort(self, *, reset: bool = False) -> None:
        self.aborted += 1
        self.resets += reset

    def close_unstarted(self) -> None:
        self.closed_unstarted += 1

    # -- playing the I/O thread --
    def play(self, event: str, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        """One frame, as if it were one read: the real transport ends each read's frames with
        ``on_frames_done``."""
        listener = self.listeners["failover-client"]
        if event == "disconnected":
            listener.on_disconnected()
            return
        self.play_read([(event, headers, body)])

    def play_read(self, frames: list[tuple[str, dict[str, str] | None, bytes]]) -> None:
        """Several frames as one read, then the read's end (``on_frames_done``)."""
        listener = self.listeners["failover-client"]
        try:
            for event, headers, body in frames:
                frame = Frame(event.upper(), dict(headers or {}), body)
                getattr(listener, f"on_{event}")(frame)
        finally:
            done = self.kwargs.get("on_frames_done")
            if done is not None:
                done()

    def bytes_in(self, data: bytes) -> None:
        self.kwargs["on_bytes"](data)


class Recorder:
    """A SessionListener that records messages and losses."""

    def __init__(self) -> None:
        self.messages: list[Received] = []
        self.lost: list[BaseException] = []
        self.raise_in_on_message: BaseException | None = None

    def on_message(self, session: Any, message: Received) -> None:
        self.messages.append(message)
        if self.raise_in_on_message is not None:
            raise self.raise_in_on_message

    def on_lost(self, session: Any, cause: BaseException) -> None:
        self.lost.append(cause)


def reported(caplog: pytest.LogCaptureFixture) -> list[BaseException]:
    """The errors the session logged on ``failover_client.stomp`` without ending itself."""
    return [
        record.exc_info[1]
        for record in caplog.records
        if record.name == "failover_client.stomp"
        and record.levelno == logging.ERROR
        and record.exc_info is not None
        and record.exc_info[1] is not None
    ]


class Harness:
    def __init__(self, **connector_kwargs: Any) -> None:
        self.clock = StepClock()
        self.transports: list[ScriptedTransport] = []
        self.script: Callable[[ScriptedTransport], None] | None = None
        self.listener = Recorder()
        self.connector = StompConnector(
            FailoverOptions(),
            clock=self.clock,
            transport_factory=self._factory,
            **{"login": "app", "passcode": "s3cret", "heartbeat": (0, 0), **connector_kwargs},
        )

    def _factory(self, *args: Any, **kwargs: Any) -> ScriptedTransport:
        transport = ScriptedTransport(*args, **kwargs)
        if self.script is not None:
            transport.on_connect = self.script
        self.transports.append(transport)
        return transport

    def connect(self, address: BrokerAddress = ADDRESS, timeout: float = 2.0) -> StompSession:
        return self.connector.connect(
            address, timeout=timeout, listener=self.listener, cancel=Cancel()
        )

    @property
    def transport(self) -> ScriptedTransport:
        return self.transports[-1]


# --- handshake ---------------------------------------------------------------------------------


def test_connect_sends_one_connect_frame_and_opens_after_connected() -> None:
    h = Harness(client_id="c-1", heartbeat=(1000, 2000))
    h.script = lambda t: t.play("connected", {"version": "1.2", "heart-beat": "0,0"})
    session = h.connect(BrokerAddress("stomp", "b1", 61613, params=(("vhost", "/prod"),)))
    t = h.transport
    assert (t.host, t.port) == ("b1", 61613)
    assert t.kwargs["ssl_context"] is None
    assert t.connect_frame.cmd == "CONNECT"
    assert t.connect_frame.headers == {
        "accept-version": "1.1,1.2",
        "host": "/prod",
        "heart-beat": "1000,1000",
        "login": "app",
        "passcode": "s3cret",
        "client-id": "c-1",
    }
    assert session.is_open
    assert session.version == "1.2"
    assert session.connected_headers == {"version": "1.2", "heart-beat": "0,0"}
    assert repr(session) == (
        "StompSession(broker='stomp://b1:61613?vhost=/prod', state=open, version=1.2, "
        "outstanding=0)"
    )
    assert "s3cret" not in repr(h.connector)


def test_member_credentials_override_the_connector_defaults() -> None:
    h = Harness()
    h.connect(BrokerAddress("stomp", "b1", 61613, user="u2", password="p2"))
    assert h.transport.connect_frame.headers["login"] == "u2"
    assert h.transport.connect_frame.headers["passcode"] == "p2"
    h.connect(BrokerAddress("stomp", "b1", 61613, user="u3"))
    assert "passcode" not in h.transport.connect_frame.headers


def test_no_connected_within_the_deadline_is_broker_unavailable_and_cleans_up() -> None:
    h = Harness()
    h.script = lambda t: None  # a hung broker: TCP accepted, never answers
    with pytest.raises(BrokerUnavailable, match=r"no CONNECTED frame within 1.5 s") as info:
        h.connect(timeout=1.5)
    assert str(info.value).startswith("stomp://b1:61613: ")
    assert h.clock.now == 1.5
    assert h.transport.aborted == 1
    assert h.transport.closed_unstarted == 1  # no I/O thread in the script: socket released


def test_error_frame_about_credentials_is_authentication_failed_without_the_password() -> None:
    h = Harness()
    h.script = lambda t: t.play(
        "error",
        {"message": "User name [app] or password is invalid."},
        b"login app / passcode s3cret refused",
    )
    with pytest.raises(AuthenticationFailed) as info:
        h.connect()
    assert "s3cret" not in str(info.value)
    assert h.listener.lost == []  # connect raised instead


def test_error_then_close_keeps_the_first_cause() -> None:
    def script(t: ScriptedTransport) -> None:
        t.play("error", {"message": "Bad CONNECT"}, b"Access refused for user 'app'")
        t.play("disconnected")

    h = Harness()
    h.script = script
    with pytest.raises(AuthenticationFailed, match="Access refused"):
        h.connect()


def test_close_during_handshake_is_broker_unavailable() -> None:
    def script(t: ScriptedTransport) -> None:
        t.bytes_in(b"CONNECTED\nversion:1.2\n")
        t.play("disconnected")

    h = Harness()
    h.script = script
    with pytest.raises(BrokerUnavailable) as info:
        h.connect()
    assert str(info.value) == (
        "stomp://b1:61613: connection closed by the broker during the handshake after 22 bytes "
        "of an incomplete frame"
    )


def test_junk_answer_is_a_protocol_violation_that_never_shows_the_passcode() -> None:
    h = Harness()
    # An echo server sends our own CONNECT back.
    h.script = lambda t: t.bytes_in(b"CONNECT\npasscode:s3cret\n")
    with pytest.raises(ProtocolViolation, match="not a STOMP frame") as info:
        h.connect()
    assert "s3cret" not in str(info.value)
    h.script = lambda t: t.bytes_in(b"HTTP/1.1 400 Bad Request\r\n")
    with pytest.raises(ProtocolViolation, match=r"b'HTTP/1.1 400 Bad Request\\r\\n'"):
        h.connect()


def test_stomp_10_and_bad_heartbeat_headers_are_protocol_violations() -> None:
    h = Harness()
    h.script = lambda t: t.play("connected", {})
    with pytest.raises(ProtocolViolation, match=r"STOMP 1.0"):
        h.connect()
    h.script = lambda t: t.play("connected", {"version": "1.2", "heart-beat": "x"})
    with pytest.raises(ProtocolViolation, match="malformed heart-beat"):
        h.connect()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ConnectionRefusedError(111, "refused"), BrokerUnavailable),
        (TimeoutError("timed out"), BrokerUnavailable),
    ],
)
def test_tcp_failures_are_mapped_from_the_cause(error: OSError, kind: type[Exception]) -> None:
    h = Harness()

    def factory(*args: Any, **kwargs: Any) -> ScriptedTransport:
        transport = ScriptedTransport(*args, **kwargs)
        transport.start_error = error
        h.transports.append(transport)
        return transport

    h.connector = StompConnector(clock=h.clock, transport_factory=factory)
    with pytest.raises(kind) as info:
        h.connect()
    assert info.value.__cause__ is error
    assert "during TCP connect" in str(info.value)
    assert h.transport.closed_unstarted == 1


def test_tls_members_get_the_context_and_verification_errors_are_tls_failures() -> None:
    h = Harness()
    context = ssl.create_default_context()
    h.connector = StompConnector(
        clock=h.clock, ssl_context=context, transport_factory=h._factory, heartbeat=(0, 0)
    )
    h.connect(BrokerAddress("stomp+ssl", "b1", 61612))
    assert h.transport.kwargs["ssl_context"] is context
    assert h.transport.kwargs["server_hostname"] == "b1"

    def failing(*args: Any, **kwargs: Any) -> ScriptedTransport:
        transport = ScriptedTransport(*args, **kwargs)
        transport.stage = "TLS handshake"
        transport.start_error = ssl.SSLCertVerificationError(1, "certificate verify failed")
        return transport

    h.connector = StompConnector(clock=h.clock, ssl_context=context, transport_factory=failing)
    with pytest.raises(TLSFailure, match="during TLS handshake"):
        h.connect(BrokerAddress("stomp+ssl", "b1", 61612))


def test_amqp_members_and_bad_settings_are_configuration_errors() -> None:
    h = Harness()
    with pytest.raises(ConfigurationError, match="AMQP member"):
        h.connect(BrokerAddress("amqp", "b1", 5672))
    with pytest.raises(ConfigurationError, match="heartbeat_grace"):
        StompConnector(heartbeat_grace=0.5)
    with pytest.raises(ConfigurationError, match="heartbeat"):
        StompConnector(heartbeat=(-1, 0))


# --- sends and receipts ------------------------------------------------------------------------


def test_sends_with_receipts_confirm_each_once_and_many_may_be_outstanding() -> None:
    h = Harness()
    session = h.connect()
    outcomes: list[tuple[int, BaseException | None]] = []
    for i in range(3):
        session.send("/queue/a", b"m%d" % i, {}, lambda e, i=i: outcomes.append((i, e)))
    assert session.outstanding == 3
    sent = h.transport.frames
    assert [f[0] for f in sent] == ["SEND", "SEND", "SEND"]
    assert sent[0][1] == {
        "persistent": "true",
        "content-length": "2",
        "destination": "/queue/a",
        "receipt": "fc-1",
    }
    assert sent[0][2] == b"m0"
    h.transport.play("receipt", {"receipt-id": "fc-2"})
    h.transport.play("receipt", {"receipt-id": "fc-2"})  # answered already: only counted
    assert session.unknown_receipts == 1
    assert session.outstanding == 2
    h.transport.play("error", {"receipt-id": "fc-1", "message": "not allowed"})
    assert outcomes[0] == (1, None)
    assert outcomes[1][0] == 0
    assert isinstance(outcomes[1][1], SendRejected)
    assert str(outcomes[1][1]) == "stomp://b1:61613: broker rejected the message: not allowed"
    # The ERROR named its frame: nothing else is in doubt and the session goes on (ActiveMQ
    # keeps the connection); a broker that closes it next is an ordinary loss.
    assert len(outcomes) == 2
    assert session.is_open
    assert h.listener.lost == []
    h.transport.play("disconnected")
    assert outcomes[2][0] == 2
    assert type(outcomes[2][1]) is BrokerUnavailable  # not refused: the engine replays it
    assert session.outstanding == 0
    assert [type(c) for c in h.listener.lost] == [BrokerUnavailable]


def test_receipt_ids_carry_a_random_nonce_so_a_peer_cannot_answer_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A peer that sends RECEIPT fc-1, fc-2, ... before (or without) reading our SENDs would
    # confirm messages the broker never stored if it could guess the ids.
    monkeypatch.setattr(_receipts, "new_nonce", REAL_NONCE)
    h = Harness()
    session = h.connect()
    outcomes: list[BaseException | None] = []
    session.send("/queue/a", b"x", {}, outcomes.append)
    (_, headers, _) = h.transport.frames[-1]
    receipt = headers["receipt"]
    assert receipt.startswith("fc-")
    assert receipt != "fc-1"
    for guess in ("fc-1", "fc-0", "1"):
        h.transport.play("receipt", {"receipt-id": guess})
    assert outcomes == []
    assert session.unknown_receipts == 3
    h.transport.play("receipt", {"receipt-id": receipt})
    assert outcomes == [None]
    h2 = Harness()
    h2.connect().send("/queue/a", b"x", {}, outcomes.append)
    other = h2.transport.frames[-1][1]["receipt"]
    assert other.startswith("fc-")  # a new nonce per session
    assert other != receipt


def test_a_subscribe_with_a_receipt_is_confirmed_or_refused_by_name() -> None:
    h = Harness()
    session = h.connect()
    outcomes: dict[str, BaseException | None] = {}
    session.subscribe(
        SubscriptionSpec(id="good", destination="/queue/a"), partial(outcomes.__setitem__, "good")
    )
    session.subscribe(
        SubscriptionSpec(id="bad", destination="/queue/b", headers=(("selector", "((("),)),
        partial(outcomes.__setitem__, "bad"),
    )
    session.subscribe(SubscriptionSpec(id="plain", destination="/queue/c"), None)
    frames = h.transport.frames
    assert [(f[0], f[1].get("id"), f[1].get("receipt")) for f in frames] == [
        ("SUBSCRIBE", "good", "fc-1"),
        ("SUBSCRIBE", "bad", "fc-2"),
        ("SUBSCRIBE", "plain", None),
    ]
    h.transport.play("receipt", {"receipt-id": "fc-1"})
    h.transport.play("error", {"receipt-id": "fc-2", "message": "InvalidSelectorException"})
    assert outcomes["good"] is None
    refused = outcomes["bad"]
    assert isinstance(refused, SubscriptionRefused)
    assert refused.subscription_id == "bad"
    assert "InvalidSelectorException" in str(refused)
    assert session.is_open


def test_send_without_confirmation_requests_no_receipt() -> None:
    h = Harness()
    session = h.connect()
    session.send("/queue/a", b"", {"persistent": "false"}, None)
    assert h.transport.frames == [("SEND", {"persistent": "false", "destination": "/queue/a"}, b"")]


def test_loss_fails_outstanding_confirmations_then_calls_on_lost_once() -> None:
    h = Harness()
    session = h.connect()
    order: list[str] = []
    outcomes: list[BaseException | None] = []

    def confirm(e: BaseException | None) -> None:
        order.append("confirm")
        outcomes.append(e)

    session.send("/queue/a", b"x", {}, confirm)
    session.send("/queue/a", b"y", {}, confirm)
    h.listener.on_lost = lambda s, c: (order.append("lost"), h.listener.lost.append(c))  # type: ignore[method-assign]
    h.transport.play("disconnected")
    h.transport.play("disconnected")
    assert order == ["confirm", "confirm", "lost"]
    assert all(isinstance(e, BrokerUnavailable) for e in outcomes)
    assert [str(c) for c in h.listener.lost] == [
        "stomp://b1:61613: connection closed by the broker"
    ]
    assert not session.is_open
    with pytest.raises(BrokerUnavailable, match="session was lost"):
        session.send("/queue/a", b"z", {}, confirm)
    with pytest.raises(BrokerUnavailable, match="session was lost"):
        session.subscribe(SubscriptionSpec(id="s", destination="/queue/a"), None)
    assert len(outcomes) == 2


def test_a_lost_session_resets_its_connection_a_closed_one_does_not() -> None:
    # A broker that stopped reading never sees a FIN queued behind our unread bytes, keeps
    # the connection and refuses the reconnect's client id: a loss ends it with RST.
    lost = Harness()
    lost_session = lost.connect()
    lost.transport.play("disconnected")
    closed = Harness(close_timeout=0.5)
    closed_session = closed.connect()
    closed_session.close()
    assert not lost_session.is_open
    assert not closed_session.is_open
    assert (lost.transport.aborted, lost.transport.resets) == (1, 1)
    # close() says DISCONNECT: the FIN after it lets the broker read the ACKs before it.
    assert (closed.transport.aborted, closed.transport.resets) == (1, 0)


def test_error_without_receipt_ends_the_session_with_the_brokers_message() -> None:
    h = Harness()
    session = h.connect()
    outcomes: list[BaseException | None] = []
    session.send("/queue/a", b"x", {}, outcomes.append)
    h.transport.play("error", {"message": "Unknown ack"}, b"detail")
    assert not session.is_open
    assert h.transport.aborted == 1  # the socket goes, even if the broker keeps it open
    # Failed as a refusal: the broker may have read it (the engine looks for the culprit).
    assert [type(e) for e in outcomes] == [BrokerRefused]
    assert [str(c) for c in h.listener.lost] == [
        "stomp://b1:61613: broker sent ERROR: Unknown ack: detail"
    ]
    assert isinstance(h.listener.lost[0], BrokerRefused)  # alive, and refused some frame
    h.transport.play("disconnected")
    assert len(h.listener.lost) == 1


def test_a_failed_write_raises_and_never_calls_back() -> None:
    h = Harness()
    session = h.connect()
    h.transport.write_error = BrokenPipeError(32, "Broken pipe")
    called: list[object] = []
    with pytest.raises(BrokerUnavailable, match="connection broken during SEND write"):
        session.send("/queue/a", b"x", {}, called.append)
    assert h.transport.aborted == 1
    assert session.outstanding == 0
    h.transport.play("disconnected")
    assert called == []


def test_bad_headers_raise_before_anything_is_written() -> None:
    h = Harness()
    session = h.connect()
    with pytest.raises(ConfigurationError):
        session.send("/queue/a", b"x", {"bad:name": "v"}, lambda e: None)
    assert session.outstanding == 0
    assert h.transport.frames == []


# --- subscriptions and messages ----------------------------------------------------------------


def test_subscribe_ack_nack_unsubscribe_frames() -> None:
    h = Harness(client_id="c1")
    session = h.connect()
    session.subscribe(
        SubscriptionSpec(id="s1", destination="/topic/t", ack="client", durable_name="d1"), None
    )
    h.transport.play(
        "message",
        {"destination": "/topic/t", "message-id": "m1", "subscription": "s1", "ack": "a1"},
        b"body",
    )
    (message,) = h.listener.messages
    session.ack(message)
    session.nack(message)
    session.unsubscribe("s1")
    assert [(f[0], f[1]) for f in h.transport.frames] == [
        (
            "SUBSCRIBE",
            {
                "destination": "/topic/t",
                "id": "s1",
                "ack": "client",
                # The harness's CONNECTED names no server: every broker's prefetch header.
                "activemq.prefetchSize": "100",
                "prefetch-count": "100",
                "consumer-window-size": "409600",
                "activemq.subscriptionName": "d1",
                "durable-subscription-name": "d1",
                "durable": "true",
                "auto-delete": "false",
            },
        ),
        ("ACK", {"id": "a1"}),
        ("NACK", {"id": "a1"}),
        ("UNSUBSCRIBE", {"id": "s1"}),
    ]


def test_stomp_11_acks_by_message_id_and_subscription() -> None:
    h = Harness()
    h.script = lambda t: t.play("connected", {"version": "1.1"})
    session = h.connect()
    h.transport.play(
        "message", {"destination": "/queue/a", "message-id": "m1", "subscription": "s1"}, b""
    )
    session.ack(h.listener.messages[0])
    assert h.transport.frames == [("ACK", {"message-id": "m1", "subscription": "s1"}, b"")]


def test_a_raising_listener_is_reported_and_the_session_lives_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    session = h.connect()
    h.listener.raise_in_on_message = RuntimeError("app bug")
    headers = {"destination": "/queue/a", "message-id": "m1", "subscription": "s1"}
    h.transport.play("message", headers, b"1")
    h.transport.play("message", {"destination": "/queue/a"}, b"2")  # malformed
    assert [type(e) for e in reported(caplog)] == [RuntimeError, ProtocolViolation]
    assert session.is_open
    assert h.listener.lost == []


# --- close -------------------------------------------------------------------------------------


def test_close_says_disconnect_fails_leftovers_and_never_calls_on_lost() -> None:
    h = Harness(close_timeout=0.5)
    session = h.connect()
    outcomes: list[BaseException | None] = []
    session.send("/queue/a", b"x", {}, outcomes.append)
    session.close()
    session.close()
    assert h.transport.frames[-1] == ("DISCONNECT", {"receipt": "bye"}, b"")
    # Waited for the receipt that the script never sends, while the broker was silent.
    assert h.clock.now == BYE_SILENCE
    assert h.transport.aborted == 1
    assert [type(e) for e in outcomes] == [BrokerUnavailable]
    assert h.listener.lost == []
    h.transport.play("disconnected")
    assert h.listener.lost == []
    with pytest.raises(BrokerUnavailable, match="session is closed"):
        session.send("/queue/a", b"x", {}, None)


def test_close_returns_as_soon_as_the_disconnect_receipt_arrives() -> None:
    h = Harness()
    session = h.connect()
    h.transport.write_error = None
    original = h.transport.transmit

    def transmit(frame: Any) -> None:
        original(frame)
        if frame.cmd == "DISCONNECT":
            h.transport.play("receipt", {"receipt-id": "bye"})

    h.transport.transmit = transmit  # type: ignore[method-assign]
    session.close()
    assert h.clock.now == 0.0


@pytest.mark.parametrize(("chatty_waits", "expected"), [(3, 4 * BYE_SILENCE), (100, 1.5)])
def test_close_waits_for_the_receipt_while_the_broker_still_sends(
    chatty_waits: int, expected: float
) -> None:
    h = Harness(close_timeout=1.5)
    session = h.connect()
    waits = 0
    step = h.clock.wait

    def wait(event: threading.Event, timeout: float | None) -> bool:
        # A busy broker: a byte (a receipt, a message) arrives within each of the first waits.
        nonlocal waits
        done = step(event, timeout)
        waits += 1
        if waits <= chatty_waits:
            h.transport.bytes_in(b"\n")
        return done

    h.clock.wait = wait  # type: ignore[method-assign]
    session.close()
    assert h.clock.now == pytest.approx(expected)  # capped by close_timeout when it never ends


def test_close_of_a_lost_session_does_not_write() -> None:
    h = Harness()
    session = h.connect()
    h.transport.play("disconnected")
    session.close()
    assert h.transport.frames == []


def test_no_heart_beat_once_close_has_begun() -> None:
    # close() reads our writes as a broker still taking bytes while it waits for DISCONNECT's
    # receipt: a beat written into a hung broker's socket buffer must not look like that.
    h = Harness()
    h.script = lambda t: t.play("connected", {"version": "1.2", "heart-beat": "0,0"})
    session = h.connect()
    session._outbound.beat()
    assert [f for f in h.transport.frames if f[0] == "<beat>"] == [("<beat>", {}, None)]
    session._state.phase = "closed"  # as close() sets it before saying DISCONNECT
    session._outbound.beat()
    assert len([f for f in h.transport.frames if f[0] == "<beat>"]) == 1
    session._state.phase = "open"
    session.close()


# --- sync: the broker took every frame before ---------------------------------------------------


def test_sync_writes_an_empty_transaction_with_a_receipt_behind_the_acks() -> None:
    h = Harness()
    session = h.connect()
    h.transport.play(
        "message",
        {"destination": "/queue/a", "message-id": "m1", "subscription": "s1", "ack": "a1"},
    )
    outcomes: list[BaseException | None] = []
    session.ack(h.listener.messages[0])
    session.sync(outcomes.append)
    assert [(f[0], f[1]) for f in h.transport.frames] == [
        ("ACK", {"id": "a1"}),
        ("BEGIN", {"transaction": "sync-fc-1"}),
        ("ABORT", {"transaction": "sync-fc-1", "receipt": "fc-1"}),
    ]
    assert outcomes == []
    h.transport.play("receipt", {"receipt-id": "fc-1"})
    assert outcomes == [None]
    assert session.outstanding == 0


def test_a_sync_the_broker_never_answered_fails_with_the_loss() -> None:
    h = Harness()
    session = h.connect()
    outcomes: list[BaseException | None] = []
    session.sync(outcomes.append)
    h.transport.play("disconnected")
    assert [type(e) for e in outcomes] == [BrokerUnavailable]
    with pytest.raises(BrokerUnavailable, match="session was lost"):
        session.sync(outcomes.append)
    assert len(outcomes) == 1
