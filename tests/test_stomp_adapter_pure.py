"""STOMP adapter building blocks: error mapping, frame headers, receipts, heart-beats, TLS."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from failover_client import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConfigurationError,
    FailoverOptions,
    ProtocolViolation,
    SendRejected,
    TLSFailure,
)
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.net._completions import run_all
from failover_client.net._tls import build_ssl_context
from failover_client.stomp._errors import (
    broker_error_text,
    connect_error_from_frame,
    redact,
    send_rejection_from_frame,
    transport_error,
)
from failover_client.stomp._frames import (
    ack_headers,
    check_handshake_bytes,
    connect_headers,
    received_from_frame,
    send_headers,
    subscribe_headers,
)
from failover_client.stomp._heartbeat import (
    HeartbeatMonitor,
    HeartbeatPlan,
    HeartbeatState,
    Tick,
    negotiate,
    parse_heartbeat_header,
    request_header,
)
from failover_client.stomp._receipts import ReceiptBook

BROKER = "stomp://b1:61613"


class StepClock:
    """Virtual time: ``wait`` returns at once, moving time forward by the timeout."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        assert timeout is not None
        self.waits.append(timeout)
        self.now += timeout
        return event.is_set()


# --- error mapping -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (
            ConnectionRefusedError(111, "Connection refused"),
            BrokerUnavailable,
            "connection refused",
        ),
        (ConnectionResetError(104, "reset"), BrokerUnavailable, "connection reset"),
        (TimeoutError("timed out"), BrokerUnavailable, "timed out"),
        (socket.gaierror(-2, "Name or service not known"), BrokerUnavailable, "cannot resolve"),
        (OSError(113, "No route to host"), BrokerUnavailable, "No route to host"),
        (ssl.SSLEOFError(8, "EOF occurred"), BrokerUnavailable, "connection closed"),
        (ssl.SSLError(1, "wrong version"), TLSFailure, "TLS error"),
        (RuntimeError("odd"), BrokerUnavailable, "RuntimeError: odd"),
    ],
)
def test_transport_errors_map_onto_the_hierarchy(
    exc: BaseException, kind: type[Exception], text: str
) -> None:
    error = transport_error(exc, broker=BROKER, during="TCP connect")
    assert type(error) is kind
    assert text in str(error)
    assert str(error).startswith(f"{BROKER}: ")
    assert error.broker == BROKER


def test_certificate_verification_failure_is_a_tls_failure_with_the_reason() -> None:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "unable to get local issuer certificate"
    error = transport_error(exc, broker=BROKER, during="TLS handshake")
    assert isinstance(error, TLSFailure)
    assert str(error) == (
        f"{BROKER}: certificate verification failed during TLS handshake: "
        "unable to get local issuer certificate"
    )


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        (
            {"message": "User name [app] or password is invalid."},
            b"User name [app] or password is invalid.",
        ),
        ({"message": "java.lang.SecurityException: User name [x] or password is invalid."}, b""),
        ({"message": "Bad CONNECT"}, b"Access refused for user 'app'\n"),
        ({"message": "Bad CONNECT"}, b"Virtual host '/nope' access denied"),
        ({"message": "AMQ229031: Unable to validate user"}, None),
    ],
)
def test_credential_refusals_are_authentication_failures(
    headers: dict[str, str], body: bytes | None
) -> None:
    error = connect_error_from_frame(headers, body, broker=BROKER)
    assert isinstance(error, AuthenticationFailed)
    assert str(error).startswith(f"{BROKER}: broker refused the credentials: ")


def test_other_connect_errors_are_broker_unavailable_and_ignore_stack_traces() -> None:
    body = (
        b"javax.jms.InvalidClientIDException: Broker: b1 - Client: c1 already connected\n"
        b"\tat org.apache.activemq.security.SimpleAuthenticationBroker.addConnection(...)\n"
    )
    error = connect_error_from_frame(
        {"message": "Client c1 already connected"}, body, broker=BROKER
    )
    assert type(error) is BrokerUnavailable
    assert str(error) == (
        f"{BROKER}: broker refused the connection: Client c1 already connected: "
        "javax.jms.InvalidClientIDException: Broker: b1 - Client: c1 already connected"
        " (the broker still holds a connection with this client id: this client's previous"
        " one, until the broker notices that it ended, or another client's with the same"
        " client id; tried again on the reconnect schedule)"
    )


