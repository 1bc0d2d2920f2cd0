"""The STOMP protocol adapter: :class:`StompConnector` opens :class:`StompSession` objects.

It drives stomp.py 8/9 for framing and socket I/O, and does itself what stomp.py does not do
for a failover client:

* one TCP connect to one broker, no retries, no host reordering (``_stomp_transport``);
* a deadline over TCP connect + TLS handshake + CONNECTED (stomp.py's ``connect(wait=True)``
  blocks for good on a hung broker that accepted the TCP connection into its backlog);
* receipts for confirmed sends, many outstanding at once (``_stomp_receipts``);
* a heart-beat watchdog on the injected clock that notices a hung broker
  (``_stomp_heartbeat``);
* TLS with certificate *and* host-name verification from one prepared context
  (``_stomp_tls``);
* mapping of everything that goes wrong onto the project's errors (``_stomp_errors``).

Threads: each session has stomp.py's I/O thread (reads frames, runs the listener's
``on_message`` and the confirmation callbacks), on plain TCP a writer thread that writes the
frames queued by callers in batches (``_stomp_writer``), and, when heart-beats are
negotiated, one watchdog thread. ``close()`` ends and joins them all.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from stomp.protocol import Protocol12
from stomp.utils import Frame

from failover_client._clock import Clock, SystemClock
from failover_client._errors import (
    BrokerUnavailable,
    ConfigurationError,
    ConnectCancelled,
    ConnectionFailure,
    ProtocolViolation,
)
from failover_client.adapter import (
    Cancel,
    ConfirmCallback,
    Received,
    SessionListener,
    SubscriptionSpec,
)
from failover_client.net._tls import build_ssl_context
from failover_client.net._writer import Item, join_frames
from failover_client.stomp._batch import (
    ConfirmMode,
    GroupCommit,
    Outcome,
    PendingSend,
    batching_supported,
)
from failover_client.stomp._encode import encode_frame, escape_headers
from failover_client.stomp._errors import (
    broker_error_text,
    connect_error_from_frame,
    redact,
    send_rejection_from_frame,
    transport_error,
)
from failover_client.stomp._frames import (
    SUPPORTED_VERSIONS,
    ack_headers,
    check_handshake_bytes,
    connect_headers,
    received_from_frame,
    send_headers,
    subscribe_headers,
    unsubscribe_headers,
)
from failover_client.stomp._heartbeat import (
    DEFAULT_GRACE,
    HeartbeatMonitor,
    HeartbeatState,
    negotiate,
    request_header,
)
from failover_client.stomp._receipts import Completion, ReceiptBook, run_all
from failover_client.stomp._transport import BoundTransport
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["StompConnector", "StompSession"]

_log = logging.getLogger("failover_client.stomp")

_State = Literal["connecting", "open", "lost", "closed"]

_HANDSHAKE_SNIFF = 32
"""Bytes of the broker's first answer kept to tell a STOMP reply from junk."""

_COMMIT_PREFIX = "fx-"
"""Transaction and COMMIT receipt ids (the receipt book's own ids start ``fc-``)."""


