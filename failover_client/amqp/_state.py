"""What the parts of one AMQP session share: its phase, the callbacks waiting, the listener.

An :class:`~failover_client.amqp.AmqpSession` is put together from parts on two kinds of
thread: callers' threads (``send``, ``subscribe``, ``close``, the connecting thread) and the
session's container thread (``_handler``, ``_sending``, ``_receiving``). Everything proton
owns is touched on the container thread only; this object is what both sides read.

``lock`` guards ``phase``, ``lost_cause``, ``cancelled`` and ``handshake_error``; no listener
or callback is called under it.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable, ConnectionFailure
from failover_client._lazy import LazyEvent
from failover_client.adapter import Session, SessionListener
from failover_client.amqp._book import Book
from failover_client.net._completions import dead_error, run_all
from failover_client.uri import BrokerAddress

__all__ = ["Phase", "SessionState"]

_log = logging.getLogger("failover_client.amqp")

Phase = Literal["connecting", "open", "lost", "closed"]


class SessionState:
    """The shared state of one session (see the module for who touches what)."""

    __slots__ = (
        "address",
        "book",
        "broker",
        "cancelled",
        "clock",
        "handshake_done",
        "handshake_error",
        "listener",
        "lock",
        "lost_cause",
        "phase",
        "secrets",
        "session",
        "shut",
    )

    def __init__(
        self,
        session: Session,
        address: BrokerAddress,
        *,
        listener: SessionListener,
        clock: Clock,
        password: str | None,
    ) -> None:
        self.session = session
        """What the listener's callbacks are given as their ``session``."""
        self.address = address
        self.broker = str(address)
        self.listener = listener
        self.clock = clock
        self.secrets = (password,)
        """Kept out of every message built from what the broker sends back."""
        self.lock = threading.Lock()
        self.phase: Phase = "connecting"
        self.lost_cause: BaseException | None = None
        self.cancelled = False
        self.handshake_done = LazyEvent()
        """Set by the broker's open, by a failure during the handshake, or by a cancel."""
        self.handshake_error: ConnectionFailure | None = None
        self.book = Book()
        self.shut = False
        """Set on the container thread when the shutdown runs: work queued before a
        ``close()`` (acks, sends) still runs ahead of it; nothing queued after it does."""

    @property
    def is_open(self) -> bool:
        with self.lock:
            return self.phase == "open"

    def opened(self) -> bool:
        """The broker's open arrived: the session is open unless the connect gave up first."""
        with self.lock:
            if self.phase != "connecting" or self.cancelled:
                return False
            self.phase = "open"
        self.handshake_done.set()
        return True

    def dead_error(self) -> BrokerUnavailable:
        """Why nothing can be done now: closed, not connected yet, or lost (and why)."""
        with self.lock:
            phase, cause = self.phase, self.lost_cause
        return dead_error(phase, cause, broker=self.broker)

    def lose(self, cause: ConnectionFailure) -> bool:
        """The connection is dead: fail what waits, then tell the listener, exactly once.

        During the handshake only the first cause is recorded (``open()`` raises it). Returns
        whether this call ended an open session.
        """
        with self.lock:
            if self.phase in ("lost", "closed"):
                return False
            if self.phase == "connecting":
                if self.handshake_error is None:
                    self.handshake_error = cause
                self.handshake_done.set()
                return False
            self.phase = "lost"
            self.lost_cause = cause
        run_all(
            self.book.fail_all(
                BrokerUnavailable(f"session lost before the broker answered: {cause}")
            ),
            self.report,
        )
        try:
            self.listener.on_lost(self.session, cause)
        except Exception:  # noqa: BLE001 - the engine's bug must not kill the container thread
            _log.exception("%s: on_lost listener failed", self.broker)
        return True

    def report(self, error: BaseException) -> None:
        """Log an error that does not end the session (a listener's bug)."""
        _log.error("%s: %s", self.broker, error, exc_info=error)