def test_passcodes_are_redacted_but_still_classified() -> None:
    headers = {"message": "bad login app/password"}
    error = connect_error_from_frame(headers, b"", broker=BROKER, secrets=("password",))
    assert isinstance(error, AuthenticationFailed)
    assert "password" not in str(error).split(": ", 1)[1]
    assert str(error).endswith("bad login app/***")
    assert redact("a s3cret b s3cret", ("s3cret", None, "")) == "a *** b ***"


def test_broker_error_text_joins_message_and_first_body_line_and_truncates() -> None:
    assert broker_error_text({"message": "m"}, b"line1\nline2") == "m: line1"
    assert broker_error_text({"message": "m"}, b"m\n") == "m"
    assert broker_error_text({}, b"") == "ERROR frame without a message"
    long = broker_error_text({"message": "x" * 500}, None)
    assert len(long) == 300
    assert long.endswith("...")


def test_send_rejection_names_the_broker_and_message() -> None:
    error = send_rejection_from_frame(
        {"message": "Not allowed", "receipt-id": "fc-3"}, b"", broker=BROKER, message_id="m-1"
    )
    assert isinstance(error, SendRejected)
    assert str(error) == f"{BROKER}: broker rejected the message: Not allowed (message-id m-1)"


# --- frame headers -----------------------------------------------------------------------------


def test_connect_headers() -> None:
    headers = connect_headers(
        host="/", login="app", passcode="pw", heart_beat="1000,500", client_id="c1"
    )
    assert headers == {
        "accept-version": "1.1,1.2",
        "host": "/",
        "heart-beat": "1000,500",
        "login": "app",
        "passcode": "pw",
        "client-id": "c1",
    }
    assert connect_headers(host="h", login=None, passcode=None, heart_beat="0,0") == {
        "accept-version": "1.1,1.2",
        "host": "h",
    }


def test_connect_headers_refuse_line_breaks_without_showing_the_passcode() -> None:
    with pytest.raises(ConfigurationError) as info:
        connect_headers(host="h", login="a", passcode="se\ncret", heart_beat="0,0")
    assert "se\ncret" not in str(info.value)
    assert "passcode" in str(info.value)


def test_send_headers_are_persistent_by_default_and_carry_our_receipt() -> None:
    assert send_headers("/queue/a", {}, "fc-1", body_length=5) == {
        "persistent": "true",
        "content-length": "5",
        "destination": "/queue/a",
        "receipt": "fc-1",
    }
    mine = send_headers(
        "/queue/a",
        {"persistent": "false", "receipt": "theirs", "content-length": "99", "x": "a\nb"},
        None,
        body_length=0,
    )
    assert mine == {"persistent": "false", "x": "a\nb", "destination": "/queue/a"}


@pytest.mark.parametrize("name", ["", "a:b", "a\nb", "a\0"])
def test_send_headers_refuse_names_that_break_frames(name: str) -> None:
    with pytest.raises(ConfigurationError, match="header name"):
        send_headers("/queue/a", {name: "v"}, None, body_length=0)


