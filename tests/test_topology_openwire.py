"""The OpenWire control channel and the ``openwire`` source, against a scripted loopback broker.

:class:`Peer` is a small OpenWire server built on the library's own codec: it sends a broker's
WireFormatInfo (the bytes ActiveMQ 5.17.2 sends), answers the ConnectionInfo as told, and lets
a test push ConnectionControl frames, keep-alives or garbage. Sockets are real (loopback);
time is a FakeClock, so keep-alives, inactivity, timeouts and back-offs happen when the test
moves time. Real-time waits are only safety nets (``SAFETY``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import trustme
from failover_client.uri import BrokerAddress, FailoverOptions, ServerListAction

from failover_client import (
    AuthenticationFailed,
    BrokerRefused,
    BrokerUnavailable,
    ConfigurationError,
    ConnectCancelled,
    Connected,
    Event,
    FailoverConnection,
    ProtocolViolation,
    TLSFailure,
    TopologyChanged,
)
from failover_client.net._tls import build_ssl_context
from failover_client.openwire import (
    CodecError,
    ConnectionControl,
    ConnectionInfo,
    ControlChannel,
    ExceptionResponse,
    FrameReader,
    KeepAliveInfo,
    RemoteException,
    Response,
    ShutdownInfo,
    WireFormatInfo,
    decode_command,
    encode_command,
    frame,
)
from failover_client.testing import FakeClock, FakeConnector
from failover_client.topology import (
    BaseSink,
    OpenWireSource,
    TopologySource,
    topology_source_factory,
)
from failover_client.topology._openwire import parse_connected_brokers
from tests.test_openwire_codec import BROKER_WFI_HEX

SAFETY = 5.0  # real seconds, only against a hung test
HOST = "127.0.0.1"
SECRET = "s3cr&t-pass"
BROKER_WFI = decode_command(bytes.fromhex(BROKER_WFI_HEX))
assert isinstance(BROKER_WFI, WireFormatInfo)
FAST_WFI = WireFormatInfo(
    12, {"MaxInactivityDuration": 3000, "MaxInactivityDurationInitalDelay": 0}
)


class PeerConn:
    """One accepted connection, seen from the broker's side; records what the client sent."""

    def __init__(self, peer: Peer, sock: socket.socket) -> None:
        self.peer = peer
        self.sock = sock
        self.cond = threading.Condition()
        self.received: list[object] = []
        self.closed = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        frames = FrameReader()
        try:
            # A broker sends its WireFormatInfo as soon as it accepted the connection. Sent
            # from this thread, like every automatic answer, so a TLS socket is only ever
            # used by one thread in the TLS tests (which send nothing themselves).
            if self.peer.wfi is not None:
                self.send(self.peer.wfi)
            while chunk := self.sock.recv(65536):
                for body in frames.feed(chunk):
                    command = decode_command(body)
                    with self.cond:
                        self.received.append(command)
                        self.cond.notify_all()
                    if isinstance(command, ConnectionInfo):
                        self.peer.answer(self, command)
        except OSError:
            pass  # the test closed this side
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def send(self, *commands: Any) -> None:
        self.sock.sendall(b"".join(frame(encode_command(c)) for c in commands))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def wait_for(self, kind: type, predicate: Callable[[Any], bool] = lambda _: True) -> Any:
        def found() -> Any:
            return next((c for c in self.received if isinstance(c, kind) and predicate(c)), None)

        with self.cond:
            assert self.cond.wait_for(lambda: found() is not None, SAFETY), self.received
            return found()

    def wait_closed(self) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.closed, SAFETY), "the client kept it open"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(SAFETY)


