"""Confirming that the broker took the settlements: ``sync`` (container thread only).

AMQP 1.0 answers no settlement, and a disposition written to the socket is not yet at the
broker: when the process ends (or the socket is closed) while deliveries the broker already
sent wait unread in our receive buffer, Linux ends the connection with a reset and drops what
is still in the send buffer, dispositions included. So :meth:`Probes.ask` puts behind the
dispositions, on each AMQP session that settled some since the last question, a frame the
broker must answer, and the question is answered once every one of those answers came.

The frame is the attach of a small sender link (``failover-client-sync-<n>``), closed again as
soon as the broker attached it; proton offers no way to send a flow with ``echo`` set, and
a receiving link's ``drain`` would change the credit the subscription runs on. Why an attach
answered implies the broker took the dispositions before it: RabbitMQ 3.10 handles all of an
AMQP session's frames in order in one process (``rabbit_amqp1_0_session_process``), turning
each disposition into a call on the session's channel before it reads the next frame, and
writes the attach's reply only after it; ActiveMQ and Artemis handle a connection's frames in
order on one thread as well. proton writes an attach ahead of dispositions it has not encoded
yet (link set-up is an earlier phase of its output than deliveries' work), so the transport
encodes what is pending before the link is made: the attach goes behind the dispositions.

The target of the probe: none (an anonymous relay) where the broker offers
``ANONYMOUS-RELAY`` in its open (ActiveMQ, Artemis, RabbitMQ 4); RabbitMQ 3.x refuses an
attach without an address by ending the AMQP session (and with it the subscription), and
declares a queue for ``/queue/<name>``, so there the probe names ``/queue``, which it parses as
its default exchange with no queue: nothing is declared or checked. Elsewhere the probe names
the subscription's own address, which the broker knows. The link is attached pre-settled
(nothing would be sent on it), so RabbitMQ does not put the session's channel in confirm mode.

An AMQP session that ends before the broker answered its probe fails the question (the broker
may not have read the dispositions); the loss of the whole connection fails it through the
book, as every confirmation. A subscription ended (``unsubscribe``, a drain) after it settled
some has closed its AMQP session: no link can be attached on it, and the broker's answer to
that end, which it sends after handling the frames before, confirms them instead; a question
asked before that answer came waits for it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging

from proton import Connection, Link, ProtonException, Session, symbol

from failover_client._errors import BrokerUnavailable
from failover_client.amqp._errors import Condition
from failover_client.amqp._receiving import Incoming
from failover_client.amqp._state import SessionState

__all__ = ["Probes"]

_log = logging.getLogger("failover_client.amqp")

ANONYMOUS_RELAY = symbol("ANONYMOUS-RELAY")
_RABBITMQ_3_TARGET = "/queue"
"""RabbitMQ 3.x: the default exchange, no queue (``rabbit_routing_util:parse_endpoint``)."""
_PREFIX = "failover-client-sync-"


class _Question:
    """One ``sync``: its token in the book and the probes still to be answered."""

    __slots__ = ("left", "token")

    def __init__(self, token: int, left: int) -> None:
        self.token = token
        self.left = left


class Probes:
    """The probes sent and the questions waiting for them (see the module)."""

    def __init__(self, state: SessionState, incoming: Incoming) -> None:
        self._state = state
        self._incoming = incoming
        self._counter = itertools.count(1)
        self._waiting: dict[str, _Question] = {}
        self._ends: list[tuple[Session, _Question]] = []
        """Questions waiting for the broker's answer to the end of an AMQP session."""
        self.connection: Connection | None = None
        self.target: str | None = None
        """The probes' target address; None for none at all (see :meth:`choose_target`)."""
        self.own_address = True
        """No anonymous relay and not RabbitMQ 3.x: the probe names the subscription's address."""

    def choose_target(self, offered: object, *, rabbitmq: bool, major: int) -> None:
        """Pick the probes' target from the broker's open (see the module)."""
        capabilities = [] if offered is None else list(offered)  # type: ignore[call-overload]
        if ANONYMOUS_RELAY in capabilities:
            self.target, self.own_address = None, False
        elif rabbitmq and major < 4:
            self.target, self.own_address = _RABBITMQ_3_TARGET, False
        else:
            self.target, self.own_address = None, True

    def ask(self, token: int) -> None:
        """Probe each AMQP session that settled some; answer ``token`` once all answered."""
        book = self._state.book
        sessions = self._incoming.take_settled_sessions()
        ending = self._incoming.ending
        if not sessions and not ending:
            book.decide(token, None)  # nothing settled since the last question: nothing to wait for
            return
        question = _Question(token, len(sessions) + len(ending))
        for session in ending:
            self._ends.append((session, question))
        if sessions:
            self._encode_pending()
        for session, address in sessions:
            self._probe(session, address, question)

    def _encode_pending(self) -> None:
        """Have proton encode the frames it owes (the dispositions) before the probe's attach."""
        connection = self.connection
        transport = None if connection is None else connection.transport
        if transport is None:
            return
        # A closed transport raises: the session's loss then fails the question through the book.
        with contextlib.suppress(ProtonException):
            transport.pending()

    def _probe(self, session: Session, address: str, question: _Question) -> None:
        name = f"{_PREFIX}{next(self._counter)}"
        link = session.sender(name)
        link.snd_settle_mode = Link.SND_SETTLED
        if self.own_address:
            link.target.address = address
        elif self.target is not None:
            link.target.address = self.target
        link.open()
        self._waiting[name] = question

    def on_session_ended(self, session: Session) -> None:
        """The broker ended ``session`` (or answered our end of it)."""
        ending = self._incoming.ending
        if session in ending:
            ending.remove(session)
            still = []
            for waiting, question in self._ends:
                if waiting == session:
                    self._answered(question)
                else:
                    still.append((waiting, question))
            self._ends = still

    def _answered(self, question: _Question) -> None:
        question.left -= 1
        if question.left == 0:
            self._state.book.decide(question.token, None)

    def on_remote_attach(self, link: Link) -> bool:
        """The broker answered a probe: its AMQP session's settlements are taken. False if
        ``link`` is not a probe."""
        question = self._waiting.pop(link.name, None)
        if question is None:
            return link.name.startswith(_PREFIX)
        link.close()
        self._answered(question)
        return True

    def on_link_ended(self, link: Link, condition: Condition | None) -> bool:
        """A probe's link (or AMQP session) ended; False if ``link`` is not a probe."""
        if not link.name.startswith(_PREFIX):
            return False
        if link.state & Link.LOCAL_ACTIVE:
            link.close()
        question = self._waiting.pop(link.name, None)
        if question is not None:
            reason = "" if condition is None else f": {condition.text(self._state.secrets)}"
            self._state.book.decide(
                question.token,
                BrokerUnavailable(
                    f"AMQP session ended before the broker confirmed the settlements{reason}",
                    broker=self._state.broker,
                ),
            )
            question.left = -1  # failed: the other probes' answers tell nothing more
        return True
