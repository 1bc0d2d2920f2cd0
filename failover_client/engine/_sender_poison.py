"""The sender's part in the poison search: losses counted against the sends on the wire,
suspects replayed one at a time, a poison send quarantined (see :mod:`._poison` for the rules).

A mixin of :class:`~failover_client.engine._sender.Sender`, apart so that each module stays one
concept: it reads the sender's outbox, counters, condition and lifecycle, never its own state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from failover_client._clock import Clock
from failover_client._errors import BrokerRefused, SendRejected
from failover_client._events import PoisonQuarantined
from failover_client.engine._observe import safely
from failover_client.engine._outbox import OutboundMessage, Outbox
from failover_client.engine._poison import PROBE_TIMEOUT, is_poison, is_suspect
from failover_client.engine._slot import Lifecycle, Slot
from failover_client.engine._sync import ClockCondition

if TYPE_CHECKING:
    from failover_client.engine._sender import SendCounters

__all__ = ["PoisonSearch", "resent"]


class PoisonSearch:
    """Blame, probe and quarantine; the state is the :class:`Sender`'s."""

    __slots__ = ()

    _outbox: Outbox
    _counters: SendCounters
    _cond: ClockCondition
    _life: Lifecycle
    _clock: Clock

    def _write_locked(self, slot: Slot, message: OutboundMessage) -> None:
        raise NotImplementedError  # the Sender's

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
                    resent(message, previous, slot)
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


def resent(message: OutboundMessage, previous: object, slot: Slot) -> None:
    observation = message.observation
    assert observation is not None
    before = previous.address if isinstance(previous, Slot) else None
    safely(observation.resent, before, slot.address)
