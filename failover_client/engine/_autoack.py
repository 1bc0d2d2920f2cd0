"""Acknowledgements of ``auto`` callback subscriptions, written once per batch, not per message.

A user's ``auto`` callback subscription goes on the wire in ``client`` mode, whose
acknowledgement is cumulative: acknowledging a message settles every earlier one its session
delivered on the subscription. Its handler worker handles the subscription's messages one at a
time, in delivery order, so once a message is handled so is everything before it, and one
ACK can stand for many. Per-message ACKs cost the broker a frame each (ActiveMQ and RabbitMQ
spend more on them than on the delivery); one ACK per half window keeps the broker's window
open (it refills while the other half is still being handled) at a fraction of the frames.

An acknowledgement is written when, for the message's session:

* half the prefetch window was handled since the last one, or
* nothing more of that session is waiting in the buffer (the broker is idle or the session is
  being left): nothing handled stays unacknowledged while the subscription waits;
* a stop (close, drain, unsubscribe) takes every pending one.

A rejection or a release in ``client`` mode is cumulative too (RabbitMQ rejects or requeues every
earlier unacknowledged message with it), and a broker may refuse an acknowledgement after the
subscription's UNSUBSCRIBE: so the pending acknowledgement of a subscription on a session is
written before any rejection, release or UNSUBSCRIBE there, and a session that stopped consuming
the subscription (being left) gets its handled messages acknowledged one at a time.
"""

from __future__ import annotations

import threading

from failover_client.engine._subscriptions import Message

__all__ = ["AutoAcks"]


class AutoAcks:
    """Per (subscription, session): how many handled messages await their cumulative ACK."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, object], tuple[int, Message]] = {}

    def handled(self, message: Message, *, more: bool) -> Message | None:
        """``message`` was handled; the message to acknowledge now (cumulatively), if any.

        ``more``: further messages of its session wait in the subscription's buffer.
        """
        key = (message.subscription.id, message.session)
        batch = max(1, message.subscription.prefetch // 2)
        with self._lock:
            count = self._pending.get(key, (0, message))[0] + 1
            if count >= batch or not more:
                self._pending.pop(key, None)
                return message
            self._pending[key] = (count, message)
            return None

    def take_for(self, subscription_id: str, session: object) -> Message | None:
        """The pending acknowledgement of one subscription on one session, if any (written
        before a rejection, a release or an UNSUBSCRIBE there)."""
        with self._lock:
            entry = self._pending.pop((subscription_id, session), None)
        return None if entry is None else entry[1]

    def take(self, subscription_id: str) -> list[Message]:
        """Every pending acknowledgement of a subscription (a stop writes them)."""
        with self._lock:
            keys = [k for k in self._pending if k[0] == subscription_id]
            return [self._pending.pop(k)[1] for k in keys]