class Peer:
    """A scripted OpenWire broker on a loopback port.

    ``answer``: ``accept`` (a Response, then ``control`` if given), ``security`` / ``other``
    (an ExceptionResponse), ``silent`` (nothing). ``wfi``: the WireFormatInfo sent on accept
    (None: send nothing).
    """

    def __init__(
        self,
        *,
        answer: str = "accept",
        wfi: WireFormatInfo | None = BROKER_WFI,
        control: ConnectionControl | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.answer_with = answer
        self.wfi = wfi
        self.control = control
        self.tls = tls
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.cond = threading.Condition()
        self.conns: list[PeerConn] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            if self.tls is not None:
                try:
                    sock = self.tls.wrap_socket(sock, server_side=True)
                except (OSError, ssl.SSLError):
                    sock.close()  # the client refused our certificate
                    continue
            conn = PeerConn(self, sock)
            with self.cond:
                self.conns.append(conn)
                self.cond.notify_all()

    def answer(self, conn: PeerConn, info: ConnectionInfo) -> None:
        if self.answer_with == "accept":
            conn.send(Response(0, info.command_id))
            if self.control is not None:
                conn.send(self.control)
        elif self.answer_with in ("security", "other"):
            kind = "java.lang.SecurityException" if self.answer_with == "security" else "X"
            # A broker that echoes the password must not make it show anywhere.
            error = RemoteException(kind, f"User name [{info.user_name}] / {info.password} bad")
            conn.send(ExceptionResponse(0, info.command_id, error))

    def conn(self, index: int) -> PeerConn:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.conns) > index, SAFETY), "no connection"
            return self.conns[index]

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *_: object) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.listener.close()
        self._thread.join(SAFETY)
        for conn in self.conns:
            conn.close()


def channel(port: int, clock: FakeClock, **kwargs: Any) -> ControlChannel:
    options: dict[str, Any] = {
        "clock": clock,
        "on_control": lambda _: None,
        "connection_id": "ID:test-1",
        "client_id": "test-client",
    }
    options.update(kwargs)
    return ControlChannel(HOST, port, **options)


class Served:
    """Runs ``serve()`` on a thread and keeps what it returned."""

    def __init__(self, ch: ControlChannel) -> None:
        self.result: list[BaseException | None] = []
        self.thread = threading.Thread(target=lambda: self.result.append(ch.serve()))
        self.thread.start()

    def outcome(self) -> BaseException | None:
        self.thread.join(SAFETY)
        assert not self.thread.is_alive(), "serve() did not end"
        return self.result[0]


def free_port() -> int:
    with socket.create_server((HOST, 0)) as sock:
        port: int = sock.getsockname()[1]
    return port  # nothing listens there now: a connect is refused


# --- the control channel -----------------------------------------------------------------------


def test_the_channel_opens_as_a_manageable_fault_tolerant_connection_and_hears_pushes() -> None:
    clock = FakeClock()
    heard: list[ConnectionControl] = []
    pushed = ConnectionControl(connected_brokers="tcp://a:1", rebalance_connection=True)
    with Peer(control=pushed) as peer:
        ch = channel(peer.port, clock, on_control=heard.append, login="app", passcode=SECRET)
        negotiated = ch.open()
        assert (negotiated.version, negotiated.max_inactivity, negotiated.initial_delay) == (
            12,
            30.0,
            10.0,
        )
        conn = peer.conn(0)
        offer = conn.wait_for(WireFormatInfo)
        assert offer.properties["TightEncodingEnabled"] is False
        assert offer.properties["MaxInactivityDuration"] == 30000
        info = conn.wait_for(ConnectionInfo)
        assert (info.manageable, info.fault_tolerant, info.failover_reconnect) == (
            True,
            True,
            False,
        )
        assert (info.client_id, info.connection_id) == ("test-client", "ID:test-1")
        assert (info.user_name, info.password) == ("app", SECRET)
        assert conn.received.index(offer) < conn.received.index(info)
        served = Served(ch)
        conn.send(ConnectionControl(connected_brokers="tcp://b:2"))
        conn.send(KeepAliveInfo(77, response_required=True))
        assert conn.wait_for(KeepAliveInfo, lambda k: k.command_id == 77) == KeepAliveInfo(77)
        assert [c.connected_brokers for c in heard] == ["tcp://a:1", "tcp://b:2"]
        assert "open" in repr(ch)
        assert SECRET not in repr(ch)
        ch.close()
        assert served.outcome() is None
        conn.wait_for(ShutdownInfo)  # a polite goodbye, as the Java client says it
        conn.wait_closed()
        assert "closed" in repr(ch)
        with pytest.raises(RuntimeError, match="already opened"):
            ch.open()


