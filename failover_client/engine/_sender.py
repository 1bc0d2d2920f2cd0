"""The send path: write, confirm, wait, and replay unconfirmed sends on a new session.

:class:`Sender` owns the :class:`Outbox` (the confirmation window and the replay list) and
the send counters, and offers operations on them; what it needs of the connection it asks
through :class:`~failover_client.engine._slot.Lifecycle` (is there a session to write to, is the
connection over). It works under the connection's one lock, with its rules: session calls
under the slot's ``io_lock`` and outside the lock, futures resolved outside it.

This is the hot path (measured against raw stomp.py): a send that finds the connection up and
room in the window takes the lock once, allocates only its outbox entry and its outcome (a
future for ``send_async``, a :class:`~failover_client.engine._latch.Latch` for a blocking
``send``), and does not build the wait machinery.

Poison sends (a frame the broker answers by ending the session) are found as
:mod:`~failover_client.engine._poison` says: :meth:`Sender.blame_loss` and :meth:`Sender.probe`.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

from failover_client._clock import Clock
from failover_client._errors import ConnectionFailure, SendTimeout
from failover_client.engine._arguments import check_timeout, refuse_zero_timeout_for_confirmed_send
from failover_client.engine._budget import PhasedBudget, SendDeadline, wait_phased
from failover_client.engine._dedup import DUPLICATE_ID_HEADER, retag, tagged
from failover_client.engine._future import SendFuture
from failover_client.engine._latch import Latch
from failover_client.engine._observe import Observer, SendObservation, safely, watch_send
from failover_client.engine._outbox import MESSAGE_ID_HEADER, MessageIds, OutboundMessage, Outbox
from failover_client.engine._sender_poison import PoisonSearch, resent
from failover_client.engine._settle import Confirmation, Settling
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


class Sender(PoisonSearch, Settling):
    """Sends of one connection: submit, write, confirm, wait, flush, replay."""

    __slots__ = ("_clock", "_cond", "_counters", "_dedup", "_failover_timeout", "_life", "_lock",
                 "_message_ids", "_outbox", "_spellings", "_tag_duplicates", "_timeout",
                 "observer")  # fmt: skip

    def __init__(
        self,
        *,
        options: FailoverOptions,
        clock: Clock,
        cond: ClockCondition,
        lifecycle: Lifecycle,
        message_ids: MessageIds,
    ) -> None:
        super().__init__()
        self._cond = cond
        self._lock = cond.lock
        self._life = lifecycle
        self._clock = clock
        self._counters = SendCounters()
        # Infinity becomes None (forever); a NaN, which FailoverOptions lets through, is refused.
        self._timeout = check_timeout(options.timeout, name="options.timeout")
        # Artemis callFailoverTimeout: the waits while failing over get a bound of their own.
        self._failover_timeout: float | Unset | None = (
            UNSET
            if options.failover_timeout is None
            else check_timeout(options.failover_timeout, name="options.failover_timeout")
        )
        self._spellings = (
            options.source_of("timeout") or "callTimeout",
            options.source_of("failover_timeout") or "callFailoverTimeout",
        )
        self._message_ids = message_ids
        # dedup=auto: an _AMQ_DUPL_ID for each broker that may drop copies by it (engine._dedup);
        # new sends are built for the current session's (read unlocked: see _write_locked).
        self._dedup = options.dedup == "auto"
        self._tag_duplicates = self._dedup
        self._outbox = Outbox(window=options.confirm_window, max_bytes=options.max_cache_size)
        self.observer: Observer | None = None
        """Told of each send (``_observe``); None costs one test per send."""

    def deadline(self, timeout: float | Unset | None, *, confirmed: bool = False) -> SendDeadline:
        """Absolute clock deadline for a per-call ``timeout`` (UNSET: the options' timeout).

        With UNSET and ``options.failover_timeout`` set, a :class:`PhasedBudget` instead: the
        options' timeout bounds the waits while connected, failover_timeout those while not.

        Raises ConfigurationError for a negative, NaN or non-numeric ``timeout``, and for 0
        when ``confirmed`` (the call would wait for a confirmation): 0 means "do not wait", and
        a confirmed send that timed out at once would report a failure for a message it had
        already written. Infinity means forever.
        """
        if timeout is UNSET:
            if not isinstance(self._failover_timeout, Unset):
                return PhasedBudget(self._timeout, self._failover_timeout, *self._spellings)
            seconds = self._timeout  # validated when the connection was built
        else:
            seconds = check_timeout(timeout)
            if seconds == 0 and confirmed:
                raise refuse_zero_timeout_for_confirmed_send()
        return None if seconds is None else self._clock.monotonic() + seconds

    def headers_for(
        self, headers: Mapping[str, str] | None, message_id: str | None
    ) -> tuple[str, dict[str, str], bool]:
        """The message id (given, from the headers, or new), the headers carrying it, and
        whether the engine owns their ``_AMQ_DUPL_ID`` (:attr:`OutboundMessage.duplicate_id`)."""
        merged = dict(headers or {})
        chosen = message_id or merged.get(MESSAGE_ID_HEADER) or self._message_ids.next()
        merged[MESSAGE_ID_HEADER] = chosen
        # An id the application set itself (the Spark sink's, say) is its own: sent as it is.
        owned = self._dedup and DUPLICATE_ID_HEADER not in merged
        if owned and self._tag_duplicates:
            merged[DUPLICATE_ID_HEADER] = chosen
        return chosen, merged, owned

    # --- sending -----------------------------------------------------------------------------

    def submit(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        *,
        message_id: str | None,
        kind: Literal["confirmed", "tracked", "untracked"],
        deadline: SendDeadline,
        blocking: bool = False,
    ) -> OutboundMessage | None:
        """Wait until connected (and, for confirmed sends, until the window has room); write.

        Returns the outbox entry (None for untracked sends). A confirmed send's outcome is a
        future, or with ``blocking`` a :class:`Latch` that only :meth:`wait_confirmed` reads.
        Raises SendTimeout when ``deadline`` passes first; NotConnected before ``connect()``;
        AllBrokersFailed once the reconnect loop gave up; ConnectionClosed once the
        application closed the connection.
        """
        if kind == "untracked" and message_id is None:
            # Never re-sent, so never duplicated by us: no id is needed to recognise a replay,
            # and ActiveMQ turns every extra STOMP header into a message property, which more
            # than halved its intake of small fire-and-forget messages.
            chosen_id: str | None = None
            merged = dict(headers or {})
            owned = False
        else:
            chosen_id, merged, owned = self.headers_for(headers, message_id)
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
                blocking=blocking,
                duplicate_id=owned,
            )
        except BaseException as exc:
            if observation is not None:
                safely(observation.finished, exc, None)
            raise
        if message is None:
            if owned and (DUPLICATE_ID_HEADER in merged) is not (drops := slot.may_drop_duplicates):
                merged = tagged(merged, chosen_id, drops)
            self._write_untracked(slot, destination, body, merged)
        else:
            with slot.io_lock:
                self._write_locked(slot, message)
        if observation is not None:
            watch_send(observation, message, slot)
        return message

    def submit_async(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        message_id: str | None,
        timeout: float | Unset | None,
    ) -> OutboundMessage:
        """:meth:`submit` of a confirmed, non-blocking send (``send_async``), with its future.

        The same steps with only the branches this kind of send takes: it is the path of
        group commit, where the client's CPU per message is what is measured. With an
        observer the general path runs (it follows the send from here to its outcome).
        ``timeout`` as for :meth:`deadline`; the options' own (UNSET) is counted from the
        moment the send finds it has to wait, so a send that goes straight out reads no clock.
        """
        if timeout is not UNSET or self.observer is not None:
            deadline: SendDeadline | Unset = self.deadline(timeout, confirmed=False)
        else:
            deadline = UNSET
        if self.observer is not None:
            assert not isinstance(deadline, Unset)
            message = self.submit(
                destination,
                body,
                headers,
                message_id=message_id,
                kind="confirmed",
                deadline=deadline,
            )
            assert message is not None  # a confirmed send always has an outbox entry
            return message
        chosen_id, merged, owned = self.headers_for(headers, message_id)
        size = len(body)
        outbox = self._outbox
        with self._lock:  # the condition's mutex: no Python-level enter/exit
            slot = self._life.connected_slot()
            if slot is None or not outbox.has_room(size):
                if isinstance(deadline, Unset):
                    deadline = self.deadline(UNSET)
                slot = self._wait_ready(destination, size, "confirmed", chosen_id, deadline)
            self._counters.sent += 1
            message = outbox.new(
                chosen_id, destination, body, merged, "confirmed", SendFuture(), owned
            )
            outbox.add(message, slot)  # a confirmed send evicts nothing
        with slot.io_lock:
            self._write_locked(slot, message)
        return message

    def send_blocking(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        message_id: str | None,
        deadline: SendDeadline,
    ) -> None:
        """A confirmed send that returns once the broker confirmed it (see :meth:`submit`)."""
        message = self.submit(
            destination,
            body,
            headers,
            message_id=message_id,
            kind="confirmed",
            deadline=deadline,
            blocking=True,
        )
        assert message is not None
        self.wait_confirmed(message, deadline)

    def _enqueue(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        message_id: str | None,
        kind: Literal["confirmed", "tracked", "untracked"],
        deadline: SendDeadline,
        observation: SendObservation | None,
        blocking: bool = False,
        duplicate_id: bool = False,
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
            future: Future[None] | Latch | None = None
            if kind == "confirmed":
                # Only wait_confirmed reads a blocking send's outcome: a latch costs less than
                # a Future (an observed send keeps the Future, whose callback ends its
                # observation). A send_async future is running from the start (its outcome
                # belongs to the broker) and has no condition variable until someone waits.
                future = Latch(self._clock) if blocking and observation is None else SendFuture()
            assert message_id is not None  # only untracked sends go without an id
            message = outbox.new(message_id, destination, body, headers, kind, future, duplicate_id)
            if future is not None and observation is not None:
                message.observation = observation  # a tracked send's ends at its write
            evicted = outbox.add(message, slot)
            if evicted:
                self._counters.evicted += len(evicted)
        return slot, message

    def _wait_ready(
        self,
        destination: str,
        size: int,
        kind: str,
        message_id: str | None,
        deadline: SendDeadline,
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

        if not self._wait(ready, deadline):
            reason = (
                outbox.why_full(size)
                if life.connected_slot() is not None
                else f"not connected ({life.phase()})"
            )
            if isinstance(deadline, PhasedBudget):
                reason += f"; {deadline.exceeded()}"
            raise SendTimeout(f"send to {destination} timed out: {reason}", message_id=message_id)
        life.raise_unusable()
        slot = life.connected_slot()
        assert slot is not None  # ready, and not over: connected
        return slot

    def _wait(self, ready: Callable[[], bool], deadline: SendDeadline) -> bool:
        """Wait (lock held) until ``ready()``; False once ``deadline`` (or its phase's) passed."""
        if isinstance(deadline, PhasedBudget):
            life = self._life
            return wait_phased(
                self._cond,
                self._clock,
                ready,
                lambda: life.connected_slot() is not None,
                deadline,
            )
        return self._cond.wait_until(ready, deadline)

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
        headers, drops = message.headers, slot.may_drop_duplicates
        if message.duplicate_id and (DUPLICATE_ID_HEADER in headers) is not drops:
            headers = retag(message, drops)  # a replay to another kind, or a stale hint
        try:
            session.send(
                message.destination,
                message.body,
                headers,
                Confirmation(self, message, slot),
            )
        except ConnectionFailure as exc:
            # Still in the outbox: it is replayed on the next session.
            self._life.slot_lost(slot, exc)
        except Exception as exc:  # noqa: BLE001 - the adapter refused this one message
            self._finish(message, exc)

    # --- confirmations (the verdicts: ._settle) ----------------------------------------------

    def wait_confirmed(self, message: OutboundMessage, deadline: SendDeadline) -> None:
        """Block until ``message`` is confirmed; SendTimeout (and forget it) after ``deadline``.

        ``message`` was submitted ``blocking``: its outcome is a :class:`Latch` (a Future when
        an observer watches the send).
        """
        outcome = message.future
        assert outcome is not None
        if isinstance(deadline, PhasedBudget):
            confirmed = self._wait_phased_confirmation(message, outcome, deadline)
        else:
            remaining = None if deadline is None else max(0.0, deadline - self._clock.monotonic())
            confirmed = _wait_outcome(outcome, self._clock, remaining)
        if not confirmed:
            with self._cond:
                abandoned = self._outbox.settle(message)
                if abandoned:
                    self._cond.notify_all()
            if abandoned:
                # The caller gets the error, so the message is no longer replayed; it may
                # still reach the broker (a retry by the caller can duplicate it).
                bound = f" ({deadline.exceeded()})" if isinstance(deadline, PhasedBudget) else ""
                error = SendTimeout(
                    f"send to {message.destination} not confirmed in time{bound} (it was "
                    "written, so the broker may still store it)",
                    message_id=message.message_id,
                )
                outcome.set_exception(error)
                raise error
            # Settled by another thread meanwhile, which sets the outcome right after the lock.
            _wait_outcome(outcome, self._clock, None)
        if isinstance(outcome, Latch):
            outcome.outcome()
        else:
            outcome.result()

    def _wait_phased_confirmation(
        self, message: OutboundMessage, outcome: Future[None] | Latch, budget: PhasedBudget
    ) -> bool:
        """Wait for ``message``'s outcome under ``budget``; False when a phase's bound ran out
        (the outcome not taken then: the caller's abandon path reads it)."""
        life = self._life
        with self._cond:
            settled = self._wait(lambda: message.done or life.is_over(), budget)
        if settled:
            # The outcome is set right after the outbox entry was settled (the confirming
            # thread released the lock for it), or by close() / give-up failing every send.
            _wait_outcome(outcome, self._clock, None)
        return settled

    def flush(self, deadline: SendDeadline) -> None:
        """Wait until every outstanding confirmation arrived."""
        life = self._life
        outbox = self._outbox
        with self._cond:
            done = self._wait(lambda: len(outbox) == 0 or life.is_over(), deadline)
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
        self._tag_duplicates = self._dedup and slot.may_drop_duplicates
        for message, previous in observed:
            if message.session is slot and previous is not slot:
                resent(message, previous, slot)
        return replay

    def replay_locked(self, slot: Slot, replay: Iterable[OutboundMessage]) -> None:
        """Write ``replay`` to ``slot`` in order (caller holds ``slot.io_lock``)."""
        for message in replay:
            self._write_locked(slot, message)

    def abandon(self) -> list[OutboundMessage]:
        """Forget every outstanding message (lock held); :meth:`fail` their futures after."""
        return self._outbox.clear()

    @staticmethod
    def fail(pending: Iterable[OutboundMessage], error: BaseException) -> None:
        """Fail the futures of ``pending`` with ``error`` (lock not held: callbacks run)."""
        for message in pending:
            if message.future is not None:
                message.future.set_exception(error)


def _wait_outcome(outcome: Future[None] | Latch, clock: Clock, timeout: float | None) -> bool:
    """Wait up to ``timeout`` (None: until set) for a blocking send's outcome to be set."""
    if isinstance(outcome, Latch):
        return outcome.wait(clock, timeout)
    done = threading.Event()
    outcome.add_done_callback(lambda _: done.set())
    return clock.wait(done, timeout)
