"""What a STOMP session hears: frames, the first bytes, the end of the connection, silence.

:class:`FrameEvents` is the one listener the session registers with stomp.py, so its
``on_*`` frame methods run on stomp.py's I/O thread; the transport calls
:meth:`FrameEvents.on_bytes` and :meth:`FrameEvents.on_bad_frame` on that thread too, and the
heart-beat watchdog calls :meth:`FrameEvents.on_silence` on its own.

A listener that raises in ``on_message`` does not end the session: the error is logged on the
``failover_client.stomp`` logger. An ERROR that names a receipt fails that one send or
subscription, and the session goes on until the broker closes it (ActiveMQ keeps it, RabbitMQ
does not); an ERROR about a refused group COMMIT sends the transaction's messages again one by
one; every other ERROR ends the session with :class:`BrokerRefused`, as STOMP says the
broker's connection ends after one.
"""

from __future__ import annotations

import logging
from typing import Any

from failover_client._errors import BrokerRefused, BrokerUnavailable, ProtocolViolation
from failover_client._throttle import LogThrottle
from failover_client.net._completions import confirm_all
from failover_client.stomp._batch import Outcome
from failover_client.stomp._errors import (
    broker_error_text,
    connect_error_from_frame,
    redact,
    send_rejection_from_frame,
)
from failover_client.stomp._frames import check_handshake_bytes, received_from_frame
from failover_client.stomp._outbound import Outbound
from failover_client.stomp._state import SessionState
from failover_client.stomp._teardown import lose

__all__ = ["FrameEvents"]

_log = logging.getLogger("failover_client.stomp")

_HANDSHAKE_SNIFF = 32
"""Bytes of the broker's first answer kept to tell a STOMP reply from junk."""

_UNKNOWN_RECEIPT_LOG_INTERVAL = 10.0
"""Seconds between log lines about RECEIPTs that answer nothing: a flood must not flood the log."""


