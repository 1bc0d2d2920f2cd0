"""One OpenWire control connection: the broker's cluster pushes, for a client that is not Java.

ActiveMQ Classic tells only OpenWire connections about its cluster: a ``ConnectionControl``
with ``connectedBrokers`` once after a connection that says it is *manageable*, and again on
every cluster change to connections that say they are *fault tolerant* (OpenWire 6 or later).
A :class:`ControlChannel` is such a connection and nothing more: it negotiates the wire
format, sends one ConnectionInfo (manageable, fault tolerant, the credentials when given) and
then only listens, handing every ConnectionControl to ``on_control``. It never subscribes,
sends messages or creates sessions.

Life cycle, on the owner's thread: :meth:`ControlChannel.open` dials (cancellable, with TLS
when given a context), starts the reader thread, and returns once the broker answered the
ConnectionInfo with a Response, all within ``connect_timeout``; :meth:`ControlChannel.serve`
then keeps the connection alive until it ends and returns why. :meth:`ControlChannel.close`
(any thread) ends either at once.

Threads: the reader thread does every read *and* every write (a TLS socket must not be used
by two threads at once), so others queue frames and wake it through a socket pair. ``serve``
runs the timers on the owner's clock: a KeepAliveInfo every third of the negotiated
``MaxInactivityDuration`` (ActiveMQ's inactivity monitor closes a connection it has not heard
from for that long), and the end of a connection the broker has not spoken on for that long
(the broker sends its own keep-alives, so silence means a hung or vanished broker).

Errors are the project's: :class:`BrokerUnavailable` (refused, reset, timed out, closed, shut
down), :class:`AuthenticationFailed` (the ConnectionInfo refused with a security exception),
:class:`BrokerRefused` (refused for another reason), :class:`TLSFailure`,
:class:`ProtocolViolation` / :class:`CodecError` (bytes that are not OpenWire, or not the
OpenWire expected), :class:`ConnectCancelled` (closed while opening). The passcode never
appears in one, nor in a log line or repr.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import threading
from collections.abc import Callable

from failover_client._clock import Clock
from failover_client._errors import (
    BrokerRefused,
    BrokerUnavailable,
    ConfigurationError,
    ConnectCancelled,
    ConnectionFailure,
    FailoverClientError,
    ProtocolViolation,
)
from failover_client.net._dial import Resolver, SocketDial

from ._codec import decode_command, encode_command
from ._commands import (
    PROTOCOL_VERSION,
    Command,
    ConnectionControl,
    ConnectionErrorCommand,
    ConnectionInfo,
    ExceptionResponse,
    KeepAliveInfo,
    RemoteException,
    Response,
    ShutdownInfo,
    Skipped,
    WireFormatInfo,
)
from ._failures import redact, refusal, transport_failure
from ._negotiate import MIN_CLUSTER_VERSION, Negotiated, client_wire_format, negotiate
from ._wire import MAX_CONTROL_FRAME, FrameReader, frame

__all__ = ["ControlChannel", "OnControl"]

_log = logging.getLogger("failover_client.openwire")

OnControl = Callable[[ConnectionControl], None]
"""Receives each ConnectionControl, on the channel's reader thread; must not block for long."""

_CONNECTION_INFO_ID = 1
_RECV_BYTES = 65536