def test_keep_alives_follow_the_negotiated_inactivity_and_silence_ends_the_channel() -> None:
    clock = FakeClock()
    with Peer(wfi=FAST_WFI) as peer:
        ch = channel(peer.port, clock, max_inactivity=30.0)
        assert ch.open().max_inactivity == 3.0  # the lower of the two
        conn = peer.conn(0)
        served = Served(ch)
        for second in (1.0, 2.0):
            assert clock.wait_for_deadline(second)
            clock.advance(1.0)
            conn.wait_for(KeepAliveInfo, lambda k, n=second: k.command_id == 1 + int(n))
        assert clock.wait_for_deadline(3.0)
        clock.advance(1.0)
        error = served.outcome()
        assert isinstance(error, BrokerUnavailable)
        assert "nothing heard for 3.0s (max inactivity 3s)" in str(error)
        conn.wait_closed()


def test_bytes_from_the_broker_keep_the_channel_alive() -> None:
    clock = FakeClock()
    with Peer(wfi=FAST_WFI) as peer:
        ch = channel(peer.port, clock)
        ch.open()
        conn = peer.conn(0)
        served = Served(ch)
        for second in range(1, 7):  # twice the inactivity limit
            assert clock.wait_for_deadline(float(second))
            clock.advance(1.0)
            conn.wait_for(KeepAliveInfo, lambda k, n=second: k.command_id == 1 + n)  # ours
            conn.send(KeepAliveInfo(100 + second, response_required=True))  # the broker's
            conn.wait_for(KeepAliveInfo, lambda k, n=second: k.command_id == 100 + n)
        assert not served.result
        ch.close()
        assert served.outcome() is None


def test_a_refused_login_is_authentication_failed_without_the_password() -> None:
    with Peer(answer="security") as peer:
        ch = channel(peer.port, FakeClock(), login="app", passcode=SECRET)
        with pytest.raises(AuthenticationFailed) as info:
            ch.open()
        text = str(info.value)
        assert "refused the control channel's login 'app'" in text
        assert "User name [app] / *** bad" in text
        assert SECRET not in text
        assert ch.ended
        peer.conn(0).wait_closed()


def test_another_refusal_is_broker_refused() -> None:
    with (
        Peer(answer="other") as peer,
        pytest.raises(BrokerRefused, match="refused the control channel: X: User name"),
    ):
        channel(peer.port, FakeClock()).open()


def test_a_closed_port_is_broker_unavailable_caused_by_the_refusal() -> None:
    with pytest.raises(BrokerUnavailable, match="connection refused during TCP connect") as info:
        channel(free_port(), FakeClock()).open()
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_a_silent_broker_times_the_open_out_on_the_clock() -> None:
    clock = FakeClock()
    with Peer(wfi=None) as peer:
        ch = channel(peer.port, clock, connect_timeout=2.0)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ch.open()
            except BrokerUnavailable as exc:
                errors.append(exc)

        opener = threading.Thread(target=run)
        opener.start()
        assert clock.wait_for_deadline(2.0)
        clock.advance(2.0)
        opener.join(SAFETY)
        assert "no answer during WireFormatInfo exchange within 2s" in str(errors[0])
        peer.conn(0).wait_closed()


def test_close_from_another_thread_cancels_an_open() -> None:
    clock = FakeClock()
    with Peer(answer="silent") as peer:
        ch = channel(peer.port, clock)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ch.open()
            except ConnectCancelled as exc:
                errors.append(exc)

        opener = threading.Thread(target=run)
        opener.start()
        peer.conn(0).wait_for(ConnectionInfo)
        ch.close()
        opener.join(SAFETY)
        assert len(errors) == 1
        peer.conn(0).wait_closed()
        ch.close()  # idempotent


