"""The send side of one AMQP session (container thread only).

One sender link per destination, attached on first use and kept; each on an AMQP session of
its own, because RabbitMQ answers a target it refuses by ending the whole AMQP session, which
would otherwise take the other destinations' links (and their unsettled deliveries) with it.

A new session attaches links for the destinations the connector's sessions sent to last
(:class:`RecentDestinations`, at most :data:`PRE_ATTACHED` of them) at once, before the broker's
open has come back: the attach goes out in the same write as the open, as proton's own
reconnect re-attaches its links, so the message replayed after a fail-over finds its link
attached with credit instead of waiting one more round trip for the attach (about a third
of a fail-over's time after the broker's end was seen, measured by
``benchmarks/probe_amqp_failover_timeline.py``). A pre-attached destination the broker
refuses is forgotten; nothing waited on it.

A message is written when its link has credit and queued in order until then: a send never
waits for credit on the caller's thread. A confirmed send is settled by the broker's
disposition (its answer is filed in the book and told with the others the same read brought,
see ``_book``): accepted confirms it; rejected fails it with :class:`SendRejected` (the broker's
condition in the message); released or modified (the broker did not take it, and says another
try may work) sends it again, at most :data:`MAX_RESENDS` times, then fails it with
:class:`SendRejected`. A fire-and-forget send goes pre-settled.

A refused link (the broker answers the attach without a target, or ends the link or its AMQP
session with a condition before it was attached) fails the sends waiting for it with
:class:`SendRejected`: nothing of them was transferred. A link that ends *after* it was attached
takes deliveries whose fate is unknown with it: that is the loss of the whole session (a
:class:`BrokerRefused` when the broker named a condition), and the engine replays them.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from proton import Connection, Delivery, Link, Sender, Terminus

from failover_client._errors import ConnectionFailure, SendRejected
from failover_client.amqp._errors import Condition, closed_error, send_rejection
from failover_client.amqp._state import SessionState

__all__ = [
    "MAX_RESENDS",
    "PRE_ATTACHED",
    "Outbound",
    "Outgoing",
    "RecentDestinations",
    "Verdict",
    "verdict",
]

_log = logging.getLogger("failover_client.amqp")

MAX_RESENDS = 3
"""How often a message the broker released (or modified) is sent again before it fails."""

PRE_ATTACHED = 16
"""Destinations a new session attaches sender links for before its first send."""


class RecentDestinations:
    """The destinations the sessions of one connector attached sender links for, newest last.

    Shared by the container threads of the connector's sessions (an old one and the one
    taking over may run at once), hence the lock; touched once per link, not per message.
    """

    def __init__(self, limit: int = PRE_ATTACHED) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._names: OrderedDict[str, None] = OrderedDict()

    def used(self, destination: str) -> None:
        """A session attached a link to ``destination``: it is the newest now."""
        with self._lock:
            self._names[destination] = None
            self._names.move_to_end(destination)
            while len(self._names) > self._limit:
                self._names.popitem(last=False)

    def refused(self, destination: str) -> None:
        """The broker refused ``destination``: do not attach it ahead again."""
        with self._lock:
            self._names.pop(destination, None)

    def snapshot(self) -> list[str]:
        """The destinations, oldest first."""
        with self._lock:
            return list(self._names)


@dataclass
class Outbound:
    """One message on its way: encoded once, written again as it is."""

    destination: str
    encoded: bytes
    token: int | None
    """The confirmation's token in the session's book; None for a fire-and-forget send."""
    message_id: str | None = None
    resends: int = 0


class _SenderLink:
    __slots__ = ("attached", "destination", "link", "queue")

    def __init__(self, link: Sender, destination: str) -> None:
        self.link = link
        self.destination = destination
        self.queue: deque[Outbound] = deque()
        self.attached = False


class Outgoing:
    """Sender links by destination and the deliveries waiting for their disposition."""

    def __init__(
        self,
        state: SessionState,
        fail_session: Callable[[ConnectionFailure], None],
        recent: RecentDestinations | None = None,
    ) -> None:
        self._state = state
        self._fail_session = fail_session
        self._recent = recent if recent is not None else RecentDestinations()
        self.connection: Connection | None = None
        self._by_destination: dict[str, _SenderLink] = {}
        self._by_name: dict[str, _SenderLink] = {}
        self._inflight: dict[str, tuple[_SenderLink, Outbound]] = {}
        self._tags = itertools.count(1)
        self._names = itertools.count(1)

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def attached(self) -> list[str]:
        """The destinations whose links the broker attached, sorted (for tests and reprs)."""
        return sorted(d for d, sender in list(self._by_destination.items()) if sender.attached)

    def send(self, outbound: Outbound) -> None:
        """Write ``outbound`` now if its link has credit, else queue it behind the others."""
        sender = self._by_destination.get(outbound.destination)
        if sender is None:
            sender = self._attach(outbound.destination)
        sender.queue.append(outbound)
        self._pump(sender)

    def attach_recent(self) -> None:
        """Attach links for the destinations sent to last (see the module); before the open."""
        for destination in self._recent.snapshot():
            if destination not in self._by_destination:
                self._attach(destination)

    def _attach(self, destination: str) -> _SenderLink:
        connection = self.connection
        if connection is None:  # posted before the connection existed: cannot happen once open
            raise RuntimeError("send before the AMQP connection was created")
        session = connection.session()
        session.open()
        link = session.sender(f"failover-client-send-{next(self._names)}")
        link.target.address = destination
        link.open()
        sender = _SenderLink(link, destination)
        self._by_destination[destination] = sender
        self._by_name[link.name] = sender
        self._recent.used(destination)
        return sender

    def _pump(self, sender: _SenderLink) -> None:
        link = sender.link
        while sender.queue and link.credit > 0:
            outbound = sender.queue.popleft()
            tag = str(next(self._tags))
            delivery = link.delivery(tag)
            link.send(outbound.encoded)
            link.advance()
            if outbound.token is None:
                delivery.settle()
            else:
                self._inflight[tag] = (sender, outbound)

    # -- proton events (from the handler) ---------------------------------------------------

    def owns(self, link: Link) -> bool:
        return link.name in self._by_name

    def on_flow(self, link: Link) -> None:
        sender = self._by_name.get(link.name)
        if sender is not None:
            self._pump(sender)

    def on_remote_attach(self, link: Link) -> None:
        sender = self._by_name.get(link.name)
        if sender is None:
            return
        if link.remote_target.type != Terminus.UNSPECIFIED:
            sender.attached = True
        # Without a target the broker refused it; the detach with its reason follows.

    def on_disposition(self, delivery: Delivery) -> None:
        entry = self._inflight.get(delivery.tag)
        if entry is None:
            return
        sender, outbound = entry
        answer = verdict(delivery.remote_state, settled=delivery.settled, resends=outbound.resends)
        if answer == "wait":
            return
        del self._inflight[delivery.tag]
        delivery.settle()
        assert outbound.token is not None  # only confirmed sends are in flight
        if answer == "resend":
            outbound.resends += 1
            _log.debug(
                "%s: message to %s released by the broker; sending it again (%d of %d)",
                self._state.broker,
                outbound.destination,
                outbound.resends,
                MAX_RESENDS,
            )
            sender.queue.append(outbound)
            self._pump(sender)
            return
        error: SendRejected | None = None
        if answer == "rejected":
            error = send_rejection(
                Condition.of(delivery.remote.condition),
                broker=self._state.broker,
                destination=outbound.destination,
                message_id=outbound.message_id,
            )
        elif answer == "released":
            error = SendRejected(
                f"{self._state.broker}: broker released the message to "
                f"{outbound.destination} {outbound.resends + 1} times",
                message_id=outbound.message_id,
            )
        self._state.book.decide(outbound.token, error)

    def on_link_ended(self, link: Link, condition: Condition | None) -> bool:
        """The broker ended ``link`` (or its AMQP session); False if it is not a sender of ours."""
        sender = self._by_name.pop(link.name, None)
        if sender is None:
            return False
        if self._by_destination.get(sender.destination) is sender:
            del self._by_destination[sender.destination]
        _close_quietly(link)
        _close_quietly(link.session)
        if sender.attached:
            self._fail_session(
                closed_error(
                    condition,
                    broker=self._state.broker,
                    what=f"sender link to {sender.destination}",
                    secrets=self._state.secrets,
                )
            )
            return True
        self._recent.refused(sender.destination)
        for outbound in sender.queue:
            if outbound.token is not None:
                error = send_rejection(
                    condition,
                    broker=self._state.broker,
                    destination=outbound.destination,
                    message_id=outbound.message_id,
                )
                self._state.book.decide(outbound.token, error)
        sender.queue.clear()
        return True


Verdict = Literal["wait", "accepted", "rejected", "resend", "released"]


def verdict(outcome: object, *, settled: bool, resends: int) -> Verdict:
    """What a disposition from the broker means for a confirmed send sent ``resends`` times again.

    ``wait`` for no outcome yet (or a transactional, partial one); ``accepted`` also for a
    delivery the broker settled without an outcome (it took the message); ``resend`` for a
    released or modified one while :data:`MAX_RESENDS` allows, ``released`` after that.
    """
    if outcome == Delivery.ACCEPTED:
        return "accepted"
    if outcome == Delivery.REJECTED:
        return "rejected"
    if outcome in (Delivery.RELEASED, Delivery.MODIFIED):
        return "resend" if resends < MAX_RESENDS else "released"
    return "accepted" if settled else "wait"


def _close_quietly(endpoint: Any) -> None:
    """Close our end of an endpoint the broker ended (proton frees it once both ends closed)."""
    if endpoint is not None and endpoint.state & endpoint.LOCAL_ACTIVE:
        endpoint.close()
