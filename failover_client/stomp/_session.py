"""The STOMP session: one handshaken connection to one broker, as the engine sees it.

:class:`StompSession` is the public face of parts that each do one thing, over one shared
:class:`~failover_client.stomp._state.SessionState`:

* ``_handshake``: dial, CONNECT and CONNECTED within a deadline, cancellable;
* ``_outbound``: callers' frames, group-committed sends and heart-beats on the socket;
* ``_inbound``: MESSAGE, RECEIPT, ERROR, the end of the connection and a silent broker;
* ``_teardown``: ``close()`` and the loss of the connection.

``send`` builds its frame and hands it to the outbound side in one call, as directly as
before the split: it is the path the benchmarks measure against raw stomp.py.

Threads: each session has stomp.py's I/O thread (reads frames, runs the listener's
``on_message`` and the confirmation callbacks) and, on plain TCP, a writer thread that writes
the frames queued by callers in batches (``failover_client.net._writer``) while a backlog
lasts (an idle session has none). The heart-beat watchdog (``_heartbeat``) runs on the
process's shared timer thread. ``close()`` ends and joins them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable, SubscriptionRefused
from failover_client.adapter import (
    Cancel,
    ConfirmCallback,
    Received,
    SessionListener,
    SubscriptionSpec,
)
from failover_client.stomp import _teardown
from failover_client.stomp._batch import PendingSend
from failover_client.stomp._errors import NamedRefusal
from failover_client.stomp._flow import release_command
from failover_client.stomp._frames import (
    ack_headers,
    private_destination,
    send_block,
    send_headers,
    subscribe_headers,
    unsubscribe_headers,
)
from failover_client.stomp._handshake import ConnectSettings, Handshake
from failover_client.stomp._heartbeat import HeartbeatState
from failover_client.stomp._inbound import FrameEvents
from failover_client.stomp._outbound import Outbound
from failover_client.stomp._state import SessionState
from failover_client.uri import BrokerAddress

__all__ = ["StompSession"]


class StompSession:
    """One handshaken STOMP connection to one broker.

    Thread-safe: ``send``, ``subscribe``, ``ack`` and friends may be called from several
    threads; frames are written whole, in the order the calls were made. Listener callbacks
    (``on_message``, ``on_lost``) and confirmation callbacks run on the session's I/O
    or writer thread, a caller's thread that wrote inline, or the thread that reports a
    silent broker.

    Writes are asynchronous on plain TCP: a call returns once its frame is queued (it blocks
    while 1 MiB is queued, so a broker that stops reading still slows the caller down), and a
    writer thread puts everything queued meanwhile on the socket in one system call. So a
    fire-and-forget ``send`` may return before its bytes reach the socket, and a write that
    fails afterwards is reported as the loss of the session, not by that call. Nothing was
    ever promised for such a send: only a RECEIPT confirms one, exactly as before.

    A listener that raises in ``on_message`` does not end the session: the error is logged on
    the ``failover_client.stomp`` logger. A slow ``on_message`` holds up the reading of
    further frames; while it runs, the heart-beat watchdog does not count the broker as
    silent.

    Confirmation outcomes: ``None`` after the broker's RECEIPT; :class:`SendRejected` when an
    ERROR names the receipt; :class:`BrokerUnavailable` when the session is lost or closed
    first. Each exactly once; when ``send`` raises, its ``on_confirm`` is never called.
    Order on loss: the session is marked dead, every outstanding confirmation fails, then
    ``on_lost`` runs once. ``close()`` does not call ``on_lost``.

    Made by :meth:`StompConnector.connect <failover_client.stomp.StompConnector.connect>`,
    which calls :meth:`open`.
    """

    __slots__ = ("_client_id", "_handshake", "_inbound", "_outbound", "_state")

    def __init__(
        self,
        address: BrokerAddress,
        *,
        listener: SessionListener,
        clock: Clock,
        close_timeout: float,
        settings: ConnectSettings,
    ) -> None:
        self._state = SessionState(
            self,
            address,
            listener=listener,
            clock=clock,
            close_timeout=close_timeout,
            passcode=settings.passcode,
        )
        self._outbound = Outbound(self._state)
        self._inbound = FrameEvents(self._state, self._outbound)
        self._handshake = Handshake(
            self._state, settings, inbound=self._inbound, outbound=self._outbound
        )
        self._client_id = settings.client_id

    # -- state -----------------------------------------------------------------------------

    @property
    def address(self) -> BrokerAddress:
        return self._state.address

    @property
    def product(self) -> str | None:
        """The CONNECTED frame's ``server`` header (e.g. ``ActiveMQ/5.17.2``), if any."""
        return (self._state.connected_headers or {}).get("server")

    @property
    def version(self) -> str:
        """The STOMP version the broker chose (``1.1`` or ``1.2``)."""
        return self._state.version

    @property
    def connected_headers(self) -> Mapping[str, str]:
        """The headers of the broker's CONNECTED frame (``server``, ``heart-beat``, ...);
        empty before it arrived."""
        return dict(self._state.connected_headers or {})

    @property
    def heartbeat_state(self) -> HeartbeatState | None:
        return self._state.heartbeat

    @property
    def outstanding(self) -> int:
        """Sends still waiting for their receipt."""
        return self._state.receipts.outstanding

    @property
    def unknown_receipts(self) -> int:
        """RECEIPTs the broker sent for ids no frame asked for (or answered already)."""
        return self._state.receipts.unknown

    @property
    def premature_receipts(self) -> int:
        """RECEIPTs (and ERRORs) the broker sent for ids of ours before any frame carried them:
        ignored, as no broker can answer a frame it has not read."""
        return self._state.receipts.premature

    @property
    def batching(self) -> bool:
        """Whether confirmed sends are group-committed in transactions on this session."""
        return self._state.group is not None

    @property
    def is_open(self) -> bool:
        return self._state.current_phase() == "open"

    # -- the session's life ----------------------------------------------------------------

    def open(self, timeout: float, cancel: Cancel) -> None:
        """Connect and handshake within ``timeout``; on failure release everything and raise.

        ``cancel`` cuts any step short with :class:`ConnectCancelled` (see StompConnector).
        """
        self._handshake.run(timeout, cancel)

    def close(self) -> None:
        """Say DISCONNECT (when the broker is healthy), then end every thread and the socket.

        Never raises; idempotent. Waits at most ``close_timeout`` for the broker's receipt
        and as long again for the I/O thread. Sends still unconfirmed fail with
        :class:`BrokerUnavailable`.
        """
        _teardown.close(self._state)

    # -- writes ----------------------------------------------------------------------------

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
        state = self._state
        group = state.group
        if on_confirm is None or group is None or "transaction" in headers:
            # A caller's own transaction is theirs to commit: never folded into a batch's.
            self._send_frame(destination, body, headers, on_confirm)
            return
        # Group commit: encoded here, written in a transaction by the writer (``_batch``).
        head = send_block(destination, headers, body_length=len(body), version=state.version)
        # A batched send's own id reaches the wire only if it is written alone: held till then.
        receipt = state.receipts.hold(on_confirm)
        if receipt is None:
            raise state.dead_error()
        try:
            self._outbound.queue(PendingSend(receipt, head, body))
        except BrokerUnavailable:
            if state.receipts.discard(receipt):
                raise
            # The loss already failed this confirmation through on_confirm: reporting it a
            # second time, by raising, would make the caller count one message twice.

    def _send_frame(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        """A SEND written as one frame: unconfirmed, or with its own receipt."""
        frame_headers = send_headers(destination, headers, None, body_length=len(body))
        if on_confirm is None:
            self._outbound.write("SEND", frame_headers, body)
            return
        state = self._state
        receipt = state.receipts.add(on_confirm)
        if receipt is None:
            raise state.dead_error()
        try:
            frame_headers["receipt"] = receipt
            # The only send awaiting its receipt: maybe a blocking ``send``; see _outbound.
            alone = state.receipts.outstanding <= 1
            self._outbound.write("SEND", frame_headers, body, urgent=alone)
        except BrokerUnavailable:
            if state.receipts.discard(receipt):
                raise
            # As in send(): the loss already failed this confirmation through on_confirm.

    def subscribe(self, spec: SubscriptionSpec, on_confirm: ConfirmCallback | None) -> None:
        """SUBSCRIBE with the spec's ack mode, durable name, prefetch and extra headers.

        ``spec.prefetch`` is sent as this broker's own flow-control header (ActiveMQ
        ``activemq.prefetchSize``, RabbitMQ ``prefetch-count``, Artemis
        ``consumer-window-size`` in bytes; all three to a broker the CONNECTED frame did not
        name): see ``failover_client.stomp._flow``. It binds in the ``client`` modes only.
        On ActiveMQ Classic, a queue subscription the application acknowledges, with a
        prefetch above 200, has its queue woken after every 100 messages received without an
        acknowledgement, and after a pause in deliveries while it holds messages, or the broker
        would stop paging messages in for it (see ``failover_client.stomp._pagein``).

        With ``on_confirm`` a receipt is requested: RECEIPT confirms the subscription, an
        ERROR naming the receipt refuses it (:class:`SubscriptionRefused`; ActiveMQ does so
        for a bad selector and keeps the connection).
        """
        kind = self._state.broker_kind
        frame_headers = subscribe_headers(spec, self._client_id, kind)
        self._state.page_in.watch(spec, kind, self._outbound.write_now)
        if on_confirm is None:
            self._outbound.write("SUBSCRIBE", frame_headers, None)
            return
        state = self._state
        receipt = state.receipts.add(partial(_subscription_outcome, spec.id, on_confirm))
        if receipt is None:
            raise state.dead_error()
        frame_headers["receipt"] = receipt
        try:
            self._outbound.write("SUBSCRIBE", frame_headers, None)
        except BrokerUnavailable:
            if state.receipts.discard(receipt):
                raise

    def unsubscribe(self, subscription_id: str) -> None:
        """UNSUBSCRIBE; a durable subscription stays on the broker (inactive)."""
        self._state.page_in.forget(subscription_id)
        self._outbound.write("UNSUBSCRIBE", unsubscribe_headers(subscription_id), None)

    def ack(self, message: Received) -> None:
        """ACK ``message`` (client / client-individual subscriptions)."""
        self._outbound.write("ACK", ack_headers(self._state.version, message), None)
        self._state.page_in.acknowledged(message.subscription_id)

    def nack(self, message: Received) -> None:
        """NACK ``message``: the broker redelivers it or moves it to its dead-letter queue."""
        self._outbound.write("NACK", ack_headers(self._state.version, message), None)
        self._state.page_in.acknowledged(message.subscription_id)

    def sync(self, on_confirm: ConfirmCallback) -> None:
        """``on_confirm(None)`` once the broker handled every frame written before this call.

        Written as an empty transaction, ``BEGIN`` then ``ABORT`` with a receipt: a frame every
        STOMP broker answers without touching a queue (an ACK carries no receipt of its own
        here, and a session may have no message left to acknowledge). A broker handles one
        connection's frames in order, so the RECEIPT means every ACK before was handled.
        Raises :class:`BrokerUnavailable` when the session is closed or lost.
        """
        state = self._state
        receipt = state.receipts.add(on_confirm)
        if receipt is None:
            raise state.dead_error()
        transaction = f"sync-{receipt}"
        try:
            self._outbound.write("BEGIN", {"transaction": transaction}, None)
            self._outbound.write("ABORT", {"transaction": transaction, "receipt": receipt}, None)
        except BrokerUnavailable:
            if state.receipts.discard(receipt):
                raise
            # As in send(): the loss already failed this confirmation through on_confirm.

    def release(self, message: Received) -> None:
        """Hand ``message`` back unhandled, for redelivery, not counted as a failed delivery.

        RabbitMQ: NACK, which requeues it. ActiveMQ, Artemis and a broker the CONNECTED frame
        did not name: nothing is written (ActiveMQ's NACK dead-letters, Artemis's counts a
        failed delivery); the broker returns the message to its queue when the subscription
        or this session ends, and till then it counts against the subscription's prefetch
        (see ``failover_client.stomp._flow``). Raises :class:`BrokerUnavailable` when the
        session is closed or lost, as ``ack`` does.
        """
        state = self._state
        headers = ack_headers(state.version, message)
        command = release_command(state.broker_kind)
        if command is not None:
            self._outbound.write(command, headers, None)
        elif state.phase != "open":
            raise state.dead_error()

    def private_destination(self, name: str) -> tuple[str, Mapping[str, str]]:
        """A destination only this session reads (see :meth:`Session.private_destination`).

        Chosen by the broker's CONNECTED ``server`` header: ActiveMQ Classic
        ``/temp-queue/<name>`` (a temporary queue of this connection); RabbitMQ
        ``/queue/<name>`` subscribed ``exclusive``, ``auto-delete`` and not ``durable`` (a
        queue only this connection may use, deleted with it); Artemis and any other broker
        ``/topic/<name>``: a topic nobody else subscribes to, whose non-durable subscription the
        broker drops with the session.
        """
        return private_destination(self._state.connected_headers or {}, name)

    def __repr__(self) -> str:
        state = self._state
        phase = state.current_phase()
        receipts = state.receipts
        unknown, premature = receipts.unknown, receipts.premature
        return (
            f"StompSession(broker={state.broker!r}, state={phase}, version={state.version}, "
            f"outstanding={receipts.outstanding}"
            + (f", unknown_receipts={unknown}" if unknown else "")
            + (f", premature_receipts={premature}" if premature else "")
            + ")"
        )


def _subscription_outcome(
    subscription_id: str, on_confirm: ConfirmCallback, outcome: BaseException | None
) -> None:
    """A SUBSCRIBE's receipt outcome: the refusal of a send becomes one of the subscription."""
    if isinstance(outcome, NamedRefusal):
        refused = SubscriptionRefused(
            f"{outcome.broker}: subscription {subscription_id!r} refused: {outcome.text}",
            subscription_id=subscription_id,
        )
        refused.__cause__ = outcome
        outcome = refused
    on_confirm(outcome)