def test_send_headers_refuse_nul_in_values() -> None:
    with pytest.raises(ConfigurationError, match="contains NUL"):
        send_headers("/queue/a", {"k": "a\0b"}, None, body_length=0)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"priority": 5}, "header 'priority': .* must be str, not int \\(e.g. '5'\\)"),
        ({7: "v"}, "header 7: .* must be str, not int"),
    ],
)
def test_send_headers_refuse_values_that_are_not_text(
    headers: dict[object, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        send_headers("/queue/a", headers, None, body_length=0)  # type: ignore[arg-type]


def test_send_headers_check_values_of_names_already_seen_valid() -> None:
    # The first send finds "k" and "priority" valid; later ones with the same names still get
    # their values checked (the one-pass check only skips the names).
    assert send_headers("/queue/a", {"k": "v", "priority": "4"}, None, body_length=0)["k"] == "v"
    with pytest.raises(ConfigurationError, match=r"header 'k': .* contains NUL"):
        send_headers("/queue/a", {"k": "a\0b", "priority": "4"}, None, body_length=0)
    with pytest.raises(ConfigurationError, match=r"header 'priority': .* must be str, not int"):
        send_headers("/queue/a", {"k": "v", "priority": 5}, None, body_length=0)  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="header name"):
        send_headers("/queue/a", {"k": "v", "a:b": "v"}, None, body_length=0)


def test_subscribe_headers_plain_and_durable() -> None:
    plain = SubscriptionSpec(id="s1", destination="/queue/a", ack="client-individual")
    assert subscribe_headers(plain, None) == {
        "destination": "/queue/a",
        "id": "s1",
        "ack": "client-individual",
        # No broker named: every broker's prefetch header (100 messages, 100 x 4 KiB).
        "activemq.prefetchSize": "100",
        "prefetch-count": "100",
        "consumer-window-size": "409600",
    }
    durable = SubscriptionSpec(
        id="s2",
        destination="/topic/t",
        durable_name="sub-a",
        headers=(("selector", "x = 1"), ("id", "ignored")),
    )
    assert subscribe_headers(durable, "client-1", "activemq") == {
        "destination": "/topic/t",
        "id": "s2",
        "ack": "auto",
        "activemq.prefetchSize": "100",
        "activemq.subscriptionName": "sub-a",
        "durable-subscription-name": "sub-a",
        "durable": "true",
        "auto-delete": "false",
        "selector": "x = 1",
    }


def test_durable_subscription_without_client_id_is_refused() -> None:
    spec = SubscriptionSpec(id="s", destination="/topic/t", durable_name="d")
    with pytest.raises(ConfigurationError, match="needs a client id"):
        subscribe_headers(spec, None)


def _received(ack_id: str | None = "ack-7") -> Received:
    return Received(
        subscription_id="s1", destination="/queue/a", body=b"", message_id="m-7", ack_id=ack_id
    )


def test_ack_headers_per_version() -> None:
    assert ack_headers("1.2", _received()) == {"id": "ack-7"}
    assert ack_headers("1.1", _received("m-7")) == {"message-id": "m-7", "subscription": "s1"}
    with pytest.raises(ConfigurationError, match="no ack id"):
        ack_headers("1.2", _received(None))


def test_received_from_frame() -> None:
    headers = {
        "destination": "/queue/a",
        "message-id": "m-1",
        "subscription": "s1",
        "ack": "a-1",
        "redelivered": "true",
    }
    message = received_from_frame(headers, b"\x00body", "1.2")
    assert message == Received(
        subscription_id="s1",
        destination="/queue/a",
        body=b"\x00body",
        headers=headers,
        message_id="m-1",
        ack_id="a-1",
        redelivered=True,
    )
    assert received_from_frame(headers, None, "1.1").ack_id == "m-1"
    assert received_from_frame({**headers, "redelivered": "false"}, b"", "1.2").redelivered is False
    with pytest.raises(ProtocolViolation, match="message-id"):
        received_from_frame({"destination": "/queue/a", "subscription": "s"}, b"", "1.2")


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        (b"", None),
        (b"CONN", None),
        (b"\nCONNECTED\n", True),
        (b"ERROR\r\nmessage:x", True),
        (b"HTTP/1.1 400 Bad Request\r\n", False),
        (b"AMQP\x00\x01\x00\x00", False),
        (b"CONNECT\naccept-version", False),
        (b"CONNECTEDX\n", False),
    ],
)
def test_handshake_bytes_tell_stomp_from_junk(data: bytes, verdict: bool | None) -> None:
    assert check_handshake_bytes(data) is verdict


# --- receipts ----------------------------------------------------------------------------------