class StompConnector:
    """Opens STOMP sessions to single brokers for the connection manager.

    :param options: the failover options; read for ``heartbeat`` and the ``tls_*`` settings.
    :param login: default STOMP login; a member URI's ``user`` overrides it.
    :param passcode: default passcode (never shown in any message or repr); a member URI's
        password overrides it, and a member that names a user without a password sends none.
    :param heartbeat: (send, receive) milliseconds; default ``options.heartbeat``. The broker is
        declared lost after ``heartbeat_grace`` receive intervals without a byte from it.
    :param clock: time source for the connect deadline and the heart-beat watchdog.
    :param client_id: sent as ``client-id`` on CONNECT; needed for durable subscriptions
        (ActiveMQ refuses a second connection with the same id while the first is alive).
    :param close_timeout: how long ``close()`` waits for the broker's DISCONNECT receipt and
        for the I/O thread to end.
    :param ssl_context: a ready client context for TLS members, instead of one built from the
        ``tls_*`` options.
    :param transport_factory: builds the stomp.py transport (takes :class:`BoundTransport`'s
        arguments); a seam for tests that script a broker without sockets.
    :param confirm_mode: how confirmed sends are confirmed; default ``options.confirm_mode``:
        ``receipt`` (one RECEIPT per SEND), ``transaction`` (group commit: the sends written
        together share one transaction and its COMMIT's receipt, see ``_stomp_batch``), or
        ``auto`` (group commit on brokers known to make it safe, ActiveMQ Classic 5.14+;
        receipts elsewhere). Group commit needs a plain TCP session; TLS sessions use receipts.

    Member parameters read from :class:`BrokerAddress`: ``vhost`` (the STOMP ``host`` header,
    RabbitMQ's virtual host; default: the member's host name).

    Raises :class:`ConfigurationError` at once for unusable TLS files or heart-beat values.
    """

    def __init__(
        self,
        options: FailoverOptions | None = None,
        *,
        login: str | None = None,
        passcode: str | None = None,
        heartbeat: tuple[int, int] | None = None,
        clock: Clock | None = None,
        client_id: str | None = None,
        close_timeout: float = 2.0,
        heartbeat_grace: float = DEFAULT_GRACE,
        ssl_context: ssl.SSLContext | None = None,
        transport_factory: Callable[..., BoundTransport] = BoundTransport,
        confirm_mode: ConfirmMode | None = None,
    ) -> None:
        self._transport_factory = transport_factory
        self._options = options if options is not None else FailoverOptions()
        self._confirm_mode: ConfirmMode = (
            confirm_mode if confirm_mode is not None else self._options.confirm_mode
        )
        if self._confirm_mode not in ("auto", "receipt", "transaction"):
            raise ConfigurationError(
                f"confirm_mode must be auto, receipt or transaction, got {self._confirm_mode!r}"
            )
        beats = heartbeat if heartbeat is not None else self._options.heartbeat
        if len(beats) != 2 or any(int(b) < 0 for b in beats):
            raise ConfigurationError(f"heartbeat must be two non-negative ms values, got {beats}")
        if heartbeat_grace < 1.0:
            raise ConfigurationError(f"heartbeat_grace must be >= 1.0, got {heartbeat_grace}")
        if close_timeout < 0:
            raise ConfigurationError(f"close_timeout must be >= 0, got {close_timeout}")
        self._heartbeat = (int(beats[0]), int(beats[1]))
        self._login = login
        self._passcode = passcode
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._client_id = client_id
        self._close_timeout = close_timeout
        self._grace = heartbeat_grace
        self._ssl_context = ssl_context
        if self._ssl_context is None and _wants_tls_files(self._options):
            # Files named in the options fail now, as configuration errors, not later as
            # "broker unavailable" on every reconnect.
            self._ssl_context = build_ssl_context(self._options)
        self._ssl_lock = threading.Lock()

    @property
    def heartbeat(self) -> tuple[int, int]:
        return self._heartbeat

    def _tls_context(self) -> ssl.SSLContext:
        with self._ssl_lock:
            if self._ssl_context is None:
                self._ssl_context = build_ssl_context(self._options)
            return self._ssl_context

    def credentials_for(self, address: BrokerAddress) -> tuple[str | None, str | None]:
        """(login, passcode) for ``address``: the member's own beat the connector's defaults."""
        if address.user is not None:
            return address.user, address.password
        return self._login, self._passcode

    def connect(
        self,
        address: BrokerAddress,
        *,
        timeout: float,
        listener: SessionListener,
        cancel: Cancel | None = None,
    ) -> StompSession:
        """Connect to ``address`` and finish the STOMP handshake within ``timeout`` seconds.

        Returns only after CONNECTED. Raises :class:`BrokerUnavailable` (refused, reset,
        timed out, closed), :class:`AuthenticationFailed`, :class:`TLSFailure` or
        :class:`ProtocolViolation`, each ``from`` the underlying error, naming the broker.
        Cancelling ``cancel`` (from any thread) ends the TCP connect, the TLS handshake or the
        wait for CONNECTED at once with :class:`ConnectCancelled`. Nothing (socket, thread) is
        left behind when it raises, except that a host-name lookup cut short finishes on its
        own daemon thread.
        """
        if address.protocol == "amqp":
            raise ConfigurationError(f"{address}: an AMQP member cannot be opened over STOMP")
        login, passcode = self.credentials_for(address)
        session = StompSession(
            address,
            listener=listener,
            clock=self._clock,
            login=login,
            passcode=passcode,
            heartbeat=self._heartbeat,
            grace=self._grace,
            client_id=self._client_id,
            close_timeout=self._close_timeout,
            ssl_context=self._tls_context() if address.tls else None,
            transport_factory=self._transport_factory,
            confirm_mode=self._confirm_mode,
        )
        session.open(timeout, cancel)
        return session

    def __repr__(self) -> str:
        return (
            f"StompConnector(heartbeat={self._heartbeat}, login={self._login!r}, "
            f"client_id={self._client_id!r}, confirm_mode={self._confirm_mode})"
        )


