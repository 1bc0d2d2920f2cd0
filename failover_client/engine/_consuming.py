"""The consuming half of the public API: ``subscribe``, ``drain``, ``confirm_settled``.

A mixin of :class:`~failover_client.engine._connection.FailoverConnection` (kept apart so that
module stays one screenful per concept); the work is :class:`~failover_client.engine._consumers.
Consumers`'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from failover_client._clock import Clock
from failover_client.adapter import AckMode
from failover_client.engine._acksync import SettleConfirmation, SettleQuestion, ask_settled
from failover_client.engine._arguments import check_subscribe, check_timeout
from failover_client.engine._consumers import Consumers
from failover_client.engine._lifetime import ProcessGuard
from failover_client.engine._state import ConnectionState
from failover_client.engine._subscriptions import Handler, Message, Subscription
from failover_client.uri import FailoverOptions

__all__ = ["Consuming"]


class Consuming:
    """``subscribe``, ``drain`` and ``confirm_settled`` of a failover connection."""

    _guard: ProcessGuard
    _consumers: Consumers
    _options: FailoverOptions
    _state: ConnectionState
    _clock: Clock

    # --- subscriptions -----------------------------------------------------------------------

    def subscribe(
        self,
        destination: str,
        handler: Handler | None = None,
        *,
        ack: AckMode = "auto",
        id: str | None = None,
        durable_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefetch: int | None = None,
        prefetch_bytes: int | None = None,
    ) -> Subscription:
        """Subscribe to ``destination``; restored with the same id after fail-over.

        With a ``handler``, it runs for each message on a worker thread of this subscription:
        in order, one at a time, beside (never behind) other subscriptions' handlers and the
        events. Without one, take messages with ``subscription.receive(timeout)`` or iterate.
        At most ``prefetch`` messages (default ``options.consumer_prefetch``; and
        ``prefetch_bytes``, default ``options.consumer_prefetch_bytes``, 0 = no byte bound)
        are delivered and not yet settled: the rest stays on the broker.

        ``ack="auto"``: acknowledged once handled (the handler returned, or the pull consumer
        asked for the next one). ``client`` / ``client-individual``: call ``message.ack()``.
        A handler that raises is reported (``HandlerError``) and its message rejected
        (``nack``, except in ``client`` mode, where that is cumulative) so the broker
        redelivers or dead-letters it. An ack for a message whose session has died is dropped
        (``AckDropped``) and the broker redelivers the message. Allowed before
        :meth:`connect`. Wrong arguments raise ConfigurationError and register nothing.
        """
        self._guard.check()
        check_subscribe(
            destination,
            handler,
            ack=ack,
            id=id,
            durable=durable_name,
            headers=headers,
            prefetch=prefetch,
            prefetch_bytes=prefetch_bytes,
        )
        return self._consumers.subscribe(
            destination,
            handler,
            ack=ack,
            subscription_id=id,
            durable_name=durable_name,
            headers=headers,
            prefetch=self._options.consumer_prefetch if prefetch is None else prefetch,
            prefetch_bytes=(
                self._options.consumer_prefetch_bytes if prefetch_bytes is None else prefetch_bytes
            ),
        )

    def drain(self, timeout: float) -> None:
        """Stop consuming as :meth:`close` does, and keep the connection open for sends.

        For a rolling restart: handlers handle what is buffered for up to ``timeout`` seconds,
        the held acknowledgements are written, what was never handled is handed back, and every
        subscription is unsubscribed on the broker and no longer restored.
        """
        self._guard.check()
        seconds = check_timeout(timeout, name="timeout")
        self._consumers.stop(math.inf if seconds is None else seconds, reason="drain", forget=True)

    def confirm_settled(
        self, messages: Iterable[Message], timeout: float | None
    ) -> SettleConfirmation:
        """Wait up to ``timeout`` seconds (None: no limit) until the brokers have the
        settlements (acknowledgements, rejections) of ``messages``.

        Call it after ``ack()`` (or ``nack()``) of each: an acknowledgement is written without
        an answer, and one still on its way when the process ends, or when its connection is
        reset, is lost (the broker delivers the message again). Each session that delivered
        one of them confirms every frame written on it so far: over STOMP a RECEIPT behind the
        ACKs, over AMQP 1.0 a link attach the broker answers behind the dispositions. Returns
        the counts by outcome (:class:`~failover_client.SettleConfirmation`); never raises for
        a session that ended or did not answer, it counts those as ``lost`` / ``unconfirmed``.
        Acknowledgements held by a ``close`` or ``drain`` under way are written when it ends:
        ask after it.
        """
        seconds = check_timeout(timeout, name="timeout")
        return self.ask_settled(messages).wait(seconds)

    def ask_settled(self, messages: Iterable[Message]) -> SettleQuestion:
        """:meth:`confirm_settled` in two steps: ask now, ``wait(timeout)`` on the answer later
        (the brokers work through the frames meanwhile)."""
        self._guard.check()
        return ask_settled(self._state, self._clock, messages)