def test_receipts_complete_exactly_once() -> None:
    book = ReceiptBook(nonce="")
    outcomes: list[tuple[str, BaseException | None]] = []
    r1 = book.add(lambda e: outcomes.append(("r1", e)))
    r2 = book.add(lambda e: outcomes.append(("r2", e)))
    r3 = book.add(lambda e: outcomes.append(("r3", e)))
    assert (r1, r2, r3) == ("fc-1", "fc-2", "fc-3")
    assert book.outstanding == 3
    rejection = SendRejected("no")
    run_all(book.confirm("fc-2"), pytest.fail)
    run_all(book.confirm("fc-2"), pytest.fail)  # a duplicate RECEIPT is ignored
    run_all(book.reject("fc-1", rejection), pytest.fail)
    lost = BrokerUnavailable("lost")
    run_all(book.fail_all(lost), pytest.fail)
    run_all(book.fail_all(lost), pytest.fail)
    assert outcomes == [("r2", None), ("r1", rejection), ("r3", lost)]
    assert book.add(lambda e: None) is None
    assert book.closed_by is lost
    assert repr(book) == "ReceiptBook(outstanding=0, unknown=1, premature=0, failed)"


def test_discard_tells_whether_the_receipt_was_still_waiting() -> None:
    book = ReceiptBook(nonce="")
    receipt = book.add(lambda e: None)
    assert receipt is not None
    assert book.discard(receipt) is True
    assert book.discard(receipt) is False
    assert book.is_ours("fc-9")
    assert not book.is_ours("bye")


def test_a_raising_callback_is_reported_and_the_rest_still_run() -> None:
    book = ReceiptBook(nonce="")
    seen: list[object] = []

    def boom(_: BaseException | None) -> None:
        raise ValueError("manager bug")

    book.add(boom)
    book.add(seen.append)
    errors: list[BaseException] = []
    run_all(book.fail_all(BrokerUnavailable("x")), errors.append)
    assert [type(e) for e in errors] == [ValueError]
    assert len(seen) == 1


# --- heart-beats -------------------------------------------------------------------------------


def test_request_header_asks_for_beats_at_half_the_receive_interval() -> None:
    assert request_header((1000, 1000)) == "1000,500"
    assert request_header((0, 0)) == "0,0"
    assert request_header((5000, 1)) == "5000,1"


def test_parse_heartbeat_header() -> None:
    assert parse_heartbeat_header(None) == (0, 0)
    assert parse_heartbeat_header(" 500 , 1000 ") == (500, 1000)
    with pytest.raises(ValueError, match="malformed"):
        parse_heartbeat_header("500")
    with pytest.raises(ValueError, match="malformed"):
        parse_heartbeat_header("a,b")


@pytest.mark.parametrize(
    ("wanted", "server", "plan"),
    [
        # ActiveMQ echoes the request swapped: beats every 0.5 s, silence limit 1.5 s.
        ((1000, 1000), "500,1000", HeartbeatPlan(0.5, 1.5, 0.5)),
        # The broker insists on slower beats: never judge before two of its intervals.
        ((1000, 1000), "2000,1000", HeartbeatPlan(0.5, 4.0, 2.0)),
        ((1000, 1000), "0,0", HeartbeatPlan(0.0, 0.0, 0.0)),
        ((1000, 1000), None, HeartbeatPlan(0.0, 0.0, 0.0)),
        ((0, 4000), "2000,3000", HeartbeatPlan(0.0, 6.0, 2.0)),
        ((4000, 0), "2000,3000", HeartbeatPlan(2.0, 0.0, 0.0)),
    ],
)
def test_negotiate(wanted: tuple[int, int], server: str | None, plan: HeartbeatPlan) -> None:
    assert negotiate(wanted, server) == plan


def test_state_sends_beats_and_declares_silence_after_the_limit() -> None:
    state = HeartbeatState(HeartbeatPlan(0.5, 1.5, 0.5), now=10.0)
    # A beat's deadline may be met a tenth of its interval early; the silence limit's may not.
    assert state.poll(10.0) == Tick(send_beat=False, wait=0.5, early=pytest.approx(0.05))
    assert state.poll(10.5) == Tick(send_beat=True, wait=0.5, early=pytest.approx(0.05))
    state.received(10.9)
    assert state.poll(11.0) == Tick(send_beat=True, wait=0.5, early=pytest.approx(0.05))
    state.sent(11.2)
    assert state.poll(11.3) == Tick(send_beat=False, wait=pytest.approx(0.4), early=0.05)
    assert state.poll(12.3) == Tick(send_beat=True, wait=pytest.approx(0.1), early=0.0)
    lost = state.poll(12.4)
    assert lost.silence == pytest.approx(1.5)
    assert lost.send_beat is False


