"""The sender's confirmations: one send's verdict, or a whole transaction's in one pass.

Each confirmed send hands its session a :class:`Confirmation` as ``on_confirm``. Called with a
verdict it settles that one send: the outbox entry goes under the connection's lock, then its
future (or latch) is set outside it. An adapter that confirms many sends by one answer (STOMP
group commit: a COMMIT's receipt confirms its whole transaction) calls ``confirm_together``
once with all of them instead (see :data:`~failover_client.adapter.ConfirmCallback`): one
lock, one wake-up of the threads waiting on the connection (a ``flush()``), rather than one of
each per send, which woke a flushing application once per message.

A mixin of :class:`~failover_client.engine._sender.Sender`, apart so that each module stays one
concept: it reads the sender's outbox, counters and condition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from failover_client._errors import BrokerRefused, ConnectionFailure
from failover_client.engine._future import confirm_outcomes
from failover_client.engine._outbox import OutboundMessage, Outbox
from failover_client.engine._slot import Slot
from failover_client.engine._sync import ClockCondition

if TYPE_CHECKING:
    from failover_client.engine._sender import SendCounters

__all__ = ["Confirmation", "Settling"]


class Confirmation:
    """A send's ``on_confirm``: the verdict of the session it was written to (``slot``)."""

    __slots__ = ("_settling", "confirm_together", "message", "slot")

    def __init__(self, settling: Settling, message: OutboundMessage, slot: Slot) -> None:
        self._settling = settling
        self.message = message
        self.slot = slot
        self.confirm_together: Callable[[Sequence[Confirmation]], None] = settling.confirm_together
        """Confirms many confirmations of this sender at once (the same object for each)."""

    def __call__(self, error: BaseException | None) -> None:
        self._settling.confirmed(self.message, self.slot, error)


class Settling:
    """Settle sends by the broker's verdicts; the state is the :class:`Sender`'s."""

    __slots__ = ("confirm_together",)

    _outbox: Outbox
    _counters: SendCounters
    _cond: ClockCondition

    def __init__(self) -> None:
        # One bound method for all confirmations: an adapter groups them by its identity.
        self.confirm_together: Callable[[Sequence[Confirmation]], None] = self._together

    def confirmed(self, message: OutboundMessage, slot: Slot, error: BaseException | None) -> None:
        """A session's verdict on ``message`` (adapter thread)."""
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

    def _together(self, confirmations: Sequence[Confirmation]) -> None:
        """Every one of ``confirmations`` was confirmed (each as if called with None).

        One pass: the outbox entries under one lock, one wake-up, then the outcomes set
        without a call each (``confirm_outcomes``).
        """
        messages = [confirmation.message for confirmation in confirmations]
        with self._cond:
            settled = self._outbox.settle_all(messages)
            if not settled:
                return
            self._counters.confirmed += len(settled)
            self._cond.notify_all()
        failure = confirm_outcomes([message.future for message in settled])
        if failure is not None:
            raise failure
