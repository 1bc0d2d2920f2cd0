"""The send path: write, confirm, wait, and replay unconfirmed sends on a new session.

:class:`Sender` owns the :class:`Outbox` (the confirmation window and the replay list) and
the send counters, and offers operations on them; what it needs of the connection it asks
through :class:`~failover_client.engine._slot.Lifecycle` (is there a session to write to, is the
connection over). It works under the connection's one lock, with its rules: session calls
under the slot's ``io_lock`` and outside the lock, futures resolved outside it.

This is the hot path (measured against raw stomp.py): a send that finds the connection up and
room in the window takes the lock once, allocates only its outbox entry and future, and does not
build the wait machinery.

Poison sends (a frame the broker answers by ending the session) are found as
:mod:`~failover_client.engine._poison` says: :meth:`Sender.blame_loss` and :meth:`Sender.probe`.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Literal

from failover_client._clock import Clock
from failover_client._errors import BrokerRefused, ConnectionFailure, SendRejected, SendTimeout
from failover_client._events import PoisonQuarantined
from failover_client.engine._arguments import check_timeout, refuse_zero_timeout_for_confirmed_send
from failover_client.engine._observe import Observer, SendObservation, safely
from failover_client.engine._outbox import MESSAGE_ID_HEADER, MessageIds, OutboundMessage, Outbox
from failover_client.engine._poison import PROBE_TIMEOUT, is_poison, is_suspect
from failover_client.engine._slot import Lifecycle, Slot
from failover_client.engine._sync import ClockCondition
from failover_client.uri import FailoverOptions

__all__ = ["UNSET", "SendCounters", "Sender", "Unset"]


class Unset(enum.Enum):
    """Marker for "argument not given" where None already means "forever"."""

    TOKEN = enum.auto()


UNSET = Unset.TOKEN


@dataclass
class SendCounters:
    """What the send path counted (changed and read under the connection's lock)."""

    sent: int = 0
    confirmed: int = 0
    rejected: int = 0
    replayed: int = 0
    evicted: int = 0


class Sender:
    """Sends of one connection: submit, write, confirm, wait, flush, replay."""

    def __init__(
        self,
        *,
        options: FailoverOptions,
        clock: Clock,
        cond: ClockCondition,
        lifecycle: Lifecycle,
        message_ids: MessageIds,
    ) -> None:
        self._cond = cond
        self._life = lifecycle
        self._clock = clock
        self._counters = SendCounters()
        # Infinity becomes None (forever); a NaN, which FailoverOptions lets through, is refused.
        self._timeout = check_timeout(options.timeout, name="options.timeout")
        self._message_ids = message_ids
        self._outbox = Outbox(window=options.confirm_window, max_bytes=options.max_cache_size)
        self.observer: Observer | None = None
        """Told of each send (``_observe``); None costs one test per send."""

    def deadline(self, timeout: float | Unset | None, *, confirmed: bool = False) -> float | None:
        """Absolute clock deadline for a per-call ``timeout`` (UNSET: the options' timeout).

        Raises ConfigurationError for a negative, NaN or non-numeric ``timeout``, and for 0
        when ``confirmed`` (the call would wait for a confirmation): 0 means "do not wait", and
        a confirmed send that timed out at once would report a failure for a message it had
        already written. Infinity means forever.
        """
        if timeout is UNSET:
            seconds = self._timeout  # validated when the connection was built
        else:
            seconds = check_timeout(timeout)
            if seconds == 0 and confirmed:
                raise refuse_zero_timeout_for_confirmed_send()
        return None if seconds is None else self._clock.monotonic() + seconds

    def headers_for(
        self, headers: Mapping[str, str] | None, message_id: str | None
    ) -> tuple[str, dict[str, str]]:
        """The message id (given, from the headers, or new) and the headers carrying it."""
        merged = dict(headers or {})
        chosen = message_id or merged.get(MESSAGE_ID_HEADER) or self._message_ids.next()
        merged[MESSAGE_ID_HEADER] = chosen
        return chosen, merged

    # --- sending -----------------------------------------------------------------------------

    def submit(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        *,
        message_id: str | None,
        kind: Literal["confirmed", "tracked", "untracked"],
        deadline: float | None,
    ) -> OutboundMessage | None:
        """Wait until connected (and, for confirmed sends, until the window has room); write.

        Returns the outbox entry (None for untracked sends). Raises SendTimeout when
        ``deadline`` passes first; NotConnected before ``connect()``; AllBrokersFailed once the
        reconnect loop gave up; ConnectionClosed once the application closed the connection.
        """
        if kind == "untracked" and message_id is None:
            # Never re-sent, so never duplicated by us: no id is needed to recognise a replay,
            # and ActiveMQ turns every extra STOMP header into a message property, which more
            # than halved its intake of small fire-and-forget messages.
            chosen_id: str | None = None
            merged = dict(headers or {})
        else:
            chosen_id, merged = self.headers_for(headers, message_id)
        observer = self.observer
        observation = None
        if observer is not None:
            observation = safely(observer.sending, destination, merged, chosen_id)
        try:
            slot, message = self._enqueue(
                destination,
                body,
                merged,
                message_id=chosen_id,
                kind=kind,
                deadline=deadline,
                observation=observation,
            )
        except BaseException as exc:
            if observation is not None:
                safely(observation.finished, exc, None)
            raise
        if message is None:
            self._write_untracked(slot, destination, body, merged)
        else:
            with slot.io_lock:
                self._write_locked(slot, message)
        if observation is not None:
            _watch(observation, message, slot)
        return message

    def _enqueue(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        message_id: str | None,
        kind: Literal["confirmed", "tracked", "untracked"],
        deadline: float | None,
        observation: SendObservation | None,
    ) -> tuple[Slot, OutboundMessage | None]:
        """Wait for a session and room; count the send and enter it in the outbox."""
        size = len(body)
        outbox = self._outbox
        with self._cond:
            slot = self._life.connected_slot()
            if slot is None or (kind == "confirmed" and not outbox.has_room(size)):
                slot = self._wait_ready(destination, size, kind, message_id, deadline)
            self._counters.sent += 1
            if kind == "untracked":
                return slot, None
            future: Future[None] | None = None
            if kind == "confirmed":
                future = Future()
                # A running future cannot be cancelled: its outcome belongs to the broker.
                future.set_running_or_notify_cancel()
            assert message_id is not None  # only untracked sends go without an id
            message = outbox.new(
                message_id=message_id,
                destination=destination,
                body=body,
                headers=headers,
                kind=kind,
                future=future,
            )
            if future is not None:  # a tracked send's observation ends at its write
                message.observation = observation
            evicted = outbox.add(message, slot)
            self._counters.evicted += len(evicted)
        return slot, message

    def _wait_ready(
        self,
        destination: str,
        size: int,
        kind: str,
        message_id: str | None,
        deadline: float | None,
    ) -> Slot:
        """Wait (lock held) until a send can go out; the slot to write to, or raise."""
        life = self._life
        life.raise_unusable()
        outbox = self._outbox

        def ready() -> bool:
            if life.is_over():
                return True
            if life.connected_slot() is None:
                return False
            return kind != "confirmed" or outbox.has_room(size)

        if not self._cond.wait_until(ready, deadline):
            reason = (
                outbox.why_full(size)
                if life.connected_slot() is not None
                else f"not connected ({life.phase()})"
            )
            raise SendTimeout(f"send to {destination} timed out: {reason}", message_id=message_id)
        life.raise_unusable()
        slot = life.connected_slot()
        assert slot is not None  # ready, and not over: connected
        return slot

    def _write_untracked(
        self, slot: Slot, destination: str, body: bytes, headers: Mapping[str, str]
    ) -> None:
        with slot.io_lock:
            session = slot.session
            assert session is not None
            try:
                session.send(destination, body, headers, None)
            except ConnectionFailure as exc:
                # Fire-and-forget without tracking: this message is lost with the session.
                self._life.slot_lost(slot, exc)

    def _write_locked(self, slot: Slot, message: OutboundMessage) -> None:
        """Write ``message`` to ``slot`` (caller holds ``slot.io_lock``)."""
        session = slot.session
        assert session is not None
        if not slot.alive or message.session is not slot:
            return  # stays in (or already moved with) the outbox to the next session
        try:
            session.send(
                message.destination,
                message.body,
                message.headers,
                partial(self._confirmed, message, slot),
            )
        except ConnectionFailure as exc:
            # Still in the outbox: it is replayed on the next session.
            self._life.slot_lost(slot, exc)
        except Exception as exc:  # noqa: BLE001 - the adapter refused this one message
            self._finish(message, exc)

    # --- confirmations -----------------------------------------------------------------------

    def _confirmed(self, message: OutboundMessage, slot: Slot, error: BaseException | None) -> None:
        """A session's on_confirm callback (adapter thread)."""
        if error is not None and isinstance(error, ConnectionFailure):
            # The session died before confirming: the message will be replayed. Whether the
            # adapter says the broker may have read it decides if it is a suspect.
            if message.session is slot:
                message.refused_with = isinstance(error, BrokerRefused)
            return
        if error is not None and message.session is not slot:
            return  # a verdict from a session the message already left; the replay decides
        self._finish(message, error)

    def _finish(self, message: OutboundMessage, error: BaseException | None) -> None:
        with self._cond:
            if not self._outbox.settle(message):
                return
            if error is None:
                self._counters.confirmed += 1
            else:
                self._counters.rejected += 1
            self._cond.notify_all()
        if message.future is not None:
            if error is None:
                message.future.set_result(None)
            else:
                message.future.set_exception(error)

    def wait_confirmed(self, message: OutboundMessage, deadline: float | None) -> None:
        """Block until ``message`` is confirmed; SendTimeout (and forget it) after ``deadline``."""
        future = message.future
        assert future is not None
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        remaining = None if deadline is None else max(0.0, deadline - self._clock.monotonic())
        if not self._clock.wait(done, remaining):
            with self._cond:
                abandoned = self._outbox.settle(message)
                if abandoned:
                    self._cond.notify_all()
            if abandoned:
                # The caller gets the error, so the message is no longer replayed; it may
                # still reach the broker (a retry by the caller can duplicate it).
                error = SendTimeout(
                    f"send to {message.destination} not confirmed in time (it was written, so "
                    "the broker may still store it)",
                    message_id=message.message_id,
                )
                future.set_exception(error)
                raise error
        future.result()

    def flush(self, deadline: float | None) -> None:
        """Wait until every outstanding confirmation arrived."""
        life = self._life
        outbox = self._outbox
        with self._cond:
            done = self._cond.wait_until(lambda: len(outbox) == 0 or life.is_over(), deadline)
            life.raise_unusable()
            if not done:
                raise SendTimeout(f"{len(outbox)} confirmation(s) still outstanding")

    # --- what the connection asks (lock held) ------------------------------------------------

    def counters(self) -> SendCounters:
        """A copy of the counters."""
        return SendCounters(**vars(self._counters))

    def in_flight(self) -> int:
        """Messages awaiting their confirmation (or a replay)."""
        return len(self._outbox)

    def unconfirmed_on(self, slot: Slot) -> list[OutboundMessage]:
        """The messages last written to ``slot`` and not confirmed, oldest first."""
        return self._outbox.on(slot)

    def drained(self, slot: Slot) -> bool:
        """Whether nothing written to ``slot`` awaits its confirmation."""
        return self._outbox.written_to(slot) == 0

    # --- sessions coming and going (called by the connection state) --------------------------

    def take_replay(self, slot: Slot) -> list[OutboundMessage]:
        """The unconfirmed messages not yet written to ``slot``, now assigned to it (lock held)."""
        observed = [(m, m.session) for m in self._outbox.pending() if m.observation is not None]
        replay = self._outbox.take_for(slot)
        self._counters.replayed += len(replay)
        for message, previous in observed:
            if message.session is slot and previous is not slot:
                _resent(message, previous, slot)
        return replay

    def replay_locked(self, slot: Slot, replay: Iterable[OutboundMessage]) -> None:
        """Write ``replay`` to ``slot`` in order (caller holds ``slot.io_lock``)."""
        for message in replay:
            self._write_locked(slot, message)

    def blame_loss(
        self, unconfirmed: list[OutboundMessage], cause: BaseException, *, alone: bool
    ) -> OutboundMessage | None:
        """Count a session's loss against its ``unconfirmed`` messages (lock held).

        ``alone``: nothing else (no subscription either) was unconfirmed on that session.
        Returns the message this loss made poison: it is already out of the outbox (not
        replayed); :meth:`quarantine` fails its caller once the lock is released.
        """
        # An adapter that knows which frames the broker never read fails those with a plain
        # loss (STOMP group commit: the runs after the one in doubt); only the others can be
        # the culprit. One that cannot tell fails them all alike, and all are suspects.
        read = [m for m in unconfirmed if m.refused_with]
        narrowed = isinstance(cause, BrokerRefused) and 0 < len(read) < len(unconfirmed)
        for message in unconfirmed:
            message.losses += 1
            if not narrowed or message.refused_with:
                message.suspect = message.suspect or is_suspect(message.losses, cause)
            message.refused_with = False
        if not alone or len(unconfirmed) != 1 or not is_poison(unconfirmed[0].losses, cause):
            return None
        poison = unconfirmed[0]
        self._outbox.settle(poison)
        self._counters.rejected += 1
        self._cond.notify_all()
        return poison

    def exonerate(self) -> None:
        """Clear every suspicion (lock held): the loss that raised them found its poison."""
        for message in self._outbox.pending():
            message.suspect = False

    def suspects_waiting(self, slot: Slot) -> bool:
        """Whether the next message to replay to ``slot`` is a suspect (lock held)."""
        message = self._outbox.first_not_on(slot)
        return message is not None and message.suspect

    def probe(self, slot: Slot) -> None:
        """Replay to ``slot``, one at a time, the suspect messages (no lock held).

        Stops at the first message that is no suspect (the rest is replayed at once), when
        ``slot`` dies, or when a confirmation takes longer than ``PROBE_TIMEOUT``.
        """
        life = self._life
        while True:
            with self._cond:
                if not slot.alive or life.is_over():
                    return
                message = self._outbox.first_not_on(slot)
                if message is None or not message.suspect:
                    return
                previous, message.session = message.session, slot
                message.writes += 1
                self._counters.replayed += 1
                if message.observation is not None:
                    _resent(message, previous, slot)
            with slot.io_lock:
                self._write_locked(slot, message)

            def settled(probed: OutboundMessage = message) -> bool:
                return probed.done or not slot.alive or life.is_over()

            with self._cond:
                done = self._cond.wait_until(settled, self._clock.monotonic() + PROBE_TIMEOUT)
            if not done:
                return

    @staticmethod
    def quarantine(
        message: OutboundMessage, broker: str, cause: BaseException | None
    ) -> PoisonQuarantined:
        """Fail the caller of a poison ``message`` (lock not held); returns the event to emit."""
        error = SendRejected(
            f"send {message.message_id} to {message.destination} quarantined as poison after "
            f"{message.losses} connection losses (the last: {cause})",
            message_id=message.message_id,
        )
        error.__cause__ = cause
        if message.future is not None:
            message.future.set_exception(error)
        return PoisonQuarantined(
            message.message_id, message.destination, broker, message.losses, cause
        )

    def abandon(self) -> list[OutboundMessage]:
        """Forget every outstanding message (lock held); :meth:`fail` their futures after."""
        return self._outbox.clear()

    @staticmethod
    def fail(pending: Iterable[OutboundMessage], error: BaseException) -> None:
        """Fail the futures of ``pending`` with ``error`` (lock not held: callbacks run)."""
        for message in pending:
            if message.future is not None:
                message.future.set_exception(error)


def _watch(observation: SendObservation, message: OutboundMessage | None, slot: Slot) -> None:
    """End ``observation`` with the send's outcome: its confirmation, or (fire-and-forget)
    now, at its write."""
    future = message.future if message is not None else None
    if future is None:
        safely(observation.finished, None, slot.address)
        return

    def done(settled: Future[None]) -> None:
        written = message.session if message is not None else None
        broker = written.address if isinstance(written, Slot) else None
        safely(observation.finished, settled.exception(), broker)

    future.add_done_callback(done)


def _resent(message: OutboundMessage, previous: object, slot: Slot) -> None:
    observation = message.observation
    assert observation is not None
    before = previous.address if isinstance(previous, Slot) else None
    safely(observation.resent, before, slot.address)
