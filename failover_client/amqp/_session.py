"""The AMQP session: one open AMQP 1.0 connection to one broker, as the engine sees it.

:class:`AmqpSession` is the public face of parts that each do one thing over one shared
:class:`~failover_client.amqp._state.SessionState`:

* ``_loop``: the proton Container on the session's own thread, and how callers reach it;
* ``_handler``: what proton reports (the open, the end, links, deliveries);
* ``_sending`` and ``_receiving``: sender links and their dispositions, subscriptions and
  their deliveries;
* ``_book``: the confirmation callbacks waiting for the broker.

Callers' methods check that the session is open, then post their work to the container
thread and return: no call waits for the broker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable, ConnectCancelled
from failover_client.adapter import (
    Cancel,
    ConfirmCallback,
    Received,
    SessionListener,
    SubscriptionSpec,
)
from failover_client.amqp._convert import MESSAGE_ID_HEADER, encode_message
from failover_client.amqp._handler import ConnectSettings, Events, crash_error
from failover_client.amqp._loop import ContainerThread
from failover_client.amqp._mismatch import STOMP_ANSWER, answers_stomp
from failover_client.amqp._receiving import ACCEPT, NACK, RELEASE, Settlement, check_prefetch
from failover_client.amqp._sending import Outbound, RecentDestinations
from failover_client.amqp._state import SessionState
from failover_client.net._completions import run_all
from failover_client.uri import BrokerAddress

__all__ = ["AmqpSession"]

_log = logging.getLogger("failover_client.amqp")

_PROBE_TIMEOUT = 1.0
"""Seconds the STOMP probe of a silent port may take (see :mod:`._mismatch`)."""


class AmqpSession:
    """One open AMQP 1.0 connection to one broker.

    Thread-safe: any thread may call any method. Listener callbacks (``on_message``,
    ``on_lost``, ``on_brokers``) and confirmation callbacks run on the session's container
    thread; a slow ``on_message`` holds up everything else the session does (also the
    heart-beats), so the engine hands messages on.

    Confirmation outcomes: ``None`` when the broker accepted the message;
    :class:`SendRejected` when it rejected it, or released it more than ``MAX_RESENDS``
    times, or refused the destination's link; :class:`BrokerUnavailable` when the session is
    lost or closed first. Each exactly once; when ``send`` raises, ``on_confirm`` is never
    called. On loss: the session is marked dead, every outstanding confirmation fails, then
    ``on_lost`` runs once. ``close()`` does not call ``on_lost``.

    Made by :meth:`AmqpConnector.connect <failover_client.amqp.AmqpConnector.connect>`.
    """

    def __init__(
        self,
        address: BrokerAddress,
        *,
        listener: SessionListener,
        clock: Clock,
        settings: ConnectSettings,
        container_id: str | None,
        recent: RecentDestinations | None = None,
    ) -> None:
        self._state = SessionState(
            self, address, listener=listener, clock=clock, password=settings.password
        )
        self._close_timeout = settings.close_timeout
        self._settle_lock = threading.Lock()
        self._settlements: list[Settlement] = []
        """Acks, nacks and releases for the container's next :meth:`_settle_queued`."""
        self._events = Events(self._state, settings, recent)
        self._loop = ContainerThread(
            self._events,
            name=f"failover-client-amqp-{address.authority}",
            on_crash=self._crashed,
            container_id=container_id,
            after_batch=self._events.write_now,
        )

    # -- state -----------------------------------------------------------------------------

    @property
    def address(self) -> BrokerAddress:
        return self._state.address

    @property
    def product(self) -> str | None:
        """The open frame's ``product`` property (e.g. ``apache-activemq-artemis``), if any."""
        product = self._events.remote_properties.get("product")
        return None if product is None else str(product)

    @property
    def is_open(self) -> bool:
        return self._state.is_open

    @property
    def remote_properties(self) -> Mapping[str, Any]:
        """The properties of the broker's open frame (product, version, server list...)."""
        return dict(self._events.remote_properties)

    @property
    def outstanding(self) -> int:
        """Confirmations (sends and subscriptions) still waiting for the broker."""
        return self._state.book.outstanding

    # -- the session's life ----------------------------------------------------------------

    def open(self, timeout: float, cancel: Cancel, *, sniff: bool = False) -> None:
        """Connect, SASL and AMQP open within ``timeout``; on failure release all and raise.

        ``cancel`` (from any thread) ends the wait at once with :class:`ConnectCancelled`.
        ``sniff``: when no open came in time, ask the port whether it speaks STOMP (up to
        1 s more; see :mod:`._mismatch`) to say "protocol mismatch" instead of "no open".
        """
        state = self._state
        remove = cancel.add_callback(self._cancel)
        try:
            if not cancel.cancelled:
                self._loop.start()
                state.clock.wait(state.handshake_done, timeout)
        finally:
            remove()
        with state.lock:
            if state.phase == "open":
                return
            state.phase = "closed"
            error, cancelled = state.handshake_error, state.cancelled or cancel.cancelled
        self._end(polite=False)
        if cancelled:
            raise ConnectCancelled("connect cancelled", broker=state.broker)
        if error is not None:
            raise error
        address = state.address
        if sniff and answers_stomp(address, min(timeout, _PROBE_TIMEOUT)):
            how = f" (no AMQP open within {timeout:g} s; a STOMP CONNECT got an answer)"
            raise BrokerUnavailable(
                STOMP_ANSWER.format(broker=address, how=how, authority=address.authority)
            )
        raise BrokerUnavailable(
            f"no AMQP open within {timeout:g} s (connect timeout)", broker=state.broker
        )

    def _cancel(self) -> None:
        state = self._state
        with state.lock:
            if state.phase != "connecting":
                return
            state.cancelled = True
        state.handshake_done.set()

    def _crashed(self, exc: BaseException) -> None:
        self._state.lose(crash_error(exc, broker=self._state.broker))

    def close(self) -> None:
        """Close with the AMQP close (when open), then end the container and its thread.

        Never raises; idempotent. Waits at most ``close_timeout`` for the broker's answer to
        the close, and as long again for the thread. Confirmations still outstanding fail
        with :class:`BrokerUnavailable` by the time it returns.
        """
        state = self._state
        with state.lock:
            if state.phase == "closed":
                return
            polite = state.phase == "open"
            state.phase = "closed"
        self._end(polite=polite)

    def _end(self, *, polite: bool) -> None:
        state = self._state
        try:
            if self._loop.on_thread():
                self._events.shutdown(polite)
            elif self._loop.post(lambda: self._events.shutdown(polite)):
                if not self._loop.join(2 * self._close_timeout):
                    _log.warning(
                        "%s: container thread still busy after %g s (a listener callback "
                        "is blocking it)",
                        state.broker,
                        2 * self._close_timeout,
                    )
            else:
                self._loop.join(self._close_timeout)
        except Exception:  # noqa: BLE001 - close never raises; the thread ends on its own
            _log.exception("%s: close failed", state.broker)
        run_all(
            state.book.fail_all(
                BrokerUnavailable("session closed before the broker answered", broker=state.broker)
            ),
            state.report,
        )

    # -- work for the container thread ------------------------------------------------------

    def _post(self, call: Any) -> None:
        state = self._state
        if not state.is_open or not self._loop.post(call):
            raise state.dead_error()

    def _when_open(self, call: Any) -> Any:
        """``call`` wrapped to do nothing if the session ended before the container ran it.

        A ``close()`` ends it only where the container runs the shutdown, in the order work
        was handed over: an ack given just before ``close()`` still reaches the broker (else
        the broker would deliver that message again to someone else).
        """

        def run() -> None:
            if self._live():
                call()

        return run

    def _live(self) -> bool:
        """Whether work handed over before now may still run (see :meth:`_when_open`)."""
        state = self._state
        with state.lock:
            return state.phase == "open" or (state.phase == "closed" and not state.shut)

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        """Send one message (durable unless ``persistent: false``); see the class for outcomes.

        Raises :class:`BrokerUnavailable` when the session is closed or lost. Never waits for
        link credit: a message without credit waits, in order, on the container thread.
        """
        state = self._state
        encoded = encode_message(body, headers)
        message_id = headers.get(MESSAGE_ID_HEADER)
        if on_confirm is None:
            outbound = Outbound(destination, encoded, None, message_id)
            self._post(self._when_open(lambda: self._events.outgoing.send(outbound)))
            return
        token = state.book.add(on_confirm)
        if token is None:
            raise state.dead_error()
        outbound = Outbound(destination, encoded, token, message_id)
        try:
            self._post(self._when_open(lambda: self._events.outgoing.send(outbound)))
        except BrokerUnavailable:
            if state.book.discard(token):
                raise
            # The session ended meanwhile and failed this confirmation through on_confirm:
            # raising as well would make the caller count one message twice.

    def subscribe(self, spec: SubscriptionSpec, on_confirm: ConfirmCallback | None = None) -> None:
        """Attach a receiver link for ``spec``; ``on_confirm`` hears the broker's answer.

        ``None`` when the broker attached a source; :class:`SubscriptionRefused` when it
        refused it (the session goes on); the loss cause when the session ended first.
        The link's credit is ``spec.prefetch`` (a :class:`ConfigurationError` here when it is
        below 1), renewed only as deliveries are settled.
        """
        check_prefetch(spec)
        state = self._state
        token: int | None = None
        if on_confirm is not None:
            token = state.book.add(on_confirm)
            if token is None:
                raise state.dead_error()
        try:
            self._post(self._when_open(lambda: self._events.incoming.subscribe(spec, token)))
        except BrokerUnavailable:
            if token is None or state.book.discard(token):
                raise

    def unsubscribe(self, subscription_id: str) -> None:
        """Detach the subscription's link; a durable subscription stays on the broker."""
        self._post(self._when_open(lambda: self._events.incoming.unsubscribe(subscription_id)))

    def ack(self, message: Received) -> None:
        """Accept ``message`` (``client`` mode: and the earlier ones of its subscription)."""
        self._settle(message, ACCEPT)

    def nack(self, message: Received) -> None:
        """A failed delivery: settled *modified* (``delivery-failed``), so the broker delivers
        it again and counts it towards its redelivery limit; towards RabbitMQ, which holds a
        modified delivery till the link ends, *released* (see ``_receiving``)."""
        self._settle(message, NACK)

    def release(self, message: Received) -> None:
        """Settle ``message`` as released: redelivered, not counted as a failed delivery."""
        self._settle(message, RELEASE)

    def _settle(self, message: Received, what: int) -> None:
        """Queue a settlement; the container settles every queued one in one call.

        A handler's acknowledgements come one per message from the engine's thread: one
        posted call each would cost a closure, the mailbox and the container's dispatch per
        message. The first one queued posts the call, which takes all queued by the time it
        runs (in order; so one queued after a later post, an ``unsubscribe`` say, may be
        settled before it: earlier than asked, never later).
        """
        state = self._state
        if not state.is_open:
            raise state.dead_error()
        with self._settle_lock:
            queue = self._settlements
            queue.append((message.ack_id or "", what))
            if len(queue) > 1:
                return  # the call posted for the first is still to run: it takes this one
        try:
            self._post(self._settle_queued)
        except BrokerUnavailable:
            with self._settle_lock:
                self._settlements = []  # the session is dead: none of them can be settled
            raise

    def _settle_queued(self) -> None:
        with self._settle_lock:
            queued, self._settlements = self._settlements, []
        if self._live():
            self._events.incoming.settle_all(queued)

    def sync(self, on_confirm: ConfirmCallback) -> None:
        """``on_confirm(None)`` once the broker took the settlements asked before this call.

        AMQP 1.0 answers no settlement: the call posted here runs on the container thread
        after the one that settles what was queued (``_settle``) and puts, behind those
        dispositions on each AMQP session that settled some, a link attach the broker answers
        in order; ``on_confirm`` is told once every answer came (see ``_probe``), on the
        container thread. Raises :class:`BrokerUnavailable` when the session is closed or
        lost; ``on_confirm`` gets the cause when it ends first.
        """
        state = self._state
        token = state.book.add(on_confirm)
        if token is None:
            raise state.dead_error()
        try:
            self._post(self._when_open(lambda: self._events.probes.ask(token)))
        except BrokerUnavailable:
            if state.book.discard(token):
                raise

    def private_destination(self, name: str) -> tuple[str, Mapping[str, str]]:
        """A destination only this session reads (see :meth:`Session.private_destination`).

        A topic of a name nobody else uses, spelt as the broker of the open frame's
        ``product`` spells one: RabbitMQ ``/topic/<name>`` (the receiver gets an exclusive,
        auto-delete queue bound to ``amq.topic``), ActiveMQ Classic ``topic://<name>``, others
        (Artemis) the bare name, whose auto-created queue the broker deletes once it has no
        consumer and no message. No dynamic source: the address must be known before the
        receiver attaches, and RabbitMQ 3.x refuses dynamic sources.
        """
        product = str(self._events.remote_properties.get("product", ""))
        if product == "RabbitMQ":
            return f"/topic/{name}", {}
        if product == "ActiveMQ":
            return f"topic://{name}", {}
        return name, {}

    def __repr__(self) -> str:
        state = self._state
        with state.lock:
            phase = state.phase
        return (
            f"AmqpSession(broker={state.broker!r}, state={phase}, "
            f"outstanding={state.book.outstanding})"
        )