def test_state_sends_a_beat_up_to_a_tenth_of_its_interval_early() -> None:
    state = HeartbeatState(HeartbeatPlan(1.0, 0.0), now=0.0)
    assert state.poll(0.89) == Tick(send_beat=False, wait=pytest.approx(0.11), early=0.1)
    assert state.poll(0.9) == Tick(send_beat=True, wait=1.0, early=0.1)
    assert state.poll(1.8) == Tick(send_beat=True, wait=1.0, early=0.1)


def test_state_does_not_judge_silence_during_a_dispatch() -> None:
    state = HeartbeatState(HeartbeatPlan(0.0, 1.5, 0.5), now=0.0)
    state.dispatch_started()
    assert state.poll(10.0) == Tick(wait=1.5)  # no beats: never early
    state.dispatch_finished(10.0)
    assert state.poll(11.0) == Tick(wait=0.5)
    assert state.poll(11.6).silence == pytest.approx(1.6)


def test_state_without_heartbeats_has_nothing_to_watch() -> None:
    assert HeartbeatState(HeartbeatPlan(0.0, 0.0), now=0.0).poll(99.0) == Tick()
    with pytest.raises(ValueError, match=">= 0"):
        HeartbeatPlan(-1.0, 0.0)


def test_monitor_beats_then_reports_silence_once() -> None:
    clock = StepClock(now=0.0)
    beats: list[float] = []
    silences: list[float] = []
    state = HeartbeatState(HeartbeatPlan(0.5, 1.5, 0.5), now=0.0)
    monitor = HeartbeatMonitor(
        state,
        clock,
        send_beat=lambda: beats.append(clock.now),
        on_silence=silences.append,
    )
    monitor.run()
    assert beats == [0.5, 1.0]
    assert silences == [1.5]
    assert clock.waits == [0.5, 0.5, 0.5]


def test_monitor_stops_when_told() -> None:
    clock = StepClock()
    monitor = HeartbeatMonitor(
        HeartbeatState(HeartbeatPlan(0.5, 1.5), now=clock.now),
        clock,
        send_beat=pytest.fail,
        on_silence=pytest.fail,
    )
    monitor.stop()
    monitor.run()
    assert clock.waits == []


# --- TLS context -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def test_tls_verifies_certificate_and_host_name_by_default(ca: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = build_ssl_context(FailoverOptions(tls_ca_file=str(ca_file)))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert len(context.get_ca_certs()) == 1


def test_tls_can_verify_the_chain_without_the_host_name(ca: trustme.CA, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    options = FailoverOptions(tls_ca_file=str(ca_file), tls_verify_hostname=False)
    context = build_ssl_context(options)
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, False)
    unverified = build_ssl_context(FailoverOptions(tls_verify=False))
    assert (unverified.verify_mode, unverified.check_hostname) == (ssl.CERT_NONE, False)


def test_tls_client_certificate_with_encrypted_key(ca: trustme.CA, tmp_path: Path) -> None:

    cert = ca.issue_cert("client@example.test")
    cert_file, key_file = tmp_path / "client.pem", tmp_path / "client.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), password=None)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-s3cret"),
        )
    )
    options = FailoverOptions(
        tls_cert_file=str(cert_file), tls_key_file=str(key_file), tls_key_password="key-s3cret"
    )
    assert build_ssl_context(options).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigurationError) as info:
        build_ssl_context(options.replace(tls_key_password="wrong-pw"))
    assert "wrong-pw" not in str(info.value)
    assert "tls_key_password" in str(info.value)


def test_tls_bad_files_are_configuration_errors(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(ConfigurationError, match="tls_ca_file"):
        build_ssl_context(FailoverOptions(tls_ca_file=missing))
    with pytest.raises(ConfigurationError, match="tls_cert_file is not"):
        build_ssl_context(FailoverOptions(tls_key_file=missing))