@pytest.mark.parametrize(
    ("first", "words"),
    [
        (frame(encode_command(KeepAliveInfo())), "expected the broker's WireFormatInfo first"),
        (frame(encode_command(WireFormatInfo(5))), "speaks OpenWire 5; cluster updates need 6"),
        (frame(b"\x01ActiveMX" + bytes(9)), "'magic' at offset 1"),
        (b"\x7f\xff\xff\xff", "exceeds the limit of 1048576 bytes"),
    ],
)
def test_a_broker_that_does_not_speak_openwire_is_a_protocol_violation(
    first: bytes, words: str
) -> None:
    with Peer(wfi=None) as peer:
        ch = channel(peer.port, FakeClock())
        errors: list[BaseException] = []

        def run() -> None:
            try:
                ch.open()
            except ProtocolViolation as exc:
                errors.append(exc)

        opener = threading.Thread(target=run)
        opener.start()
        peer.conn(0).send_raw(first)
        opener.join(SAFETY)
        assert words in str(errors[0])


@pytest.mark.parametrize(
    ("hostile", "kind", "words"),
    [
        (b"\x00\x20\x00\x00", CodecError, "a frame of 2097152 bytes exceeds the limit"),
        (frame(b"\x12\x00\x00"), CodecError, "ConnectionControl field 'commandId'"),
        (frame(encode_command(ShutdownInfo())), BrokerUnavailable, "shutting down"),
    ],
)
def test_a_hostile_or_final_frame_ends_the_open_channel(
    hostile: bytes, kind: type[BaseException], words: str
) -> None:
    with Peer() as peer:
        ch = channel(peer.port, FakeClock())
        ch.open()
        served = Served(ch)
        peer.conn(0).send_raw(hostile)
        error = served.outcome()
        assert isinstance(error, kind)
        assert words in str(error)
        peer.conn(0).wait_closed()


