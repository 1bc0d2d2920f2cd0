"""The receive side of one AMQP session (container thread only).

Each subscription is one receiver link on an AMQP session of its own: RabbitMQ answers a
source it refuses (``/amq/queue/<missing>``) by ending the AMQP session, and that must end
only the refused subscription, never the others or the connection.

The link gets the subscription's ``prefetch`` as credit, topped up only as deliveries are
settled, so at most ``prefetch`` messages are unsettled at a time, in every ack mode (in
``client`` modes: delivered, not acked; in ``auto`` mode: delivered, ``on_message`` not yet
returned, which the engine's ``client-individual`` subscriptions of ``auto`` users make
"not yet handled"). The window is counted from proton's receiver credit (granted, less the
deliveries we have taken: one proton has read but whose event is still to come counts as
credit) and the deliveries we hold unsettled, so a top-up made while a read's later
deliveries wait for their events grants nothing twice (``tests/test_amqp_receiving.py``).

RabbitMQ before 4.0 delivers past the credit it was given: its AMQP 1.0 link turns a flow into
an absolute credit for the queue, so messages the queue had already sent towards the link
under the old credit (up to what was left of it) come on top of the new credit; measured here
as 101 unsettled deliveries on a link of credit 100. Towards such a broker
(``credit_overshoot``, set from the open frame's ``product`` and ``version``) a top-up made
while credit is left grants that credit once more less, so even if all of it is delivered
twice the window holds; once the credit ran out nothing is in flight and the grant is exact.

Hand-over in batches: a delivery is decoded as its event is handled, and the decoded messages
go to the listener together when proton has handled everything it read (:meth:`Incoming.flush`,
on the reactor's *quiesced* event, and before anything that ends a link or the session), then
each subscription that received some is topped up once. The engine's thread that handles them
is then woken once per read rather than once per message.

AMQP credit counts messages: ``prefetch_bytes`` has no AMQP equivalent and is not sent.
The subscription is confirmed when the broker's attach names a source; refused
(:class:`SubscriptionRefused`) when it names none, or the link or its AMQP session ends with a
condition first. A link that ends *after* it was confirmed is the loss of the whole session
(:class:`BrokerRefused` with the broker's condition): the engine restores the subscription
where it reconnects.

Acknowledgement: ``auto`` accepts each delivery after ``on_message`` returned; ``client``
accepts on :meth:`Incoming.ack` the acked delivery and every earlier one of its subscription
(STOMP's cumulative ``client`` mode); ``client-individual`` only the acked one.

Handing back: :meth:`Incoming.release` settles *released*: redelivered, and not counted as a
failed delivery (the message was never handled: a drain, a close). :meth:`Incoming.nack` (a
handler failed) settles *modified* with ``delivery-failed``: the outcome AMQP defines for a
failed delivery, which the broker redelivers and counts towards its redelivery limit and
dead-letter queue (Artemis, ActiveMQ), so a message that fails every time does not loop
for ever. RabbitMQ 3.10 does not redeliver a *modified* delivery on the link that settled it
(it stays held until the link ends), so towards RabbitMQ (the open frame's ``product``) a nack
releases, which RabbitMQ requeues, as its STOMP adapter does for NACK.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable

from proton import Connection, Delivery, Link, Receiver, Session, Terminus

from failover_client._errors import ConfigurationError, ConnectionFailure
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.amqp._decode import decode_received
from failover_client.amqp._errors import Condition, closed_error, subscription_refusal
from failover_client.amqp._state import SessionState
from failover_client.net._completions import run_all

__all__ = ["ACCEPT", "NACK", "RELEASE", "Incoming", "Settlement", "check_prefetch"]

_log = logging.getLogger("failover_client.amqp")


def check_prefetch(spec: SubscriptionSpec) -> None:
    """Refuse a prefetch below 1 (ConfigurationError naming the subscription)."""
    prefetch = spec.prefetch
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
        raise ConfigurationError(
            f"subscription {spec.id!r}: prefetch must be a whole number >= 1, got {prefetch!r}"
        )


class _Subscription:
    __slots__ = ("confirmed", "link", "settled", "spec", "token", "unsettled")

    def __init__(self, spec: SubscriptionSpec, link: Receiver, token: int | None) -> None:
        self.spec = spec
        self.link = link
        self.token = token
        self.confirmed = False
        self.unsettled: OrderedDict[str, Delivery] = OrderedDict()
        """Delivered, not yet settled, by ack id, in delivery order."""
        self.settled = False
        """Settled some since :meth:`Incoming.take_settled_sessions` last asked (``_probe``)."""


ACCEPT = 0
NACK = 1
RELEASE = 2
Settlement = tuple[str, int]
"""An ack id and what to do with it: :data:`ACCEPT`, :data:`NACK` or :data:`RELEASE`."""


class Incoming:
    """Receiver links by subscription id and the deliveries they hold."""

    def __init__(
        self,
        state: SessionState,
        fail_session: Callable[[ConnectionFailure], None],
    ) -> None:
        self._state = state
        self._fail_session = fail_session
        self.connection: Connection | None = None
        self._by_id: dict[str, _Subscription] = {}
        self._by_name: dict[str, _Subscription] = {}
        self._ack_ids: dict[str, _Subscription] = {}
        self._counter = itertools.count(1)
        self._ready: list[tuple[_Subscription, Received]] = []
        """Decoded, not yet handed to the listener (:meth:`flush`)."""
        self.first_acquirer_marks_first = False
        """Set when the broker is known to mark first deliveries (see ``_convert``)."""
        self.nack_releases = False
        """Set when the broker does not redeliver a *modified* delivery (RabbitMQ 3.x)."""
        self.credit_overshoot = False
        """Set when the broker may deliver past a top-up's credit (RabbitMQ before 4.0)."""
        self.ending: list[Session] = []
        """AMQP sessions of subscriptions ended with settlements, till the broker's end came."""

    def subscribe(self, spec: SubscriptionSpec, token: int | None) -> None:
        connection = self.connection
        if connection is None:
            raise RuntimeError("subscribe before the AMQP connection was created")
        if spec.id in self._by_id:
            self.unsubscribe(spec.id)  # a second subscribe with one id replaces the first
        session = connection.session()
        session.open()
        durable = spec.durable_name is not None
        name = spec.durable_name or f"failover-client-sub-{next(self._counter)}"
        link = session.receiver(name)
        link.source.address = spec.destination
        if durable:
            # Survives the link's detach and the connection: the broker keeps the messages.
            link.source.durability = Terminus.DELIVERIES
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
        link.target.address = spec.destination
        link.open()
        link.flow(spec.prefetch)
        subscription = _Subscription(spec, link, token)
        self._by_id[spec.id] = subscription
        self._by_name[link.name] = subscription

    def unsubscribe(self, subscription_id: str) -> None:
        """Stop the subscription; a durable one only detaches (it stays on the broker)."""
        self.flush()  # what it delivered before reaches the listener before it ends
        subscription = self._by_id.pop(subscription_id, None)
        if subscription is None:
            return
        self._forget(subscription)
        link = subscription.link
        if subscription.spec.durable_name is not None:
            link.detach()
        else:
            link.close()
        link.session.close()
        if subscription.settled:
            # Its dispositions are confirmed by the broker's answer to this end (``_probe``).
            self.ending.append(link.session)
        if subscription.token is not None:
            # Unsubscribed before the broker answered: the subscription was never in force.
            run_all(self._state.book.complete(subscription.token, None), self._state.report)

    def ack(self, ack_id: str) -> None:
        self.settle_all(((ack_id, ACCEPT),))

    def nack(self, ack_id: str) -> None:
        """A handler failed: *modified* (delivery failed), or *released* (see the module)."""
        self.settle_all(((ack_id, NACK),))

    def release(self, ack_id: str) -> None:
        """Never handled: *released*, redelivered without counting a failed delivery."""
        self.settle_all(((ack_id, RELEASE),))

    def settle_all(self, settlements: Iterable[Settlement]) -> None:
        """Settle each in order, then top up the credit of each subscription once."""
        touched: dict[int, _Subscription] = {}
        for ack_id, what in settlements:
            if what == ACCEPT:
                outcome = Delivery.ACCEPTED
            elif what == RELEASE or self.nack_releases:
                outcome = Delivery.RELEASED
            else:
                outcome = Delivery.MODIFIED
            subscription = self._settle(ack_id, outcome)
            if subscription is not None:
                touched[id(subscription)] = subscription
        for subscription in touched.values():
            self._top_up(subscription)

    def _settle(self, ack_id: str, outcome: int) -> _Subscription | None:
        subscription = self._ack_ids.get(ack_id)
        if subscription is None:
            _log.debug("%s: ack/nack of an unknown or settled delivery", self._state.broker)
            return None
        unsettled = subscription.unsettled
        if outcome == Delivery.ACCEPTED and subscription.spec.ack == "client":
            settle = []
            for key in unsettled:
                settle.append(key)
                if key == ack_id:
                    break
        else:
            settle = [ack_id]
        ack_ids = self._ack_ids
        subscription.settled = True
        for key in settle:
            delivery = unsettled.pop(key)
            del ack_ids[key]
            if outcome == Delivery.MODIFIED:
                delivery.local.failed = True  # counts towards the broker's redelivery limit
            delivery.update(outcome)
            delivery.settle()
        return subscription

    def take_settled_sessions(self) -> list[tuple[Session, str]]:
        """The AMQP sessions (and addresses) of the subscriptions that settled some since the
        last call."""
        sessions = []
        for subscription in self._by_id.values():
            if subscription.settled:
                subscription.settled = False
                sessions.append((subscription.link.session, subscription.spec.destination))
        return sessions

    def _top_up(self, subscription: _Subscription) -> None:
        link = subscription.link
        prefetch = subscription.spec.prefetch
        credit = link.credit  # granted less taken (``advance``): see the module
        wanted = prefetch - credit - len(subscription.unsettled)
        if self.credit_overshoot and credit > 0:
            wanted -= credit  # what is left may come twice (see the module)
        # In batches of half the window: one flow frame per delivery would double the traffic;
        # but at once when the credit ran out, or the broker would wait for the rest of a batch.
        if wanted > 0 and (wanted >= prefetch // 2 or credit <= 0):
            link.flow(wanted)

    def _forget(self, subscription: _Subscription) -> None:
        self._by_name.pop(subscription.link.name, None)
        for key in subscription.unsettled:
            self._ack_ids.pop(key, None)
        subscription.unsettled.clear()

    # -- proton events (from the handler) ---------------------------------------------------

    def owns(self, link: Link) -> bool:
        return link.name in self._by_name

    def on_remote_attach(self, link: Link) -> None:
        subscription = self._by_name.get(link.name)
        if subscription is None or subscription.confirmed:
            return
        if link.remote_source.type == Terminus.UNSPECIFIED:
            return  # refused: the detach with its reason follows
        subscription.confirmed = True
        token, subscription.token = subscription.token, None
        if token is not None:
            run_all(self._state.book.complete(token, None), self._state.report)

    def on_delivery(self, delivery: Delivery, link: Link) -> None:
        """Decode a complete delivery of ``link`` (its event's own wrapper) and keep it for
        :meth:`flush`."""
        subscription = self._by_name.get(link.name)
        if subscription is None or delivery.partial or not delivery.readable:
            return
        raw = link.recv(delivery.pending) or b""
        link.advance()
        ack_id = f"{next(self._counter)}"
        spec = subscription.spec
        item = decode_received(
            raw,
            subscription_id=spec.id,
            destination=spec.destination,
            ack_id=ack_id,
            first_acquirer_marks_first=self.first_acquirer_marks_first,
        )
        subscription.unsettled[ack_id] = delivery
        self._ack_ids[ack_id] = subscription
        self._ready.append((subscription, item))

    def flush(self) -> None:
        """Hand every decoded delivery to the listener, in order; then top up each
        subscription that received some once (see the module)."""
        if not self._ready:
            return
        ready, self._ready = self._ready, []
        state = self._state
        on_message = state.listener.on_message
        session = state.session
        touched: dict[int, _Subscription] = {}
        for subscription, item in ready:
            try:
                on_message(session, item)
            except Exception as exc:  # noqa: BLE001 - a raising listener must not end the session
                state.report(exc)
            spec = subscription.spec
            if spec.ack == "auto" and self._by_id.get(spec.id) is subscription:
                self._settle(item.ack_id or "", Delivery.ACCEPTED)
            touched[id(subscription)] = subscription
        for subscription in touched.values():
            if self._by_id.get(subscription.spec.id) is subscription:
                # A delivery changes nothing the window is made of (one less credit, one more
                # unsettled) but this: the credit ran out while settled ones wait for a top-up
                # smaller than half the window; or ``auto`` ones were settled above.
                self._top_up(subscription)

    def on_link_ended(self, link: Link, condition: Condition | None) -> bool:
        """The broker ended ``link`` (or its AMQP session); False if it is not ours."""
        self.flush()  # what it delivered before reaches the listener before the end does
        subscription = self._by_name.get(link.name)
        if subscription is None:
            return False
        self._by_id.pop(subscription.spec.id, None)
        self._forget(subscription)
        if link.state & Link.LOCAL_ACTIVE:
            link.close()
        if link.session.state & Link.LOCAL_ACTIVE:
            link.session.close()
        if subscription.confirmed:
            self._fail_session(
                closed_error(
                    condition,
                    broker=self._state.broker,
                    what=f"subscription to {subscription.spec.destination}",
                    secrets=self._state.secrets,
                )
            )
            return True
        error = subscription_refusal(
            condition,
            broker=self._state.broker,
            destination=subscription.spec.destination,
            subscription_id=subscription.spec.id,
        )
        _log.info("%s", error)
        if subscription.token is not None:
            run_all(self._state.book.complete(subscription.token, error), self._state.report)
        return True
