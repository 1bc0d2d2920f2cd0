"""Waiting until the brokers have the acknowledgements written: ``confirm_settled``.

An acknowledgement is fire-and-forget on the wire (STOMP ``ACK``, AMQP disposition): once
``message.ack()`` returns it is on its way, not at the broker. An application that must know
(one that ends its process next, or one whose next step assumes the broker will not deliver
those messages again) asks :meth:`FailoverConnection.confirm_settled
<failover_client.FailoverConnection.confirm_settled>`: each session that delivered one of the
messages is asked to confirm every frame written on it so far (:class:`~failover_client.adapter.
Syncing`: a STOMP receipt behind the ACKs, an AMQP attach answered behind the dispositions),
all sessions at once, and the answer counts the messages by outcome. Nothing is retried: a
session that died took its unconfirmed acknowledgements with it, and its broker delivers those
messages again (marked redelivered), which is what an application that acknowledges after its
own commit expects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable
from failover_client.adapter import Session, Syncing
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState
from failover_client.engine._subscriptions import Message

__all__ = ["SettleConfirmation", "SettleQuestion", "ask_settled"]


@dataclass(frozen=True)
class SettleConfirmation:
    """How many of the messages' settlements the brokers confirmed, and what became of the rest.

    ``confirmed``: the session that delivered the message confirmed every frame written before
    the question, its settlement included. ``lost``: that session ended first (or before the
    question): the broker redelivers what it did not read. ``unconfirmed``: no answer by the
    deadline, or an adapter that cannot confirm (``unsupported`` of them); the settlement may
    still arrive. ``causes`` names, for each broker that did not confirm, why.
    """

    confirmed: int = 0
    lost: int = 0
    unconfirmed: int = 0
    unsupported: int = 0
    causes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every settlement was confirmed."""
        return self.lost == 0 and self.unconfirmed == 0


class _Waiting:
    """The answers of the sessions asked; ``done`` set once the last one came."""

    def __init__(self, asked: int) -> None:
        self._lock = threading.Lock()
        self._left = asked
        self.outcomes: dict[int, BaseException | None] = {}
        self.done = threading.Event()
        if asked == 0:
            self.done.set()

    def answer(self, key: int, outcome: BaseException | None) -> None:
        with self._lock:
            if key in self.outcomes:
                return  # an adapter answers once; a second call changes nothing
            self.outcomes[key] = outcome
            self._left -= 1
            if self._left == 0:
                self.done.set()

    def outcome(self, key: int) -> tuple[bool, BaseException | None]:
        """(answered, error) for the session ``key``."""
        with self._lock:
            return key in self.outcomes, self.outcomes.get(key)


class SettleQuestion:
    """The question :func:`ask_settled` put to the sessions; :meth:`wait` for the answers.

    Asking and waiting apart let the caller do other work while the brokers go through the
    frames (the Spark source spools its next batch meanwhile).
    """

    def __init__(self, state: ConnectionState, clock: Clock, messages: Iterable[Message]) -> None:
        self._clock = clock
        self._counts: dict[int, int] = {}
        self._slots: dict[int, Slot] = {}
        for message in messages:
            slot = message.session
            if not isinstance(slot, Slot):
                raise TypeError(f"{message!r} did not come from a failover connection's session")
            self._counts[id(slot)] = self._counts.get(id(slot), 0) + 1
            self._slots[id(slot)] = slot
        self._waiting = _Waiting(len(self._slots))
        self._unsupported: set[int] = set()
        for key, slot in self._slots.items():
            if not state.call(slot, self._asking(key)):
                ended = BrokerUnavailable("session ended before the question", broker=slot.broker)
                self._waiting.answer(key, slot.cause or ended)

    def _asking(self, key: int) -> Callable[[Session], None]:
        def sync(session: Session) -> None:
            if not isinstance(session, Syncing):
                self._unsupported.add(key)
                self._waiting.answer(key, None)
                return
            session.sync(lambda outcome: self._waiting.answer(key, outcome))

        return sync

    @property
    def answered(self) -> bool:
        """Every session asked has answered (or ended)."""
        return self._waiting.done.is_set()

    def wait(self, timeout: float | None) -> SettleConfirmation:
        """Wait up to ``timeout`` seconds (None: until each session answers, which its end
        does too) and count the messages by outcome."""
        if timeout is None:
            self._clock.wait(self._waiting.done, None)  # ends: an answer, or the session's end
        elif timeout > 0:
            self._clock.wait(self._waiting.done, timeout)
        confirmed = lost = unconfirmed = 0
        causes: list[str] = []
        for key, slot in self._slots.items():
            answered, error = self._waiting.outcome(key)
            count = self._counts[key]
            if key in self._unsupported:
                unconfirmed += count
                causes.append(f"{slot.broker}: its adapter cannot confirm acknowledgements")
            elif not answered:
                unconfirmed += count
                causes.append(f"{slot.broker}: no confirmation within {timeout:g} s")
            elif error is not None:
                lost += count
                causes.append(f"{slot.broker}: {error}")
            else:
                confirmed += count
        return SettleConfirmation(
            confirmed=confirmed,
            lost=lost,
            unconfirmed=unconfirmed,
            unsupported=sum(self._counts[k] for k in self._unsupported),
            causes=tuple(causes),
        )


def ask_settled(
    state: ConnectionState, clock: Clock, messages: Iterable[Message]
) -> SettleQuestion:
    """Ask every session that delivered one of ``messages`` to confirm the frames written so
    far (the messages must be settled before); returns at once."""
    return SettleQuestion(state, clock, messages)
