"""Acknowledgements of ``auto`` callback subscriptions, written once per batch, not per message.

A user's ``auto`` callback subscription goes on the wire in ``client`` mode, whose
acknowledgement is cumulative: acknowledging a message settles every earlier one its session
delivered on the subscription. Its handler worker handles the subscription's messages one at a
time, in delivery order, so once a message is handled so is everything before it, and one
ACK can stand for many. Per-message ACKs cost the broker a frame each (ActiveMQ and RabbitMQ
spend more on them than on the delivery); one ACK per half window keeps the broker's window
open (it refills while the other half is still being handled) at a fraction of the frames,
as ActiveMQ's own client (its delivered acknowledgement at half the prefetch) and AMQP
receivers (credit topped up at half the window) do.

An acknowledgement is written when, for the message's session:

* half the prefetch window, at most :data:`ACK_BATCH_MAX` messages, was handled since the last
  one;
* the buffer stayed empty for :data:`ACK_LINGER` after it (the broker is idle): nothing
  handled stays unacknowledged while the subscription waits. A buffer that empties for a
  moment, as it does whenever the handler is faster than the broker, does not write one:
  with fewer than half the window pending the broker still has half a window of credit and
  is sending already, and an ACK per momentary gap costs the broker a frame per few messages;
* the session's own messages ran out while another session's wait in the buffer (a move), or
  the session stopped consuming the subscription (being left): one at a time, at once;
* a stop (close, drain, unsubscribe) takes every pending one, and a session being left gets
  its pending ones written before it is flushed and closed.

A rejection or a release in ``client`` mode is cumulative too (RabbitMQ rejects or requeues every
earlier unacknowledged message with it), and a broker may refuse an acknowledgement after the
subscription's UNSUBSCRIBE: so the pending acknowledgement of a subscription on a session is
written before any rejection, release or UNSUBSCRIBE there.
"""

from __future__ import annotations

import threading

from failover_client.engine._slot import Slot
from failover_client.engine._subscriptions import Message, Subscription

__all__ = ["ACK_BATCH_MAX", "ACK_LINGER", "AutoAcks", "ack_batch", "batched", "may_wait"]

ACK_LINGER = 0.05
"""Seconds a subscription's buffer stays empty before its pending acknowledgements are written."""

ACK_BATCH_MAX = 100
"""The most handled messages one cumulative acknowledgement stands for, whatever the window.

ActiveMQ Classic 5.17 stops dispatching to a fast ``client``-mode STOMP consumer whose
cumulative ACKs each cover 500 or more messages: at prefetch 1,000 (1 KiB messages, an ACK
every 500) it delivered 6,400 of 10,000 queued messages and then nothing, an ACK every 1,000 at
prefetch 2,000 stalled at 4,400; ACKs every 100 to 300 messages at either window drained all
10,000 in 0.5 s. Our own ``auto`` consumer at prefetch 1,000 waited out :data:`ACK_LINGER` at
each stall (7,000 msg/s against 20,000 for a broker auto-ack one). An ACK per 100 messages
costs the broker a frame per 1% of the deliveries.
"""


def ack_batch(prefetch: int) -> int:
    """Handled messages per cumulative acknowledgement for a window of ``prefetch``."""
    return max(1, min(prefetch // 2, ACK_BATCH_MAX))


def batched(subscription: Subscription) -> bool:
    """Whether the engine acknowledges ``subscription`` cumulatively, in batches."""
    return subscription.ack == "auto" and subscription.spec.ack == "client"


def may_wait(message: Message, unfinished: int = 0) -> bool:
    """Whether the acknowledgement of ``message``, just handled, may wait for a later one: more
    of its session is buffered, or nothing is (the worker writes it after ``ACK_LINGER``); not
    when other sessions' messages are next, nor on a session that stopped consuming it.
    ``unfinished``: its session's messages handled before it and not finished yet."""
    slot, subscription = message.session, message.subscription
    if isinstance(slot, Slot) and slot.releases(subscription.id):
        return False
    inbox = subscription.inbox
    return inbox.more_from(slot, unfinished) or inbox.idle()


class AutoAcks:
    """Per (subscription, session): how many handled messages await their cumulative ACK."""

    __slots__ = ("_lock", "_pending")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, object], tuple[int, Message]] = {}

    def handled(self, message: Message, *, more: bool) -> Message | None:
        """``message`` was handled; the message to acknowledge now (cumulatively), if any.

        ``more``: the acknowledgement may wait for a later message (:func:`may_wait`).
        """
        key = (message.subscription.id, message.session)
        batch = ack_batch(message.subscription.prefetch)
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