def test_a_failing_handler_does_not_end_the_channel(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[ConnectionControl] = []

    def handler(control: ConnectionControl) -> None:
        calls.append(control)
        raise RuntimeError("handler bug")

    with Peer(control=ConnectionControl(connected_brokers="x")) as peer:
        ch = channel(peer.port, FakeClock(), on_control=handler)
        ch.open()
        conn = peer.conn(0)
        conn.send(KeepAliveInfo(5, response_required=True))
        conn.wait_for(KeepAliveInfo, lambda k: k.command_id == 5)  # still answering
        assert len(calls) == 1
        assert "ConnectionControl handler failed" in caplog.text
        ch.close()


# --- the source ----------------------------------------------------------------------------


class Sink(BaseSink):
    """A plain sink: records pushes and rebalance requests."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[tuple[tuple[str, ...], str, ServerListAction | None, bool]] = []
        self.rebalances: list[str] = []
        self.failures: list[tuple[str, int, float | None]] = []

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append((error, failures, retry_in))

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append((tuple(str(a) for a in update), source, action, pushed))
            self.cond.notify_all()

    def request_rebalance(self, *, source: str) -> None:
        with self.cond:
            self.rebalances.append(source)
            self.cond.notify_all()


def to_stomp(scheme: str, host: str, port: int) -> BrokerAddress | None:
    """The harness's kind of scheme_map: an OpenWire port maps to its broker's STOMP port."""
    return BrokerAddress("stomp", host, port + 1000) if scheme == "tcp" else None


def started(source: OpenWireSource, sink: object) -> OpenWireSource:
    source.start(sink)  # type: ignore[arg-type]
    return source


def test_a_push_becomes_one_replace_list_and_a_rebalance_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    sink = Sink()
    brokers = "stomp://a:61613?x=1, tcp://127.0.0.1:5000 ,udp://bad:1,,stomp://a:61613,tcp://c:0"
    with Peer(
        control=ConnectionControl(connected_brokers=brokers, rebalance_connection=True)
    ) as peer:
        source = OpenWireSource(
            [BrokerAddress("tcp", HOST, peer.port)], scheme_map=to_stomp, clock=clock
        )
        started(source, sink)
        try:
            assert source.wait_until(lambda s: s.pushes == 1, SAFETY)
            assert sink.updates == [
                (("stomp://a:61613", "stomp://127.0.0.1:6000"), "openwire", "replace", True)
            ]
            assert sink.rebalances == ["openwire"]
            assert "skipped 2 of the brokers" in caplog.text
            assert "'udp://bad:1'" in caplog.text
            assert "'tcp://c:0'" in caplog.text
            # An empty list is "no cluster information": nothing is pushed, nothing requested.
            peer.conn(0).send(ConnectionControl(connected_brokers="", rebalance_connection=True))
            assert source.wait_until(lambda s: s.controls == 2, SAFETY)
            assert (len(sink.updates), sink.rebalances) == (1, ["openwire"])
        finally:
            source.stop()
        peer.conn(0).wait_closed()
        source.stop()  # idempotent


def test_a_hostile_frame_closes_only_the_control_channel_and_it_reopens_later() -> None:
    clock = FakeClock()
    sink = Sink()
    with Peer(control=ConnectionControl(connected_brokers="stomp://a:1")) as peer:
        source = started(OpenWireSource([BrokerAddress("tcp", HOST, peer.port)], clock=clock), sink)
        try:
            assert source.wait_until(lambda s: s.pushes == 1, SAFETY)
            peer.conn(0).send_raw(b"\x7f\x00\x00\x00")  # a 2 GiB frame announced
            assert source.wait_until(lambda s: isinstance(s.last_error, CodecError), SAFETY)
            peer.conn(0).wait_closed()
            assert clock.wait_for_deadline(0.5)  # the back-off, on the clock: no busy loop
            clock.advance(0.5)
            peer.conn(1).wait_for(ConnectionInfo)
            assert source.wait_until(lambda s: s.pushes == 2, SAFETY)
            assert peer.conn(1).wait_for(ConnectionInfo).failover_reconnect is True
            assert [u[0] for u in sink.updates] == [("stomp://a:1",), ("stomp://a:1",)]
        finally:
            source.stop()


def test_a_broker_without_an_openwire_listener_is_logged_once_and_retried_with_back_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "failover_client.topology")
    clock = FakeClock()
    dead = free_port()
    source = OpenWireSource(
        [BrokerAddress("tcp", HOST, dead)], clock=clock, min_backoff=0.5, max_backoff=2.0
    )
    sink = Sink()
    started(source, sink)
    try:
        for wait in (0.5, 1.0, 2.0, 2.0, 2.0):  # doubling, capped: never a busy loop
            assert clock.wait_for_deadline(clock.monotonic() + wait), clock.deadlines()
            clock.advance(wait)
        assert isinstance(source.last_error, BrokerUnavailable)
        refusals = [r for r in caplog.records if f"{HOST}:{dead}" in r.getMessage()]
        assert len([r for r in refusals if r.levelno >= logging.WARNING]) == 1
    finally:
        source.stop()
    # Each failed pass is told to the sink (a connection emits TopologySourceFailed).
    assert [(n, retry) for _, n, retry in sink.failures[:5]] == [
        (1, 0.5),
        (2, 1.0),
        (3, 2.0),
        (4, 2.0),
        (5, 2.0),
    ]
    assert sink.failures[0][0].startswith("BrokerUnavailable")


def test_members_are_tried_in_order_within_a_pass() -> None:
    clock = FakeClock()
    with Peer(control=ConnectionControl(connected_brokers="stomp://a:1")) as peer:
        members = f"failover:(tcp://{HOST}:{free_port()},tcp://{HOST}:{peer.port})"
        source = started(OpenWireSource(members, clock=clock), Sink())
        try:
            assert source.wait_until(lambda s: s.pushes == 1, SAFETY)  # no clock advance
            assert isinstance(source.last_error, BrokerUnavailable)
            assert source.opened == 1
        finally:
            source.stop()


class FollowSink(Sink):
    """Like the sink a connection gives its sources: listeners and the current broker."""

    follows_connection = True

    def __init__(self, members: Iterable[BrokerAddress]) -> None:
        super().__init__()
        self.members = tuple(members)
        self.listeners: list[Callable[[Event], None]] = []
        self.broker: BrokerAddress | None = None
        self.client_id = "app-1"

    def current_broker(self) -> BrokerAddress | None:
        return self.broker

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Callable[[Event], None]) -> None:
        self.listeners.remove(listener)

    def connect_to(self, address: BrokerAddress) -> None:
        self.broker = address
        for listener in self.listeners:
            listener(Connected(str(address), 1, 0.0))


def test_the_control_channel_follows_the_data_connection() -> None:
    clock = FakeClock()
    a, b = BrokerAddress("stomp", HOST, 7001), BrokerAddress("stomp", HOST, 7002)
    control = ConnectionControl(connected_brokers="tcp://127.0.0.1:6001,stomp://x:1")
    with Peer(control=control) as peer_a, Peer(control=control) as peer_b:
        sink = FollowSink([a, b])
        ports = {a.key: peer_a.port, b.key: peer_b.port}
        source = OpenWireSource(openwire_port=ports, scheme_map=to_stomp, clock=clock)
        started(source, sink)
        try:
            assert source.wait_until(lambda s: s.opened == 0, SAFETY)
            sink.connect_to(a)
            info = peer_a.conn(0).wait_for(ConnectionInfo)
            assert info.client_id is not None
            assert info.client_id.startswith("app-1:openwire-")
            assert source.wait_until(lambda s: s.pushes == 1, SAFETY)
            assert sink.updates[0][0] == ("stomp://127.0.0.1:7001", "stomp://x:1")

            sink.connect_to(b)  # the data connection moved: so does the control channel
            peer_a.conn(0).wait_closed()
            peer_b.conn(0).wait_for(ConnectionInfo)
            assert source.wait_until(lambda s: s.pushes == 2, SAFETY)
            assert f"channel=tcp://{HOST}:{peer_b.port}" in repr(source)
        finally:
            source.stop()
        assert sink.listeners == []


def test_a_data_broker_without_a_known_openwire_port_gets_no_channel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = FollowSink([BrokerAddress("stomp", HOST, 7001)])
    source = started(OpenWireSource(openwire_port={}, clock=FakeClock()), sink)
    try:
        sink.connect_to(sink.members[0])
        assert "no OpenWire endpoint known for 127.0.0.1:7001" in caplog.text
        assert source.opened == 0
    finally:
        source.stop()


def test_a_real_connection_learns_the_pushed_brokers_and_keeps_seeds_and_other_sources() -> None:
    clock = FakeClock()
    seed = BrokerAddress("stomp", HOST, 61613)
    push = ConnectionControl(connected_brokers="stomp://b:61613,stomp://c:61613")
    events: list[Event] = []
    with Peer(control=push) as peer:
        source = OpenWireSource(openwire_port={seed.key: peer.port}, clock=clock)
        conn = FailoverConnection(
            f"failover:({seed})",
            connector=FakeConnector(clock=clock),
            clock=clock,
            listeners=[events.append],
            topology=[source],
        )
        conn.connect()
        try:
            conn.update_brokers([BrokerAddress("stomp", "d", 61613)], source="file")
            assert source.wait_until(lambda s: s.pushes == 1, SAFETY)
            keys = [s.address.key for s in conn.pool.states()]
            assert keys == [seed.key, "d:61613", "b:61613", "c:61613"]
            peer.conn(0).send(ConnectionControl(connected_brokers="stomp://c:61613"))
            assert source.wait_until(lambda s: s.pushes == 2, SAFETY)
            assert [s.address.key for s in conn.pool.states()] == [seed.key, "d:61613", "c:61613"]
        finally:
            conn.close()
        peer.conn(0).wait_closed()
    changes = [e for e in events if isinstance(e, TopologyChanged) and e.source == "openwire"]
    assert [c.removed for c in changes] == [(), ("stomp://b:61613",)]


def test_the_source_is_registered_and_shows_no_secret() -> None:
    assert topology_source_factory("openwire") is OpenWireSource
    source = OpenWireSource("tcp://u:p@h:61616", login="app", passcode=SECRET)
    assert isinstance(source, TopologySource)
    text = repr(source)
    assert SECRET not in text
    assert "new" in text
    source.stop()  # never started: fine, and idempotent
    source.stop()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"openwire_port": 0}, "openwire_port 0 is not a port"),
        ({"openwire_port": {"h:1": 70000}}, r"openwire_port\['h:1'\] 70000 is not a port"),
        ({"connect_timeout": 0}, "connect_timeout must be > 0"),
        ({"min_backoff": 5.0, "max_backoff": 1.0}, "max_backoff must be >= min_backoff"),
        ({"name": ""}, "name must be a name"),
    ],
)
def test_bad_settings_are_configuration_errors(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        OpenWireSource(**kwargs)


def test_a_sink_to_connect_for_is_needed() -> None:
    with pytest.raises(ConfigurationError, match="no members, and the sink is not a connection"):
        OpenWireSource().start(Sink())


def test_connected_brokers_are_parsed_in_order_once_each() -> None:
    brokers, skipped = parse_connected_brokers(
        " stomp://b:1?k=v,stomp://a:2,stomp://b:1,ftp://x:3,", "stomp", None
    )
    assert [str(b) for b in brokers] == ["stomp://b:1", "stomp://a:2"]
    assert len(skipped) == 1
    assert "'ftp://x:3'" in skipped[0]


# --- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(HOST).configure_cert(context)
    return context


def ca_options(ca: trustme.CA, tmp_path: Path) -> FailoverOptions:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return FailoverOptions(tls_ca_file=str(ca_file))


def test_a_tls_channel_verifies_the_broker_and_hears_pushes(ca: trustme.CA, tmp_path: Path) -> None:
    heard: list[ConnectionControl] = []
    control = ConnectionControl(connected_brokers="stomp://a:1")
    with Peer(tls=server_context(ca), control=control) as peer:
        context = build_ssl_context(ca_options(ca, tmp_path))
        ch = channel(peer.port, FakeClock(), tls_context=context, on_control=heard.append)
        assert ch.open().version == 12
        assert ch.broker == f"ssl://{HOST}:{peer.port}"
        peer.conn(0).wait_for(ConnectionInfo)
        served = Served(ch)
        ch.close()
        assert served.outcome() is None


def test_a_tls_channel_refuses_a_broker_it_cannot_verify(ca: trustme.CA) -> None:
    with Peer(tls=server_context(ca)) as peer:
        context = build_ssl_context(FailoverOptions())  # the system's CAs: not our test CA
        with pytest.raises(TLSFailure, match="certificate verification failed during TLS"):
            channel(peer.port, FakeClock(), tls_context=context).open()


def test_the_source_uses_verified_tls_when_the_data_broker_does(
    ca: trustme.CA, tmp_path: Path
) -> None:
    data = BrokerAddress("stomp+ssl", HOST, 7443)
    with Peer(tls=server_context(ca), control=ConnectionControl(connected_brokers="x")) as peer:
        sink = FollowSink([data])
        sink.options = ca_options(ca, tmp_path)  # the followed connection's TLS settings
        source = started(OpenWireSource(openwire_port=peer.port, clock=FakeClock()), sink)
        try:
            sink.connect_to(data)
            assert source.wait_until(lambda s: s.opened == 1 and s.controls == 1, SAFETY)
            assert f"channel=ssl://{HOST}:{peer.port}" in repr(source)
        finally:
            source.stop()


def test_a_push_of_thousands_of_brokers_is_parsed_only_up_to_the_limit() -> None:
    text = ",".join(f"stomp://h{n}:61613" for n in range(10_000))
    brokers, skipped = parse_connected_brokers(text, "stomp", None, limit=256)
    assert len(brokers) == 256
    assert brokers[-1] == BrokerAddress("stomp", "h255", 61613)
    assert skipped == ["9744 entries past topology.maxBrokers=256"]
