"""What the parts of one STOMP session share: its phase, transport, receipts and heart-beats.

A :class:`~failover_client.stomp.StompSession` is put together from parts that run on different
threads and share this one object: the handshake (``_handshake``, the connecting thread), the
outbound side (``_outbound``, callers' threads, the writer and the watchdog), the inbound side
(``_inbound``, stomp.py's I/O thread and the watchdog) and the teardown (``_teardown``, whoever
closes or notices the loss).

What one part alone uses, that part owns: the inbound side its first bytes and the ERROR a later
close is blamed on, the outbound side whether it counts heart-beat traffic itself. The rest is
held here as objects that own their data and offer operations, each under its own lock: the
:class:`ReceiptBook` (which send waits for which RECEIPT), the :class:`GroupCommit` (which
transaction is unanswered), the heart-beat state; and the phase with the handshake's outcome,
read and changed through the methods below (``current_phase``, ``note_connected``,
``answered``) where the caller is not the hot path.

Locks: ``lock`` guards ``phase``, ``lost_cause`` and the handshake's
outcome; ``write_lock`` keeps frames whole and in call order on the socket. Neither is taken
while the other is held, and no listener is called under either.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable, ConnectionFailure
from failover_client._lazy import LazyEvent
from failover_client.adapter import Session, SessionListener
from failover_client.net._completions import Completion, dead_error, run_all
from failover_client.stomp._batch import GroupCommit
from failover_client.stomp._flow import BrokerKind
from failover_client.stomp._heartbeat import HeartbeatMonitor, HeartbeatState
from failover_client.stomp._pagein import PageIn
from failover_client.stomp._receipts import ReceiptBook
from failover_client.stomp._transport import BoundTransport
from failover_client.uri import BrokerAddress

__all__ = ["Phase", "SessionState"]

_log = logging.getLogger("failover_client.stomp")

Phase = Literal["connecting", "open", "lost", "closed"]


class SessionState:
    """The shared state of one session (see the module for who touches what)."""

    __slots__ = (
        "address",
        "broker",
        "broker_kind",
        "bye",
        "bye_receipt",
        "clock",
        "close_timeout",
        "connected_headers",
        "group",
        "handshake_done",
        "handshake_error",
        "heartbeat",
        "listener",
        "lock",
        "lost_cause",
        "monitor",
        "page_in",
        "phase",
        "protocol",
        "receipts",
        "secrets",
        "session",
        "transport",
        "version",
        "write_lock",
    )

    def __init__(
        self,
        session: Session,
        address: BrokerAddress,
        *,
        listener: SessionListener,
        clock: Clock,
        close_timeout: float,
        passcode: str | None,
    ) -> None:
        self.session = session
        """What the listener's callbacks are given as their ``session``."""
        self.address = address
        self.broker = str(address)
        self.listener = listener
        self.clock = clock
        self.close_timeout = close_timeout
        self.secrets = (passcode,)
        """Kept out of every message built from what the broker sends back."""

        self.lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.phase: Phase = "connecting"
        self.lost_cause: BaseException | None = None

        self.handshake_done = LazyEvent()
        """Set by CONNECTED, by a failure during the handshake, or by a cancel."""
        self.handshake_error: ConnectionFailure | None = None
        self.connected_headers: dict[str, str] | None = None
        self.version = "1.2"
        """The STOMP version the broker chose."""
        self.broker_kind: BrokerKind = "unknown"
        """The broker CONNECTED's ``server`` header names (prefetch headers, release)."""

        self.transport: BoundTransport | None = None
        self.receipts = ReceiptBook()
        self.page_in = PageIn(clock)
        """Wakes ActiveMQ queues for subscriptions that hold their messages (``_pagein``)."""
        self.group: GroupCommit | None = None
        """Set when confirmed sends are batched into transactions (after CONNECTED)."""
        self.heartbeat: HeartbeatState | None = None
        self.monitor: HeartbeatMonitor | None = None
        self.bye_receipt: str | None = None
        self.bye = LazyEvent()
        """Set by the DISCONNECT receipt, or when the connection ends without one."""

    def current_phase(self) -> Phase:
        """The phase now (under the lock: for decisions other than the send path's check)."""
        with self.lock:
            return self.phase

    def note_connected(self, headers: dict[str, str]) -> None:
        """CONNECTED arrived (I/O thread): keep its headers for the handshake, then wake it."""
        with self.lock:
            if self.phase == "connecting" and self.connected_headers is None:
                self.connected_headers = headers
        self.handshake_done.set()

    def answered(self) -> tuple[bool, bool]:
        """(still connecting, CONNECTED arrived): what a closed connection was in the middle of."""
        with self.lock:
            return self.phase == "connecting", self.connected_headers is not None

    def bound_transport(self) -> BoundTransport:
        transport = self.transport
        if transport is None:
            raise BrokerUnavailable("session was never opened", broker=self.broker)
        return transport

    def dead_error(self) -> BrokerUnavailable:
        """Why nothing can be written now: closed, not connected yet, or lost (and why)."""
        with self.lock:
            phase, cause = self.phase, self.lost_cause
        return dead_error(phase, cause, broker=self.broker)

    def complete(self, completions: list[Completion] | Completion | None) -> None:
        """Run confirmation callbacks; one that raises is reported, the others still run."""
        run_all(completions, self.report)

    def report(self, error: BaseException) -> None:
        """Log an error that does not end the session (a listener's bug, a stray ERROR)."""
        _log.error("%s: %s", self.broker, error, exc_info=error)
