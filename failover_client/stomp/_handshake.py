"""Opening a STOMP session: dial, CONNECT, and accept the broker's CONNECTED, within a deadline.

stomp.py's ``connect(wait=True)`` blocks for good on a hung broker that accepted the TCP
connection into its backlog; here one deadline bounds the dial (resolution, TCP connect, TLS
handshake, see ``_transport``) and the wait for CONNECTED, and a cancel token cuts any of them
short from another thread with :class:`~failover_client.ConnectCancelled`.

CONNECT goes out as soon as the socket is up, before stomp.py's I/O thread starts, and the
writer and watchdog are set up while the broker works on it. CONNECTED is accepted when it
names a supported version and a well-formed heart-beat; it arms the watchdog and decides
whether confirmed sends are group-committed (``_batch``). A failure anywhere releases every
socket and thread before :meth:`Handshake.run` raises.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from stomp.utils import Frame

from failover_client._errors import (
    BrokerUnavailable,
    ConnectCancelled,
    ConnectionFailure,
    ProtocolViolation,
)
from failover_client._lazy import lean_thread
from failover_client.adapter import Cancel
from failover_client.stomp._batch import ConfirmMode, GroupCommit, batching_supported
from failover_client.stomp._encode import encode_frame
from failover_client.stomp._errors import transport_error
from failover_client.stomp._flow import broker_kind
from failover_client.stomp._frames import SUPPORTED_VERSIONS, connect_headers
from failover_client.stomp._heartbeat import (
    HeartbeatMonitor,
    HeartbeatState,
    negotiate,
    request_header,
)
from failover_client.stomp._inbound import FrameEvents
from failover_client.stomp._loopread import LoopReader, ReadLoop
from failover_client.stomp._outbound import Outbound
from failover_client.stomp._state import SessionState
from failover_client.stomp._teardown import release
from failover_client.stomp._transport import DEFAULT_MAX_FRAME_SIZE, BoundTransport

__all__ = ["ConnectSettings", "Handshake"]

_COMMIT_PREFIX = "fx-"
"""Transaction and COMMIT receipt ids (the receipt book's own ids start ``fc-``)."""


@dataclass(frozen=True, slots=True)
class ConnectSettings:
    """How one session connects: what CONNECT says, TLS, and how sends are confirmed."""

    login: str | None
    passcode: str | None
    heartbeat: tuple[int, int]
    """Wanted (send, receive) heart-beat milliseconds."""
    grace: float
    """Receive intervals of silence before the broker is presumed hung."""
    client_id: str | None
    ssl_context: ssl.SSLContext | None
    transport_factory: Callable[..., BoundTransport]
    confirm_mode: ConfirmMode
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    """Bytes of one inbound frame at most; a larger one ends the session."""
    read_loop: Callable[[], ReadLoop | None] | None = None
    """The event loop that reads a plain TCP session instead of an I/O thread (``_loopread``),
    asked when the session starts; None (or a None answer): a thread reads it."""

    def __repr__(self) -> str:
        return (
            f"ConnectSettings(login={self.login!r}, heartbeat={self.heartbeat}, "
            f"client_id={self.client_id!r}, tls={self.ssl_context is not None}, "
            f"confirm_mode={self.confirm_mode}, max_frame_size={self.max_frame_size})"
        )


class Handshake:
    """Opens one session once (the connecting thread; CONNECTED arrives on the I/O thread)."""

    __slots__ = ("_connect_written", "_inbound", "_outbound", "_settings", "_state")

    def __init__(
        self,
        state: SessionState,
        settings: ConnectSettings,
        *,
        inbound: FrameEvents,
        outbound: Outbound,
    ) -> None:
        self._state = state
        self._settings = settings
        self._inbound = inbound
        self._outbound = outbound
        self._connect_written = False
        """Whether CONNECT went out (written before the I/O thread starts, see there)."""

    def run(self, timeout: float, cancel: Cancel) -> None:
        """Connect and handshake within ``timeout``; on failure release everything and raise.

        ``cancel`` cuts any step short with :class:`ConnectCancelled`.
        """
        state = self._state
        if cancel.cancelled:
            raise ConnectCancelled("connect cancelled before it started", broker=state.broker)
        deadline = state.clock.monotonic() + timeout
        address = state.address
        tls = self._settings.ssl_context
        transport = self._settings.transport_factory(
            address.host,
            address.port,
            deadline=deadline,
            clock=state.clock,
            ssl_context=tls,
            server_hostname=address.host if tls is not None else None,
            on_bytes=self._inbound.on_bytes,
            on_bad_frame=self._inbound.on_bad_frame,
            max_frame_size=self._settings.max_frame_size,
            on_frame_too_large=self._inbound.on_frame_too_large,
            on_frames_done=self._inbound.on_frames_done,
        )
        transport.override_threading(self._start_io_thread)
        transport.set_listener("failover-client", self._inbound)
        # No stomp.py protocol object: frames are encoded by ``_encode``, DISCONNECT goes
        # through the transport's ``transmit`` (see ``_teardown``), and the heart-beats are
        # ``_heartbeat``'s. (One, even with its beats off, kept an event, a condition and a
        # listener per connection, about 1.5 KiB, for nothing.)
        state.transport = transport

        def cancelled() -> None:
            # On the cancelling thread: fail the wait for CONNECTED with this error (unless a
            # real one came first), and wake a TCP connect or TLS handshake under way.
            with state.lock:
                if state.phase != "connecting":
                    return
                if state.handshake_error is None:
                    state.handshake_error = ConnectCancelled(
                        "connect cancelled during the STOMP handshake", broker=state.broker
                    )
            state.handshake_done.set()
            transport.interrupt()

        forget = cancel.add_callback(cancelled)
        try:
            try:
                transport.start()
            except Exception as exc:
                transport.close_unstarted()
                if cancel.cancelled:
                    raise ConnectCancelled(
                        f"connect cancelled during {transport.stage}", broker=state.broker
                    ) from exc
                raise transport_error(exc, broker=state.broker, during=transport.stage) from exc
            try:
                self._await_connected(transport, deadline, timeout)
            except BaseException:
                release(state)
                raise
        finally:
            forget()

    def _connect_frame(self) -> Frame:
        settings = self._settings
        address = self._state.address
        return Frame(
            "CONNECT",
            connect_headers(
                host=address.param("vhost") or address.host,
                login=settings.login,
                passcode=settings.passcode,
                heart_beat=request_header(settings.heartbeat),
                client_id=settings.client_id,
            ),
        )

    def _write_connect(self, transport: BoundTransport) -> None:
        with self._state.write_lock:
            transport.write_quietly(self._connect_frame())
        self._connect_written = True

    def _start_io_thread(self, target: Callable[[], None]) -> threading.Thread | LoopReader:
        # stomp.py asks for the thread once the connection (and TLS handshake) is up: CONNECT
        # goes out first, so the broker already works on it while this thread starts.
        transport = self._state.bound_transport()
        transport.stage = "CONNECT"
        self._write_connect(transport)
        key = self._state.address.key
        reader = self._loop_reader(transport, f"stomp-loop-read {key}")
        if reader is not None:
            return reader
        thread = lean_thread(target, f"stomp-io {key}")
        thread.start()
        return thread

    def _loop_reader(self, transport: BoundTransport, name: str) -> LoopReader | None:
        """A started reader on the settings' event loop, or None when a thread must read:
        TLS (see ``_loopread``), no loop, or the loop's own thread connecting (it would wait
        for a CONNECTED only it can read)."""
        ask = self._settings.read_loop
        where = ask() if ask is not None and transport.blocking else None
        if where is None or where[1] == threading.get_ident():
            return None
        reader = LoopReader(transport, where, name)
        try:
            reader.start()
        except RuntimeError:  # the loop closed meanwhile: nobody awaits this session anyway
            transport.recv_flags = 0
            return None
        return reader

    def _await_connected(self, transport: BoundTransport, deadline: float, timeout: float) -> None:
        state = self._state
        key = state.address.key
        if not self._connect_written:
            # A transport that never asked for an I/O thread (a test's scripted one).
            try:
                self._write_connect(transport)
            except Exception as exc:
                raise transport_error(exc, broker=state.broker, during="CONNECT") from exc
        # The broker takes milliseconds to answer CONNECT: set up the writer and the watchdog
        # meanwhile, not after CONNECTED, where it would delay the first send. Nothing is
        # written through the writer before "open"; the watchdog is scheduled once armed.
        writer = self._outbound.start_writer(transport, f"stomp-writer {key}")
        if any(self._settings.heartbeat):
            state.monitor = HeartbeatMonitor(
                None,
                state.clock,
                send_beat=self._outbound.beat,
                on_silence=self._inbound.on_silence,
                name=f"stomp-heartbeat {key}",
            )
            state.monitor.start()
        remaining = max(0.0, deadline - state.clock.monotonic())
        if not state.clock.wait(state.handshake_done, remaining):
            raise BrokerUnavailable(
                f"no CONNECTED frame within {timeout:g} s (broker hung, overloaded, or not a "
                "STOMP endpoint)",
                broker=state.broker,
            )
        with state.lock:
            error = state.handshake_error
            headers = state.connected_headers
            if error is None and headers is not None:
                error = self._accept_connected(headers)
            if error is None:
                # Under the lock: a loss from now on sees "open" (and aborts the transport,
                # which also ends the writer); one seen before fails the handshake.
                # Group commit needs the writer (it renders at write time); TLS has none.
                state.group = self._group_for(headers or {}) if writer else None
                state.phase = "open"
        if error is not None:
            raise error

    def _accept_connected(self, headers: Mapping[str, str]) -> ConnectionFailure | None:
        """Check CONNECTED's version and heart-beat header and arm the watchdog (under lock)."""
        state = self._state
        version = headers.get("version", "1.0")
        if version not in SUPPORTED_VERSIONS:
            return ProtocolViolation(
                f"broker chose STOMP {version}; this client needs one of "
                f"{', '.join(SUPPORTED_VERSIONS)}",
                broker=state.broker,
            )
        settings = self._settings
        try:
            plan = negotiate(settings.heartbeat, headers.get("heart-beat"), settings.grace)
        except ValueError as exc:
            return ProtocolViolation(f"CONNECTED frame: {exc}", broker=state.broker)
        state.version = version
        state.broker_kind = broker_kind(headers.get("server"))
        state.heartbeat = HeartbeatState(plan, state.clock.monotonic())
        if state.monitor is not None:
            state.monitor.arm(state.heartbeat)  # schedules nothing when nothing is watched
        return None

    def _group_for(self, headers: Mapping[str, str]) -> GroupCommit | None:
        """The group commit for this broker, or None when sends keep one receipt each."""
        if not batching_supported(self._settings.confirm_mode, headers):
            return None
        return GroupCommit(encode_frame, prefix=_COMMIT_PREFIX)