class FrameEvents:
    """The inbound side of one session (stomp.py's I/O thread, and the watchdog)."""

    __slots__ = (
        "_delivered",
        "_dispatching",
        "_outbound",
        "_refused_by",
        "_sniff_done",
        "_sniffed",
        "_state",
        "_throttle",
    )

    def __init__(self, state: SessionState, outbound: Outbound) -> None:
        self._state = state
        self._outbound = outbound
        self._sniffed = b""
        self._sniff_done = False
        self._refused_by: BrokerRefused | None = None
        """The first ERROR that named no frame of ours and did not end the session at once
        (one inside a transaction): a close that follows was the broker refusing a frame.
        Only the I/O thread reads and writes it (ERROR and the disconnection arrive there)."""
        self._dispatching = False
        """A MESSAGE of the current read was handed on: the watchdog is told at its end."""
        self._delivered: dict[str, int] = {}
        """MESSAGEs of the current read per subscription id, for page-in at its end."""
        self._throttle = LogThrottle(
            _log, interval=_UNKNOWN_RECEIPT_LOG_INTERVAL, clock=state.clock.monotonic
        )

    # -- stomp.py's listener interface -------------------------------------------------------

    def on_connected(self, frame: Any) -> None:
        self._state.note_connected(dict(frame.headers))

    def on_message(self, frame: Any) -> None:
        state = self._state
        try:
            message = received_from_frame(frame.headers, frame.body, state.version, own=True)
        except ProtocolViolation as exc:
            state.report(ProtocolViolation(str(exc), broker=state.broker))
            return
        if not self._dispatching:
            # Once per read, not per message (two locks and a clock read each): the read's
            # frames are handed on one after the other, and ``on_frames_done`` ends it.
            self._dispatching = True
            beats = state.heartbeat
            if beats is not None:
                beats.dispatch_started()
        subscription_id = message.subscription_id
        self._delivered[subscription_id] = self._delivered.get(subscription_id, 0) + 1
        try:
            state.listener.on_message(state.session, message)
        except Exception as exc:  # noqa: BLE001 - a raising listener must not end the session
            state.report(exc)

    def on_frames_done(self) -> None:
        """The transport handed on every frame of one read (and called this even if one
        raised): the watchdog's dispatch ends, page-in counts the read's deliveries."""
        state = self._state
        if self._dispatching:
            self._dispatching = False
            beats = state.heartbeat
            if beats is not None:
                beats.dispatch_finished(state.clock.monotonic())
        if not self._delivered:
            return
        delivered, self._delivered = self._delivered, {}
        try:
            for subscription_id, count in delivered.items():
                state.page_in.delivered(subscription_id, count)
        except BrokerUnavailable:
            # The session is closing or lost: teardown reports that (on_lost or close()),
            # and a queue of a dead session needs no waking.
            return

    def on_receipt(self, frame: Any) -> None:
        state = self._state
        receipt = frame.headers.get("receipt-id", "")
        if receipt == state.bye_receipt:
            state.bye.set()
            return
        group = state.group
        if group is not None and group.is_ours(receipt):
            outcome = group.committed(receipt)
            if outcome is None:
                state.receipts.note_unknown()
                self._unanswerable(receipt)
            else:
                self._settle(outcome)
            return
        completion = state.receipts.confirm(receipt)  # counts what it ignores
        if completion is None:
            self._unanswerable(receipt)
        else:
            state.complete(completion)

    def _unanswerable(self, receipt: str) -> None:
        """Log a RECEIPT that confirms nothing, at most once per interval, with the counts.

        It names an id no frame carried yet (a peer answering ahead: ignored, or it would
        confirm a send the broker never stored), or none outstanding (a stale or made-up id).
        """
        state = self._state
        receipts = state.receipts
        self._throttle.log(
            logging.WARNING,
            "receipt",
            "%s: RECEIPT for %s, which no frame asked for (ignored; %d for ids never handed out"
            " or answered already, %d for ids not written yet, so far)",
            state.broker,
            redact(repr(receipt[:40]), state.secrets),
            receipts.unknown,
            receipts.premature,
        )

    def on_error(self, frame: Any) -> None:
        state = self._state
        headers, body = frame.headers, frame.body
        if state.current_phase() == "connecting":
            lose(
                state,
                connect_error_from_frame(headers, body, broker=state.broker, secrets=state.secrets),
            )
            return
        receipt = headers.get("receipt-id")
        group = state.group
        if group is not None and receipt is not None and group.is_ours(receipt):
            outcome = group.refused(receipt)
            if outcome is not None:
                # The broker refused the COMMIT (a send in it failed): nothing of it was
                # stored. Each send goes again alone; the broker's answer then names the one
                # it refuses. Not an error of the session, so not reported as one, and the
                # session goes on (ActiveMQ keeps the connection): ending it here would replay
                # the run on the next broker, where the same send would refuse it again.
                _log.info(
                    "%s: COMMIT of %d sends refused (%s); sending each again alone",
                    state.broker,
                    len(outcome[1]),
                    broker_error_text(headers, body, state.secrets),
                )
                self._settle(outcome)
                return
        if receipt is None and group is not None and group.unattributed_error() is not None:
            # A refused SEND inside a transaction carries no receipt; ActiveMQ, the broker
            # group commit runs on, reports it so and keeps the connection: the oldest
            # unanswered run is now in doubt and its sends go again alone (see _batch), where
            # the broker's answer names the one it refuses. Not the end of the session.
            if self._refused_by is None:  # ActiveMQ sends one per chunk of a bad frame
                self._refused_by = self._error_cause(headers, body)
                _log.warning("%s", self._refused_by)
            return
        if receipt is not None and state.receipts.is_ours(receipt):
            # The ERROR names the frame it refuses (a SEND, a SUBSCRIBE): that frame has its
            # answer, and nothing else is in doubt. ActiveMQ keeps the connection and goes
            # on; RabbitMQ closes it, which the engine then sees as an ordinary loss.
            rejection = send_rejection_from_frame(
                headers, body, broker=state.broker, secrets=state.secrets
            )
            state.complete(state.receipts.reject(receipt, rejection))
            return
        # An ERROR that names nothing of ours. STOMP says the broker closes the connection
        # after it (RabbitMQ does); one that keeps it open (and has turned heart-beats off)
        # would otherwise hold the session "connected" for good, every send timing out, the
        # next broker never tried. The broker refused *some* frame: the engine finds which.
        lose(state, self._error_cause(headers, body))

    def _error_cause(self, headers: dict[str, str], body: Any) -> BrokerRefused:
        state = self._state
        return BrokerRefused(
            f"broker sent ERROR: {broker_error_text(headers, body, state.secrets)}",
            broker=state.broker,
        )

    def on_disconnected(self) -> None:
        state = self._state
        state.bye.set()
        connecting, answered = state.answered()
        detail = ""
        if connecting and self._sniffed and not answered:
            detail = f" after {len(self._sniffed)} bytes of an incomplete frame"
        refused_by = self._refused_by
        cause: BrokerUnavailable
        if refused_by is not None and not connecting:
            cause = BrokerRefused(
                f"connection closed by the broker after an ERROR: {refused_by}",
                broker=state.broker,
            )
        else:
            cause = BrokerUnavailable(
                "connection closed by the broker"
                + (" during the handshake" if connecting else "")
                + detail,
                broker=state.broker,
            )
        lose(state, cause)

    # stomp.py calls these on every frame; without them it raises and catches AttributeError
    # (or logs) each time, a measurable cost on the send path.
    def on_send(self, frame: Any) -> None:
        """Nothing to do for an outgoing frame."""

    def on_before_message(self, frame: Any) -> None:
        """Nothing to do before a MESSAGE is dispatched."""

    # -- the transport's and the watchdog's hooks ---------------------------------------------

    def on_bytes(self, data: bytes) -> None:
        """Any byte is life for the watchdog; the first ones must look like a STOMP frame."""
        state = self._state
        beats = state.heartbeat
        if beats is not None:
            beats.received(state.clock.monotonic())
        if self._sniff_done:
            return
        self._sniffed += data[:_HANDSHAKE_SNIFF]
        verdict = check_handshake_bytes(self._sniffed)
        if verdict is None and len(self._sniffed) < _HANDSHAKE_SNIFF:
            return
        self._sniff_done = True
        if not verdict:
            # An echo server would send our CONNECT back: keep the passcode out of the message.
            shown = redact(repr(self._sniffed[:_HANDSHAKE_SNIFF]), state.secrets)
            lose(
                state,
                ProtocolViolation(
                    f"answered CONNECT with {shown}, which is not a STOMP frame "
                    f"({mismatch_hint(self._sniffed)})",
                    broker=state.broker,
                ),
            )

    def on_bad_frame(self, command: str) -> None:
        lose(
            self._state,
            ProtocolViolation(
                f"broker sent a {command!r} frame, which STOMP does not define",
                broker=self._state.broker,
            ),
        )

    def on_frame_too_large(self, limit: int) -> None:
        lose(
            self._state,
            ProtocolViolation(
                f"broker sent a frame larger than maxFrameSize={limit} bytes "
                "(or a frame that never ends)",
                broker=self._state.broker,
            ),
        )

    def on_silence(self, silence: float) -> None:
        state = self._state
        limit = state.heartbeat.plan.silence_limit if state.heartbeat is not None else 0.0
        lose(
            state,
            BrokerUnavailable(
                f"no data from the broker for {silence:.2f} s (heart-beat limit {limit:g} s); "
                "presumed hung",
                broker=state.broker,
            ),
        )

    def _settle(self, outcome: Outcome) -> None:
        """Confirm a committed run's sends, or write each again alone."""
        verdict, sends = outcome
        if verdict == "retry":
            self._outbound.resend_alone(sends)
            return
        state = self._state
        callbacks = state.receipts.committed_all([send.receipt for send in sends])
        confirm_all(callbacks, state.report)


def mismatch_hint(sniffed: bytes) -> str:
    """Why the first bytes are not STOMP, when they tell whose they are."""
    if sniffed.startswith(b"AMQP"):
        who = (
            "an AMQP broker (an AMQP port: 5672 by default; write amqp:// for it, or use the "
            "broker's STOMP port, 61613 by default)"
        )
    elif b"ActiveMQ" in sniffed[:16]:
        who = "an OpenWire (Java client) port (61616 by default; STOMP listens on 61613)"
    elif sniffed.startswith(b"HTTP/"):
        who = "an HTTP server (a web console or management port, not STOMP)"
    elif sniffed.startswith(b"\x15\x03"):
        who = "a TLS server (write stomp+ssl:// for a TLS port)"
    else:
        return "wrong port or protocol?"
    return f"protocol mismatch: it answered like {who}"