class ControlChannel:
    """An OpenWire connection that only listens for ConnectionControl (see the module).

    :param host: the broker's OpenWire host.
    :param port: its OpenWire port.
    :param clock: deadlines, keep-alive and inactivity timers.
    :param on_control: called with each ConnectionControl (reader thread).
    :param connection_id: OpenWire ConnectionId; unique per connection (the broker drops an
        older connection with the same id).
    :param client_id: JMS client id; unique per broker (the broker refuses a second one).
    :param login: userName of the ConnectionInfo.
    :param passcode: its password; never shown.
    :param tls_context: when given, TLS (``ssl://``) with this context.
    :param server_hostname: the name TLS verifies (default ``host``).
    :param connect_timeout: seconds for dial, wire-format exchange and ConnectionInfo answer.
    :param max_inactivity: the ``MaxInactivityDuration`` offered, in seconds (0: none).
    :param failover_reconnect: tell the broker this is a reconnect (it then does not ask this
        connection to rebalance in its first ConnectionControl).
    :param max_frame: inbound frames larger than this (bytes) end the connection.
    :param resolver: ``getaddrinfo`` for the dial.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        clock: Clock,
        on_control: OnControl,
        connection_id: str,
        client_id: str,
        login: str | None = None,
        passcode: str | None = None,
        tls_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        connect_timeout: float = 2.0,
        max_inactivity: float = 30.0,
        failover_reconnect: bool = False,
        max_frame: int = MAX_CONTROL_FRAME,
        resolver: Resolver = socket.getaddrinfo,
    ) -> None:
        if not connect_timeout > 0:
            raise ConfigurationError(f"connect_timeout must be > 0, got {connect_timeout!r}")
        if not max_inactivity >= 0:
            raise ConfigurationError(f"max_inactivity must be >= 0, got {max_inactivity!r}")
        self.host, self.port = host, port
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.broker = f"{'ssl' if tls_context else 'tcp'}://{authority}"
        self._clock = clock
        self._on_control = on_control
        self._login, self._passcode = login, passcode
        self._tls = tls_context
        self._server_hostname = server_hostname or host
        self._connect_timeout = connect_timeout
        self._max_frame = max_frame
        self._resolver = resolver
        self._offer = client_wire_format(max_inactivity=max_inactivity, max_frame=max_frame)
        self._info = ConnectionInfo(
            _CONNECTION_INFO_ID,
            connection_id,
            client_id,
            user_name=login,
            password=passcode,
            manageable=True,
            fault_tolerant=True,
            failover_reconnect=failover_reconnect,
        )
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._closing = False
        self._reason: BaseException | None = None
        self._dial: SocketDial | None = None
        self._sock: socket.socket | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._outbox: list[bytes] = []
        self._reader: threading.Thread | None = None
        self._last_read = 0.0
        self._next_id = _CONNECTION_INFO_ID + 1
        self._opened = False
        self.negotiated: Negotiated | None = None
        """The wire format spoken, once the broker's WireFormatInfo arrived."""
        self.controls = 0
        """ConnectionControl commands received."""
        self.stage = "TCP connect"
        """What the connection is doing (or failed at), for messages."""
        self._settled = threading.Event()  # open() may return: answered, failed or closed
        self._ended = threading.Event()  # the reader finished and the socket is closed

    # --- owner's side --------------------------------------------------------------------------

    def open(self) -> Negotiated:
        """Connect, negotiate and send the ConnectionInfo; return once the broker accepted it.

        Raises the errors of the module docstring. Nothing is left open when it raises.
        """
        deadline = self._clock.monotonic() + self._connect_timeout
        with self._lock:
            if self._dial is not None or self._sock is not None:
                raise RuntimeError(f"{self.broker}: already opened; open a new channel")
            if self._closing:
                raise ConnectCancelled("the control channel was closed", broker=self.broker)
            dial = self._dial = SocketDial(
                self.host,
                self.port,
                deadline=deadline,
                clock=self._clock,
                tls_context=self._tls,
                server_hostname=self._server_hostname if self._tls else None,
                resolver=self._resolver,
            )
        try:
            sock = dial.connect()
        except ConnectionAbortedError as exc:
            self._ended.set()
            raise ConnectCancelled("the control channel was closed", broker=self.broker) from exc
        except OSError as exc:
            self._ended.set()
            raise transport_failure(exc, broker=self.broker, during=dial.stage) from exc
        self._start_reader(sock)
        remaining = max(deadline - self._clock.monotonic(), 0.0)
        if not self._clock.wait(self._settled, remaining):
            self._fail(
                BrokerUnavailable(
                    f"no answer during {self.stage} within {self._connect_timeout:g}s",
                    broker=self.broker,
                )
            )
        with self._lock:
            opened, reader = self._opened, self._reader
        if opened and self.negotiated is not None:
            return self.negotiated
        if reader is not None:
            reader.join()  # ends: _fail() poked its select and it sees closing
        with self._lock:
            reason = self._reason
        if reason is None:
            raise ConnectCancelled("the control channel was closed", broker=self.broker)
        raise reason

    def _start_reader(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # an optimisation some sockets do not offer
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wake = socket.socketpair()
        for end in wake:
            end.setblocking(False)
        with self._lock:
            if self._closing:
                sock.close()
                for end in wake:
                    end.close()
                self._ended.set()
                raise ConnectCancelled("the control channel was closed", broker=self.broker)
            self._dial = None
            self._sock, self._wake = sock, wake
            self._last_read = self._clock.monotonic()
            self.stage = "WireFormatInfo exchange"
            self._outbox.append(frame(encode_command(self._offer)))
            self._reader = threading.Thread(
                target=self._reader_main,
                name=f"failover-client-openwire-{self.host}:{self.port}",
                daemon=True,
            )
            self._reader.start()

    def serve(self) -> BaseException | None:
        """Keep the opened connection alive until it ends; return why (None: :meth:`close`)."""
        negotiated = self.negotiated
        if negotiated is None or not self._opened:
            raise RuntimeError("serve() needs an opened control channel")
        period = negotiated.max_inactivity
        started = self._clock.monotonic()
        next_beat = started + period / 3
        # The broker's keep-alives begin only after the initial delay: until then, a quiet
        # broker is a broker that has not started its timer.
        quiet_until = started + negotiated.initial_delay
        while not self._ended.is_set():
            timeout = None
            if period > 0:
                now = self._clock.monotonic()
                with self._lock:
                    last = self._last_read
                allowed = period + (negotiated.initial_delay if last < quiet_until else 0.0)
                if now - last >= allowed:
                    self._fail(
                        BrokerUnavailable(
                            f"nothing heard for {now - last:.1f}s (max inactivity {period:g}s)",
                            broker=self.broker,
                        )
                    )
                    self._clock.wait(self._ended, None)
                    break
                if now >= next_beat:
                    self._send(KeepAliveInfo(self._take_id(), response_required=False))
                    next_beat = now + period / 3
                timeout = min(next_beat, last + allowed) - now
            self._clock.wait(self._ended, timeout)
        with self._lock:
            reader = self._reader
        if reader is not None:
            reader.join()  # ends: the loop above ended on closing, which stops the reader too
        with self._lock:
            return self._reason

    def close(self) -> None:
        """End the channel at once (any thread, idempotent): the dial, the wait, the reader."""
        with self._lock:
            self._closing = True
            dial, reader = self._dial, self._reader
        if dial is not None:
            dial.interrupt()
        self._poke()
        self._settled.set()
        if reader is None:
            self._ended.set()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def _fail(self, reason: BaseException) -> None:
        with self._lock:
            if self._reason is None and not self._closing:
                self._reason = reason
            self._closing = True
        self._poke()
        self._settled.set()

    def _send(self, command: Command) -> None:
        body = encode_command(
            command, self.negotiated.version if self.negotiated else PROTOCOL_VERSION
        )
        with self._lock:
            self._outbox.append(frame(body))
        self._poke()

    def _take_id(self) -> int:
        with self._lock:
            number = self._next_id
            self._next_id = number + 1 if number < 0x7FFFFFFF else _CONNECTION_INFO_ID + 1
            return number

    def _poke(self) -> None:
        with self._lock:
            wake = self._wake
            if wake is not None:
                with contextlib.suppress(OSError):  # a full pipe has already woken the reader
                    wake[1].send(b"\0")

    # --- reader thread -------------------------------------------------------------------------

    def _reader_main(self) -> None:
        reason: BaseException | None = None
        try:
            self._io_loop()
        except FailoverClientError as exc:
            reason = exc
        except OSError as exc:
            reason = transport_failure(exc, broker=self.broker, during=self.stage)
        except Exception as exc:  # noqa: BLE001 - a bug must end this channel, loudly, not hang it
            _log.exception("%s: the control channel's reader failed", self.broker)
            reason = ProtocolViolation(f"reader failed: {exc!r}", broker=self.broker)
        with self._lock:
            if self._reason is None and not self._closing:
                self._reason = reason
            self._closing = True
            sock, wake = self._sock, self._wake
            self._wake = None
        for end in (sock, *(wake or ())):
            if end is not None:
                end.close()
        self._settled.set()
        self._ended.set()

    def _io_loop(self) -> None:
        with self._lock:
            sock, wake = self._sock, self._wake
        if sock is None or wake is None:
            return
        frames = FrameReader(self._max_frame)
        pending = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(sock, selectors.EVENT_READ)
            selector.register(wake[0], selectors.EVENT_READ)
            while True:
                with self._lock:
                    if self._closing:
                        polite = self._opened and self._reason is None
                        break
                    pending += b"".join(self._outbox)
                    self._outbox.clear()
                if pending:
                    self._write(sock, pending)
                writing = selectors.EVENT_WRITE if pending else 0
                selector.modify(sock, selectors.EVENT_READ | writing)
                selector.select()
                with contextlib.suppress(BlockingIOError):
                    while wake[0].recv(64):
                        pass
                self._read(sock, frames)
        if polite:
            # Closed by its owner: say goodbye as the Java client does, so the broker drops the
            # connection at once. One non-blocking try; the socket closes whatever happens.
            goodbye = frame(encode_command(ShutdownInfo(self._take_id())))
            with contextlib.suppress(OSError):
                sock.send(goodbye)

    def _write(self, sock: socket.socket, pending: bytearray) -> None:
        while pending:
            try:
                sent = sock.send(pending)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                return
            del pending[:sent]

    def _read(self, sock: socket.socket, frames: FrameReader) -> None:
        while True:
            try:
                chunk = sock.recv(_RECV_BYTES)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            if not chunk:
                raise BrokerUnavailable(
                    f"the broker closed the control connection during {self.stage}",
                    broker=self.broker,
                )
            with self._lock:
                self._last_read = self._clock.monotonic()
            for body in frames.feed(chunk):
                self._handle(body)
                if self._closing:
                    return

    def _handle(self, body: bytes) -> None:
        negotiated = self.negotiated
        command = decode_command(
            body,
            version=negotiated.version if negotiated else PROTOCOL_VERSION,
            stack_trace=negotiated.stack_trace if negotiated else False,
        )
        if negotiated is None:
            self._negotiate(command)
        elif isinstance(command, Response) and command.correlation_id == _CONNECTION_INFO_ID:
            with self._lock:
                self._opened = True
            self.stage = "listening"
            self._settled.set()
        elif isinstance(command, ExceptionResponse):
            if command.correlation_id == _CONNECTION_INFO_ID:
                raise self._refusal(command.exception)
        elif isinstance(command, ConnectionControl):
            self.controls += 1
            try:
                self._on_control(command)
            except Exception:  # noqa: BLE001 - the owner's bug must not end the channel
                _log.exception("%s: the ConnectionControl handler failed", self.broker)
        elif isinstance(command, KeepAliveInfo):
            if command.response_required:
                reply = KeepAliveInfo(command.command_id, response_required=False)
                with self._lock:
                    self._outbox.append(frame(encode_command(reply, negotiated.version)))
        elif isinstance(command, ShutdownInfo):
            raise BrokerUnavailable("the broker is shutting down", broker=self.broker)
        elif isinstance(command, ConnectionErrorCommand):
            raise BrokerRefused(
                f"the broker reported an error: {self._redact(str(command.exception))}",
                broker=self.broker,
            )
        # Anything else (BrokerInfo, other responses, a second WireFormatInfo) is not for us.

    def _negotiate(self, command: Command | Skipped) -> None:
        if not isinstance(command, WireFormatInfo):
            kind = type(command).__name__
            detail = f"type {command.type}" if isinstance(command, Skipped) else kind
            raise ProtocolViolation(
                f"expected the broker's WireFormatInfo first, got {detail}", broker=self.broker
            )
        negotiated = negotiate(self._offer, command)
        if negotiated.version < MIN_CLUSTER_VERSION:
            raise ProtocolViolation(
                f"the broker speaks OpenWire {negotiated.version}; cluster updates need "
                f"{MIN_CLUSTER_VERSION} or later",
                broker=self.broker,
            )
        self.negotiated = negotiated
        self.stage = "ConnectionInfo"
        with self._lock:
            self._outbox.append(frame(encode_command(self._info, negotiated.version)))

    def _redact(self, text: str) -> str:
        return redact(text, self._passcode)

    def _refusal(self, error: RemoteException | None) -> ConnectionFailure:
        return refusal(error, login=self._login, passcode=self._passcode, broker=self.broker)

    def __repr__(self) -> str:
        with self._lock:
            if self._opened and not self._closing:
                state = "open"
            elif self._closing or self._ended.is_set():
                state = "closed"
            else:
                state = "new" if self._dial is None and self._sock is None else "opening"
        version = self.negotiated.version if self.negotiated else None
        return (
            f"ControlChannel({self.broker}, {state}, version={version}, "
            f"login={self._login!r}, controls={self.controls})"
        )