def _wants_tls_files(options: FailoverOptions) -> bool:
    return any((options.tls_ca_file, options.tls_cert_file, options.tls_key_file))


class _FrameEvents:
    """The stomp.py listener: forwards each I/O-thread event to the session."""

    def __init__(self, session: StompSession) -> None:
        self._session = session

    def on_connected(self, frame: Any) -> None:
        self._session._on_connected(frame.headers)

    def on_message(self, frame: Any) -> None:
        self._session._on_message(frame.headers, frame.body)

    def on_receipt(self, frame: Any) -> None:
        self._session._on_receipt(frame.headers)

    def on_error(self, frame: Any) -> None:
        self._session._on_error(frame.headers, frame.body)

    def on_disconnected(self) -> None:
        self._session._on_disconnected()

    # stomp.py calls these on every frame; without them it raises and catches AttributeError
    # (or logs) each time, a measurable cost on the send path.
    def on_send(self, frame: Any) -> None:
        """Nothing to do for an outgoing frame."""

    def on_before_message(self, frame: Any) -> None:
        """Nothing to do before a MESSAGE is dispatched."""


class StompSession:
    """One handshaken STOMP connection to one broker.

    Thread-safe: ``send``, ``subscribe``, ``ack`` and friends may be called from several
    threads; frames are written whole, in the order the calls were made. Listener callbacks
    (``on_message``, ``on_lost``) and confirmation callbacks run on the session's I/O,
    writer or watchdog thread.

    Writes are asynchronous on plain TCP: a call returns once its frame is queued (it blocks
    while 1 MiB is queued, so a broker that stops reading still slows the caller down), and a
    writer thread puts everything queued meanwhile on the socket in one system call. So a
    fire-and-forget ``send`` may return before its bytes reach the socket, and a write that
    fails afterwards is reported as the loss of the session, not by that call. Nothing was
    ever promised for such a send: only a RECEIPT confirms one, exactly as before.

    A listener that raises in ``on_message`` does not end the session: the error goes to the
    listener's optional ``on_error(session, error)`` hook (or the ``failover_client.stomp``
    log). A slow ``on_message`` holds up the reading of further frames; while it runs, the
    heart-beat watchdog does not count the broker as silent.

    Confirmation outcomes: ``None`` after the broker's RECEIPT; :class:`SendRejected` when an
    ERROR names the receipt; :class:`BrokerUnavailable` when the session is lost or closed
    first. Each exactly once; when ``send`` raises, its ``on_confirm`` is never called.
    Order on loss: the session is marked dead, every outstanding confirmation fails, then
    ``on_lost`` runs once. ``close()`` does not call ``on_lost``.
    """

    def __init__(
        self,
        address: BrokerAddress,
        *,
        listener: SessionListener,
        clock: Clock,
        login: str | None,
        passcode: str | None,
        heartbeat: tuple[int, int],
        grace: float,
        client_id: str | None,
        close_timeout: float,
        ssl_context: ssl.SSLContext | None,
        transport_factory: Callable[..., BoundTransport] = BoundTransport,
        confirm_mode: ConfirmMode = "receipt",
    ) -> None:
        self._transport_factory = transport_factory
        self._confirm_mode = confirm_mode
        self._group: GroupCommit | None = None
        """Set when this session batches confirmed sends into transactions (after CONNECTED)."""
        self._address = address
        self._broker = str(address)
        self._listener = listener
        self._clock = clock
        self._login = login
        self._passcode = passcode
        self._wanted_heartbeat = heartbeat
        self._grace = grace
        self._client_id = client_id
        self._close_timeout = close_timeout
        self._ssl_context = ssl_context

        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._state: _State = "connecting"
        self._handshake = threading.Event()
        self._handshake_error: ConnectionFailure | None = None
        self._connected_headers: dict[str, str] | None = None
        self._sniffed = b""
        self._sniff_done = False
        self._pending_error: ConnectionFailure | None = None
        self._lost_cause: BaseException | None = None
        self._version = "1.2"
        self._receipts = ReceiptBook()
        self._bye_receipt: str | None = None
        self._bye = threading.Event()
        self._heartbeat: HeartbeatState | None = None
        self._monitor: HeartbeatMonitor | None = None
        self._transport: BoundTransport | None = None
        self._protocol: Protocol12 | None = None
        self._count_sends = True
        """Whether ``_write`` notes heart-beat traffic itself (no writer thread does it)."""
        self._connect_written = False
        """Whether CONNECT went out (written before the I/O thread starts, see there)."""

    # -- public surface --------------------------------------------------------------------

    @property
    def address(self) -> BrokerAddress:
        return self._address

    @property
    def version(self) -> str:
        """The STOMP version the broker chose (``1.1`` or ``1.2``)."""
        return self._version

    @property
    def heartbeat_state(self) -> HeartbeatState | None:
        return self._heartbeat

    @property
    def outstanding(self) -> int:
        """Sends still waiting for their receipt."""
        return self._receipts.outstanding

    @property
    def batching(self) -> bool:
        """Whether confirmed sends are group-committed in transactions on this session."""
        return self._group is not None

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._state == "open"

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        """Write one SEND (``persistent:true`` unless ``headers`` say otherwise).

        With ``on_confirm`` a receipt is requested and ``on_confirm`` fires once with the
        outcome; no round trip is awaited here, so many sends may be outstanding. Raises
        :class:`BrokerUnavailable` when the session is dead or the write fails, and
        :class:`ConfigurationError` (before writing anything) for a header name with ``:``,
        a line break or NUL, or a NUL in a value.
        """
        frame_headers = send_headers(destination, headers, None, body_length=len(body))
        if on_confirm is None:
            self._write("SEND", frame_headers, body)
            return
        receipt = self._receipts.add(on_confirm)
        if receipt is None:
            raise self._dead_error()
        try:
            if self._group is not None:
                self._queue_send(PendingSend(receipt, self._escaped(frame_headers), body))
            else:
                frame_headers["receipt"] = receipt
                self._write("SEND", frame_headers, body)
        except BrokerUnavailable:
            if self._receipts.discard(receipt):
                raise
            # The loss already failed this confirmation through on_confirm: reporting it a
            # second time, by raising, would make the caller count one message twice.

    def subscribe(self, spec: SubscriptionSpec) -> None:
        """SUBSCRIBE with the spec's ack mode, durable name and extra headers."""
        self._write("SUBSCRIBE", subscribe_headers(spec, self._client_id), None)

    def unsubscribe(self, subscription_id: str) -> None:
        """UNSUBSCRIBE; a durable subscription stays on the broker (inactive)."""
        self._write("UNSUBSCRIBE", unsubscribe_headers(subscription_id), None)

    def ack(self, message: Received) -> None:
        """ACK ``message`` (client / client-individual subscriptions)."""
        self._write("ACK", ack_headers(self._version, message), None)

    def nack(self, message: Received) -> None:
        """NACK ``message``: the broker redelivers it or moves it to its dead-letter queue."""
        self._write("NACK", ack_headers(self._version, message), None)

    def close(self) -> None:
        """Say DISCONNECT (when the broker is healthy), then end every thread and the socket.

        Never raises; idempotent. Waits at most ``close_timeout`` for the broker's receipt
        and as long again for the I/O thread. Sends still unconfirmed fail with
        :class:`BrokerUnavailable`.
        """
        with self._lock:
            if self._state == "closed":
                return
            polite = self._state == "open"
            self._state = "closed"
        try:
            if polite:
                self._say_goodbye()
        except Exception as exc:  # noqa: BLE001 - close never raises; the socket goes anyway
            _log.debug("%s: DISCONNECT failed: %r", self._broker, exc)
        self._teardown()
        self._complete(
            self._receipts.fail_all(
                BrokerUnavailable("session closed before the broker confirmed", broker=self._broker)
            )
        )
        if self._group is not None:
            self._group.clear()

    def __repr__(self) -> str:
        with self._lock:
            state = self._state
        return (
            f"StompSession(broker={self._broker!r}, state={state}, version={self._version}, "
            f"outstanding={self._receipts.outstanding})"
        )

    # -- opening ---------------------------------------------------------------------------

    def open(self, timeout: float, cancel: Cancel | None = None) -> None:
        """Connect and handshake within ``timeout``; on failure release everything and raise.

        ``cancel`` cuts any step short with :class:`ConnectCancelled` (see StompConnector).
        """
        if cancel is not None and cancel.cancelled:
            raise ConnectCancelled("connect cancelled before it started", broker=self._broker)
        deadline = self._clock.monotonic() + timeout
        transport = self._transport_factory(
            self._address.host,
            self._address.port,
            deadline=deadline,
            clock=self._clock,
            ssl_context=self._ssl_context,
            server_hostname=self._address.host if self._ssl_context is not None else None,
            on_bytes=self._on_bytes,
            on_bad_frame=self._on_bad_frame,
        )
        transport.override_threading(self._start_io_thread)
        transport.set_listener("failover-client", _FrameEvents(self))
        self._transport = transport
        # stomp.py's protocol object only writes DISCONNECT (its full path notes the receipt
        # for stomp.py's own bookkeeping); other frames are encoded by _stomp_encode. Its own
        # heart-beat machinery stays off because it is given (0, 0).
        self._protocol = Protocol12(transport, heartbeats=(0, 0), auto_content_length=False)

        def cancelled() -> None:
            # On the cancelling thread: fail the wait for CONNECTED with this error (unless a
            # real one came first), and wake a TCP connect or TLS handshake under way.
            with self._lock:
                if self._state != "connecting":
                    return
                if self._handshake_error is None:
                    self._handshake_error = ConnectCancelled(
                        "connect cancelled during the STOMP handshake", broker=self._broker
                    )
            self._handshake.set()
            transport.interrupt()

        forget = cancel.add_callback(cancelled) if cancel is not None else None
        try:
            try:
                transport.start()
            except Exception as exc:
                transport.close_unstarted()
                if cancel is not None and cancel.cancelled:
                    raise ConnectCancelled(
                        f"connect cancelled during {transport.stage}", broker=self._broker
                    ) from exc
                raise transport_error(exc, broker=self._broker, during=transport.stage) from exc
            try:
                self._handshake_within(deadline, timeout)
            except BaseException:
                self._teardown()
                raise
        finally:
            if forget is not None:
                forget()

    def _connect_frame(self) -> Frame:
        return Frame(
            "CONNECT",
            connect_headers(
                host=self._address.param("vhost") or self._address.host,
                login=self._login,
                passcode=self._passcode,
                heart_beat=request_header(self._wanted_heartbeat),
                client_id=self._client_id,
            ),
        )

    def _write_connect(self, frame: Frame) -> None:
        transport = self._bound_transport()
        with self._write_lock:
            transport.write_quietly(frame)
        self._connect_written = True

    def _handshake_within(self, deadline: float, timeout: float) -> None:
        frame = self._connect_frame()
        transport = self._bound_transport()
        if not self._connect_written:
            # A transport that never asked for an I/O thread (a test's scripted one).
            try:
                self._write_connect(frame)
            except Exception as exc:
                raise transport_error(exc, broker=self._broker, during="CONNECT") from exc
        # The broker takes milliseconds to answer CONNECT: start the writer and watchdog
        # threads meanwhile, not after CONNECTED, where each start (a thread hand-off and back)
        # would delay the first send. Nothing is written through the writer before "open".
        self._count_sends = not transport.start_writer(
            on_written=self._on_written,
            on_failed=self._on_write_failed,
            name=f"stomp-writer {self._address.key}",
            render=self._render_queued,
        )
        if any(self._wanted_heartbeat):
            self._monitor = HeartbeatMonitor(
                None,
                self._clock,
                send_beat=self._send_heartbeat,
                on_silence=self._on_silence,
                name=f"stomp-heartbeat {self._address.key}",
            )
            self._monitor.start()
        remaining = max(0.0, deadline - self._clock.monotonic())
        if not self._clock.wait(self._handshake, remaining):
            raise BrokerUnavailable(
                f"no CONNECTED frame within {timeout:g} s (broker hung, overloaded, or not a "
                "STOMP endpoint)",
                broker=self._broker,
            )
        with self._lock:
            error = self._handshake_error
            headers = self._connected_headers
            if error is None and headers is not None:
                error = self._accept_connected(headers)
            if error is None:
                # Under the lock: a loss from now on sees "open" (and aborts the transport,
                # which also ends the writer); one seen before fails the handshake.
                group = self._group_for(headers or {})
                # Group commit needs the writer (it renders at write time); TLS has none.
                self._group = None if self._count_sends else group
                self._state = "open"
        if error is not None:
            raise error

    def _accept_connected(self, headers: Mapping[str, str]) -> ConnectionFailure | None:
        """Check CONNECTED's version and heart-beat header and arm the watchdog (under lock)."""
        version = headers.get("version", "1.0")
        if version not in SUPPORTED_VERSIONS:
            return ProtocolViolation(
                f"broker chose STOMP {version}; this client needs one of "
                f"{', '.join(SUPPORTED_VERSIONS)}",
                broker=self._broker,
            )
        try:
            plan = negotiate(self._wanted_heartbeat, headers.get("heart-beat"), self._grace)
        except ValueError as exc:
            return ProtocolViolation(f"CONNECTED frame: {exc}", broker=self._broker)
        self._version = version
        self._heartbeat = HeartbeatState(plan, self._clock.monotonic())
        if self._monitor is not None:
            self._monitor.arm(self._heartbeat)  # its thread ends at once if nothing is watched
        return None

    def _group_for(self, headers: Mapping[str, str]) -> GroupCommit | None:
        """The group commit for this broker, or None when sends keep one receipt each."""
        if not batching_supported(self._confirm_mode, headers):
            return None
        return GroupCommit(encode_frame, prefix=_COMMIT_PREFIX)

    def _start_io_thread(self, target: Callable[[], None]) -> threading.Thread:
        # stomp.py asks for the thread once the connection (and TLS handshake) is up: CONNECT
        # goes out first, so the broker already works on it while this thread starts.
        transport = self._bound_transport()
        transport.stage = "CONNECT"
        self._write_connect(self._connect_frame())
        thread = threading.Thread(target=target, name=f"stomp-io {self._address.key}", daemon=True)
        thread.start()
        return thread

    # -- writing ---------------------------------------------------------------------------

    def _bound_transport(self) -> BoundTransport:
        transport = self._transport
        if transport is None:
            raise BrokerUnavailable("session was never opened", broker=self._broker)
        return transport

    def _dead_error(self) -> BrokerUnavailable:
        with self._lock:
            state, cause = self._state, self._lost_cause
        if state == "closed":
            return BrokerUnavailable("session is closed", broker=self._broker)
        if state == "connecting":
            return BrokerUnavailable("session is not connected yet", broker=self._broker)
        return BrokerUnavailable(f"session was lost: {cause}", broker=self._broker)

    def _write(self, command: str, headers: dict[str, str], body: bytes | None) -> None:
        # Read without the lock: this is the send hot path, and a session that dies right
        # after the check fails the write below, which is mapped the same way.
        if self._state != "open":
            raise self._dead_error()
        transport = self._bound_transport()
        # Encoded outside the try: bad input is the caller's error, not a broken connection.
        data = encode_frame(command, escape_headers(headers, self._version), body or b"")
        try:
            with self._write_lock:
                transport.write_encoded(data)
        except Exception as exc:
            # The I/O thread reports the loss (on_lost) once the socket is down.
            transport.abort()
            raise transport_error(exc, broker=self._broker, during=f"{command} write") from exc
        if self._count_sends:
            state = self._heartbeat
            if state is not None:
                state.sent(self._clock.monotonic())

    def _escaped(self, headers: dict[str, str]) -> dict[str, str]:
        """``headers`` escaped for this session's STOMP version."""
        return escape_headers(headers, self._version)

    def _render_queued(self, items: Sequence[Item]) -> bytes:
        """The writer's render: transactions once CONNECTED enabled group commit, else frames."""
        group = self._group
        return join_frames(items) if group is None else group.render(items)

    def _queue_send(self, item: PendingSend, *, force: bool = False) -> None:
        """Queue a confirmed send for group commit; the writer encodes it when it writes."""
        if self._state != "open":
            raise self._dead_error()
        transport = self._bound_transport()
        # With other sends unconfirmed this is part of a burst: leave it to the writer thread,
        # so the burst gathers into one transaction. A lone send (a blocking ``send`` loop)
        # may still be written at once on this thread.
        alone = self._receipts.outstanding <= 1
        try:
            transport.send_deferred(item, force=force, inline=alone and not force)
        except Exception as exc:
            transport.abort()
            raise transport_error(exc, broker=self._broker, during="SEND write") from exc

    def _resend_alone(self, sends: tuple[PendingSend, ...]) -> None:
        """Write each send again outside a transaction, with its own receipt (reader thread)."""
        for send in sends:
            send.alone = True
            try:
                self._queue_send(send, force=True)
            except BrokerUnavailable:
                return  # the session is lost: its receipt book fails every one of them

    def _on_written(self) -> None:
        """Writer thread: bytes reached the socket, which is what the broker's watchdog sees."""
        state = self._heartbeat
        if state is not None:
            state.sent(self._clock.monotonic())

    def _on_write_failed(self, exc: BaseException) -> None:
        """Writer thread: a queued write failed; the session is lost, as after any failed write."""
        self._lose(transport_error(exc, broker=self._broker, during="a queued write"))

    def _send_heartbeat(self) -> None:
        """Write one EOL unless a frame is being written (that counts as traffic anyway)."""
        transport = self._transport
        if transport is None or not self._write_lock.acquire(blocking=False):
            return
        try:
            transport.write_heartbeat()
        except Exception as exc:  # noqa: BLE001 - a lost beat is harmless; the watchdog goes on
            _log.debug("%s: heart-beat not written: %r", self._broker, exc)
        finally:
            self._write_lock.release()

    def _say_goodbye(self) -> None:
        transport = self._transport
        if transport is None or not self._write_lock.acquire(blocking=False):
            return  # a writer is stuck on a full socket: the broker is not listening anyway
        try:
            self._bye_receipt = "bye"
            if self._protocol is not None:
                self._protocol.send_frame("DISCONNECT", {"receipt": self._bye_receipt}, b"")
        finally:
            self._write_lock.release()
        if threading.current_thread() is not transport.io_thread:
            # The receipt also means every frame queued before DISCONNECT was written.
            self._clock.wait(self._bye, self._close_timeout)
        else:
            # From the I/O thread itself the receipt could never be read: only let the
            # writer put what is queued on the socket before the abort.
            transport.flush(self._close_timeout)

    # -- ending ----------------------------------------------------------------------------

    def _teardown(self) -> None:
        """Stop the watchdog, abort the transport and join the threads (never the caller's)."""
        monitor = self._monitor
        if monitor is not None:
            monitor.stop(join_timeout=self._close_timeout)
        transport = self._transport
        if transport is None:
            return
        io_thread = transport.io_thread
        transport.abort()
        if not transport.join_writer(self._close_timeout):
            _log.warning(
                "%s: writer thread still busy after %g s", self._broker, self._close_timeout
            )
        if io_thread is None:
            transport.close_unstarted()
        elif io_thread is not threading.current_thread():
            io_thread.join(self._close_timeout)
            if io_thread.is_alive():
                _log.warning(
                    "%s: I/O thread still busy after %g s (a listener callback is blocking it)",
                    self._broker,
                    self._close_timeout,
                )

    def _lose(self, cause: ConnectionFailure) -> None:
        """The connection is dead: fail confirmations, then tell the listener, exactly once."""
        with self._lock:
            if self._state in ("lost", "closed"):
                return
            if self._state == "connecting":
                # open() is waiting: it raises the first cause and cleans up.
                if self._handshake_error is None:
                    self._handshake_error = cause
                self._handshake.set()
                return
            self._state = "lost"
            self._lost_cause = cause
        self._complete(
            self._receipts.fail_all(
                BrokerUnavailable(f"session lost before the broker confirmed: {cause}")
            )
        )
        if self._group is not None:
            self._group.clear()
        try:
            self._listener.on_lost(self, cause)
        except Exception as exc:  # noqa: BLE001 - the manager's bug must not kill our thread
            _log.exception("%s: on_lost listener failed: %r", self._broker, exc)
        # Only now wake the watchdog and the writer to end: woken earlier, their threads would
        # queue for the GIL ahead of the reconnect loop that on_lost just woke. Nothing is
        # written meanwhile: every write checks the state, which is "lost" already.
        monitor = self._monitor
        if monitor is not None:
            monitor.stop()
        if self._transport is not None:
            self._transport.abort()

    def _complete(self, completions: list[Completion] | Completion | None) -> None:
        run_all(completions, self._report)

    def _report(self, error: BaseException) -> None:
        """Hand a non-fatal error to the listener's optional ``on_error`` hook, or log it."""
        hook = getattr(self._listener, "on_error", None)
        if callable(hook):
            try:
                hook(self, error)
            except Exception:  # noqa: BLE001 - a broken hook is logged, never propagated
                _log.exception("%s: on_error hook failed", self._broker)
            else:
                return
        _log.error("%s: %s", self._broker, error, exc_info=error)

    # -- I/O-thread events -----------------------------------------------------------------

    def _on_bytes(self, data: bytes) -> None:
        state = self._heartbeat
        if state is not None:
            state.received(self._clock.monotonic())
        if self._sniff_done:
            return
        self._sniffed += data[:_HANDSHAKE_SNIFF]
        verdict = check_handshake_bytes(self._sniffed)
        if verdict is None and len(self._sniffed) < _HANDSHAKE_SNIFF:
            return
        self._sniff_done = True
        if not verdict:
            # An echo server would send our CONNECT back: keep the passcode out of the message.
            shown = redact(repr(self._sniffed[:_HANDSHAKE_SNIFF]), (self._passcode,))
            self._lose(
                ProtocolViolation(
                    f"answered CONNECT with {shown}, which is not a STOMP frame "
                    "(wrong port or protocol?)",
                    broker=self._broker,
                )
            )

    def _on_bad_frame(self, command: str) -> None:
        self._lose(
            ProtocolViolation(
                f"broker sent a {command!r} frame, which STOMP does not define",
                broker=self._broker,
            )
        )

    def _on_connected(self, headers: Mapping[str, str]) -> None:
        with self._lock:
            if self._state == "connecting" and self._connected_headers is None:
                self._connected_headers = dict(headers)
        self._handshake.set()

    def _on_message(self, headers: Mapping[str, str], body: bytes | None) -> None:
        try:
            message = received_from_frame(headers, body, self._version)
        except ProtocolViolation as exc:
            self._report(ProtocolViolation(str(exc), broker=self._broker))
            return
        state = self._heartbeat
        if state is not None:
            state.dispatch_started()
        try:
            self._listener.on_message(self, message)
        except Exception as exc:  # noqa: BLE001 - a raising listener must not end the session
            self._report(exc)
        finally:
            if state is not None:
                state.dispatch_finished(self._clock.monotonic())

    def _on_receipt(self, headers: Mapping[str, str]) -> None:
        receipt = headers.get("receipt-id", "")
        if receipt == self._bye_receipt:
            self._bye.set()
            return
        group = self._group
        if group is not None and group.is_ours(receipt):
            outcome = group.committed(receipt)
            if outcome is not None:
                self._settle(outcome)
            return
        self._complete(self._receipts.confirm(receipt))

    def _settle(self, outcome: Outcome) -> None:
        """Confirm a committed run's sends, or write each again alone."""
        verdict, sends = outcome
        if verdict == "retry":
            self._resend_alone(sends)
            return
        completions = []
        for send in sends:
            completion = self._receipts.confirm(send.receipt)
            if completion is not None:
                completions.append(completion)
        self._complete(completions)

    def _on_error(self, headers: Mapping[str, str], body: bytes | None) -> None:
        secrets = (self._passcode,)
        with self._lock:
            connecting = self._state == "connecting"
        if connecting:
            self._lose(
                connect_error_from_frame(headers, body, broker=self._broker, secrets=secrets)
            )
            return
        receipt = headers.get("receipt-id")
        group = self._group
        if group is not None and receipt is not None and group.is_ours(receipt):
            outcome = group.refused(receipt)
            if outcome is not None:
                # The broker refused the COMMIT (a send in it failed): nothing of it was
                # stored. Each send goes again alone; the broker's answer then names the one
                # it refuses. Not an error of the session, so not reported as one.
                _log.info(
                    "%s: COMMIT of %d sends refused (%s); sending each again alone",
                    self._broker,
                    len(outcome[1]),
                    broker_error_text(headers, body, (self._passcode,)),
                )
                self._settle(outcome)
                return
        if receipt is None and group is not None:
            # Which send this is about cannot be known: no unanswered transaction may confirm
            # its sends on the strength of its COMMIT alone.
            group.unattributed_error()
        if receipt is not None and self._receipts.is_ours(receipt):
            rejection = send_rejection_from_frame(
                headers, body, broker=self._broker, secrets=secrets
            )
            completion = self._receipts.reject(receipt, rejection)
            if completion is not None:
                self._complete(completion)
                return
        # Not about one send. STOMP says the broker closes the connection after an ERROR
        # (RabbitMQ does); ActiveMQ keeps it open after e.g. a bad ACK. Report it now, and use
        # it as the loss cause should the broker close.
        error = BrokerUnavailable(
            f"broker sent ERROR: {broker_error_text(headers, body, secrets)}", broker=self._broker
        )
        with self._lock:
            self._pending_error = error
        self._report(error)

    def _on_disconnected(self) -> None:
        self._bye.set()
        with self._lock:
            cause = self._pending_error
            connecting = self._state == "connecting"
        if cause is None:
            detail = ""
            if connecting and self._sniffed and self._connected_headers is None:
                detail = f" after {len(self._sniffed)} bytes of an incomplete frame"
            cause = BrokerUnavailable(
                "connection closed by the broker"
                + (" during the handshake" if connecting else "")
                + detail,
                broker=self._broker,
            )
        self._lose(cause)

    def _on_silence(self, silence: float) -> None:
        limit = self._heartbeat.plan.silence_limit if self._heartbeat is not None else 0.0
        self._lose(
            BrokerUnavailable(
                f"no data from the broker for {silence:.2f} s (heart-beat limit {limit:g} s); "
                "presumed hung",
                broker=self._broker,
            )
        )
