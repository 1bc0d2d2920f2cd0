"""The session of the scripted fake broker group: :class:`FakeSession`.

It keeps the adapter contract of :mod:`failover_client.adapter` as strictly as the real
adapters do, because a fake that is gentler than them makes a unit suite pass where production
fails: when the session dies (:meth:`FakeSession.kill`) every confirmation still outstanding is
completed with :class:`~failover_client.BrokerUnavailable` *before* ``on_lost`` is heard, once;
:meth:`FakeSession.close` fails them too but reports no loss; afterwards every operation raises
:class:`~failover_client.BrokerUnavailable`.

It keeps a broker's flow control too: on a subscription with client acknowledgement it has at
most ``spec.prefetch`` messages delivered and not settled (acknowledged, rejected or released;
a ``client`` acknowledgement settles every earlier one). A message offered beyond that waits
"on the broker" (:meth:`FakeSession.waiting`) and is delivered, on the thread that settled one,
as the window opens. ``flow_control=False`` makes a broker that ignores the window.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from failover_client._errors import (
    BrokerRefused,
    BrokerUnavailable,
    SendRejected,
    SubscriptionRefused,
)
from failover_client.adapter import (
    AdvertisedBrokers,
    ConfirmCallback,
    Received,
    SessionListener,
    SubscriptionSpec,
)
from failover_client.uri import BrokerAddress

__all__ = ["FakeSession", "SentMessage"]

_log = logging.getLogger("failover_client.testing")

SendState = Literal["unconfirmed", "confirmed", "rejected", "failed", "untracked"]


@dataclass
class SentMessage:
    """One message a :class:`FakeSession` received from the client.

    ``state`` is ``failed`` when the session died or closed before confirming it.
    """

    destination: str
    body: bytes
    headers: dict[str, str]
    on_confirm: ConfirmCallback | None
    state: SendState = "unconfirmed"

    @property
    def message_id(self) -> str | None:
        return self.headers.get("failover-message-id")


class FakeSession:
    """A handshaken fake session. Test-side methods run the listener on the calling thread.

    ``notify`` is called after every change a test may wait for (the connector's
    ``wait_until`` re-checks its predicate then).
    """

    def __init__(
        self,
        address: BrokerAddress,
        listener: SessionListener,
        *,
        auto_confirm: bool,
        notify: Callable[[], None] | None = None,
        refused_destinations: frozenset[str] = frozenset(),
        flow_control: bool = True,
        product: str | None = None,
    ) -> None:
        self._address = address
        self._product = product
        self.flow_control = flow_control
        self.listener = listener
        self.auto_confirm = auto_confirm
        self.refused_destinations = refused_destinations
        self._notify = notify or _nothing
        self._lock = threading.Lock()
        self.sent: list[SentMessage] = []
        self.subscriptions: dict[str, SubscriptionSpec] = {}
        self.unsubscribed: list[str] = []
        self.acks: list[Received] = []
        self.nacks: list[Received] = []
        self.releases: list[Received] = []
        self._subscribing: dict[str, ConfirmCallback] = {}
        """Subscriptions not yet confirmed or refused (without ``auto_confirm``)."""
        self.syncs: list[int] = []
        """For each :meth:`sync` asked, how many acks and nacks had been written before it."""
        self._syncing: list[ConfirmCallback] = []
        """Syncs not yet confirmed (without ``auto_confirm``): :meth:`confirm_syncs`."""
        self.alive = True
        """False once killed or closed."""
        self.closed = False
        """True once :meth:`close` was called (also after a kill)."""
        self._tags = itertools.count(1)
        self._unsettled: dict[str, list[str | None]] = {}
        """Per subscription, the ack ids delivered and not settled, oldest first."""
        self._waiting: dict[str, list[Received]] = {}
        """Per subscription, messages offered past the window: still on the broker."""
        self._outbound: collections.deque[Received] = collections.deque()
        self._delivering = threading.RLock()
        self.most_unsettled = 0
        """The most messages any subscription had delivered and unsettled at once."""

    @property
    def address(self) -> BrokerAddress:
        return self._address

    @property
    def product(self) -> str | None:
        return self._product

    # --- the Session protocol (called by the manager) ---------------------------------------

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        with self._lock:
            self._check_alive()
            message = SentMessage(
                destination,
                body,
                dict(headers),
                on_confirm,
                "unconfirmed" if on_confirm is not None else "untracked",
            )
            self.sent.append(message)
            confirm_now = self.auto_confirm and on_confirm is not None
            if confirm_now:
                message.state = "confirmed"
        self._notify()
        if confirm_now and on_confirm is not None:
            on_confirm(None)

    def subscribe(self, spec: SubscriptionSpec, on_confirm: ConfirmCallback | None) -> None:
        """Record ``spec``; confirmed at once with ``auto_confirm``, else by the test.

        A subscription to one of ``refused_destinations`` is refused at once, by name.
        """
        if spec.destination in self.refused_destinations and on_confirm is not None:
            with self._lock:
                self._check_alive()
                self.subscriptions[spec.id] = spec
                self._subscribing[spec.id] = on_confirm
            self.refuse_subscription(spec.id, f"destination {spec.destination} refused")
            return
        with self._lock:
            self._check_alive()
            self.subscriptions[spec.id] = spec
            confirm_now = self.auto_confirm and on_confirm is not None
            if on_confirm is not None and not confirm_now:
                self._subscribing[spec.id] = on_confirm
        self._notify()
        if confirm_now and on_confirm is not None:
            on_confirm(None)

    def unsubscribe(self, subscription_id: str) -> None:
        with self._lock:
            self._check_alive()
            self.subscriptions.pop(subscription_id, None)
            self.unsubscribed.append(subscription_id)
            # Unsettled and waiting messages go back to the broker's queue.
            self._unsettled.pop(subscription_id, None)
            self._waiting.pop(subscription_id, None)
        self._notify()

    def ack(self, message: Received) -> None:
        with self._lock:
            self._check_alive()
            self.acks.append(message)
            ready = self._settle_locked(message, cumulative=True)
        self._notify()
        self._send(ready)

    def nack(self, message: Received) -> None:
        with self._lock:
            self._check_alive()
            self.nacks.append(message)
            ready = self._settle_locked(message, cumulative=True)
        self._notify()
        self._send(ready)

    def release(self, message: Received) -> None:
        with self._lock:
            self._check_alive()
            self.releases.append(message)
            ready = self._settle_locked(message, cumulative=False)
        self._notify()
        self._send(ready)

    def sync(self, on_confirm: ConfirmCallback) -> None:
        """Record the sync; confirmed at once with ``auto_confirm``, else by the test."""
        with self._lock:
            self._check_alive()
            self.syncs.append(len(self.acks) + len(self.nacks))
            if not self.auto_confirm:
                self._syncing.append(on_confirm)
        self._notify()
        if self.auto_confirm:
            on_confirm(None)

    def _settle_locked(self, message: Received, *, cumulative: bool) -> list[Received]:
        """Settle ``message`` (and, ``client`` mode, the earlier ones); what may go now."""
        subscription_id = message.subscription_id
        pending = self._unsettled.get(subscription_id, [])
        if message.ack_id in pending:
            spec = self.subscriptions.get(subscription_id)
            index = pending.index(message.ack_id)
            if cumulative and spec is not None and spec.ack == "client":
                del pending[: index + 1]
            else:
                del pending[index]
        return self._admit_locked(subscription_id)

    def _admit_locked(self, subscription_id: str) -> list[Received]:
        """Messages waiting on the broker that fit the window now (marked delivered)."""
        waiting = self._waiting.get(subscription_id, [])
        ready: list[Received] = []
        while waiting and self._fits_locked(subscription_id):
            ready.append(self._delivered_locked(waiting.pop(0)))
        return ready

    def _fits_locked(self, subscription_id: str) -> bool:
        spec = self.subscriptions.get(subscription_id)
        if spec is None:
            return False
        if spec.ack == "auto" or not self.flow_control:
            return True
        return len(self._unsettled.get(subscription_id, [])) < spec.prefetch

    def _delivered_locked(self, received: Received) -> Received:
        spec = self.subscriptions[received.subscription_id]
        if spec.ack != "auto":
            pending = self._unsettled.setdefault(received.subscription_id, [])
            pending.append(received.ack_id)
            self.most_unsettled = max(self.most_unsettled, len(pending))
        return received

    def _send(self, ready: list[Received]) -> None:
        """Hand ``ready`` to the listener in the broker's order, one thread at a time.

        A real adapter delivers on its one I/O thread; here the test's thread and a thread
        that settled a message may both deliver, so they take turns over one queue.
        """
        with self._lock:
            self._outbound.extend(ready)
        with self._delivering:
            while True:
                with self._lock:
                    if not self._outbound:
                        return
                    received = self._outbound.popleft()
                self.listener.on_message(self, received)

    def private_destination(self, name: str) -> tuple[str, Mapping[str, str]]:
        return f"/temp-queue/{name}", {}

    def close(self) -> None:
        """Close; outstanding confirmations fail with BrokerUnavailable. Never raises."""
        with self._lock:
            if self.closed:
                return
            self.alive = False
            self.closed = True
            pending = self._take_unconfirmed_locked()
        error = BrokerUnavailable(
            "session closed before the broker confirmed", broker=str(self._address)
        )
        for callback, _ in pending:
            try:
                callback(error)
            except Exception:  # noqa: BLE001 - close never raises; the rest still complete
                _log.exception("%s: a confirmation callback failed on close", self._address)
        self._notify()

    def _check_alive(self) -> None:
        if not self.alive:
            raise BrokerUnavailable("session is closed", broker=str(self._address))

    def _take_unconfirmed_locked(
        self, never_read: frozenset[str] = frozenset()
    ) -> list[tuple[ConfirmCallback, bool]]:
        """Every waiting callback, and whether the broker may have read its frame."""
        pending = [m for m in self.sent if m.state == "unconfirmed"]
        for message in pending:
            message.state = "failed"
        callbacks = [
            (m.on_confirm, m.message_id not in never_read)
            for m in pending
            if m.on_confirm is not None
        ]
        callbacks.extend((c, True) for c in self._subscribing.values())
        self._subscribing.clear()
        callbacks.extend((c, False) for c in self._syncing)
        self._syncing.clear()
        return callbacks

    # --- the test's side ----------------------------------------------------------------------

    def unconfirmed(self) -> list[SentMessage]:
        with self._lock:
            return [m for m in self.sent if m.state == "unconfirmed"]

    def message_ids(self) -> list[str | None]:
        """The ``failover-message-id`` of every message received, in order."""
        with self._lock:
            return [m.message_id for m in self.sent]

    def confirm(self, count: int | None = None) -> int:
        """Confirm the ``count`` oldest unconfirmed sends (all when None); returns how many."""
        return self._settle(count, None)

    def reject(self, count: int = 1, reason: str = "rejected by broker") -> int:
        """Answer the ``count`` oldest unconfirmed sends with :class:`SendRejected`."""
        return self._settle(count, reason)

    def _settle(self, count: int | None, reason: str | None) -> int:
        with self._lock:
            pending = [m for m in self.sent if m.state == "unconfirmed"]
            chosen = pending if count is None else pending[:count]
            for message in chosen:
                message.state = "confirmed" if reason is None else "rejected"
        for message in chosen:
            error = None if reason is None else SendRejected(reason, message_id=message.message_id)
            _complete(message, error)
        return len(chosen)

    def confirm_subscriptions(self) -> list[str]:
        """Confirm every subscription still waiting (without ``auto_confirm``); their ids."""
        with self._lock:
            waiting = dict(self._subscribing)
            self._subscribing.clear()
        for callback in waiting.values():
            callback(None)
        return list(waiting)

    def refuse_subscription(self, subscription_id: str, reason: str = "refused by broker") -> None:
        """Refuse a waiting subscription by name, as a STOMP ERROR with its receipt does."""
        with self._lock:
            callback = self._subscribing.pop(subscription_id)
            self.subscriptions.pop(subscription_id, None)
        callback(
            SubscriptionRefused(
                f"{self._address}: subscription {subscription_id!r} refused: {reason}",
                subscription_id=subscription_id,
            )
        )

    def unconfirmed_subscriptions(self) -> list[str]:
        with self._lock:
            return list(self._subscribing)

    def deliver(
        self,
        subscription_id: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        message_id: str | None = None,
        redelivered: bool = False,
        destination: str | None = None,
    ) -> Received:
        """Offer a message to a subscription of this session.

        Delivered on the calling thread if the subscription's window has room, else kept
        waiting on the broker until a settlement opens it (see the module docstring).
        """
        with self._lock:
            spec = self.subscriptions.get(subscription_id)
            if spec is None:
                raise KeyError(f"no subscription {subscription_id!r} on {self._address}")
            received = Received(
                subscription_id=subscription_id,
                destination=destination or spec.destination,
                body=body,
                headers=dict(headers or {}),
                message_id=message_id,
                ack_id=f"{self._address.key}/{next(self._tags)}",
                redelivered=redelivered,
            )
            self._waiting.setdefault(subscription_id, []).append(received)
            ready = self._admit_locked(subscription_id)
        self._send(ready)
        return received

    def unsettled(self, subscription_id: str) -> int:
        """Messages delivered to ``subscription_id`` and not yet settled (client modes)."""
        with self._lock:
            return len(self._unsettled.get(subscription_id, []))

    def waiting(self, subscription_id: str) -> int:
        """Messages offered to ``subscription_id`` and still on the broker (window full)."""
        with self._lock:
            return len(self._waiting.get(subscription_id, []))

    def advertise(
        self,
        brokers: Iterable[BrokerAddress],
        *,
        source: str = "fake",
        redirect: bool = False,
    ) -> AdvertisedBrokers:
        """Name other brokers on this connection, as an AMQP open frame or redirect does.

        The listener hears ``on_brokers`` on the calling thread. Raises BrokerUnavailable on a
        dead session: a broker speaks only on a live connection.
        """
        advertised = AdvertisedBrokers(tuple(brokers), source=source, redirect=redirect)
        with self._lock:
            self._check_alive()
        self.listener.on_brokers(self, advertised)
        return advertised

    def confirm_syncs(self) -> int:
        """Confirm every sync waiting (the broker read what came before); returns how many."""
        with self._lock:
            waiting, self._syncing = self._syncing, []
        for callback in waiting:
            callback(None)
        self._notify()
        return len(waiting)

    def kill(self, cause: BaseException | None = None, *, never_read: Iterable[str] = ()) -> None:
        """Simulate losing the broker, as a real adapter reports it.

        Every outstanding confirmation is completed first, then the listener hears
        ``on_lost`` (once; a second kill, or one after close, does nothing). With a
        :class:`~failover_client.BrokerRefused` cause they fail as refusals, except the sends
        whose message id is in ``never_read`` (frames the broker cannot have read, as STOMP
        group commit tells); otherwise with BrokerUnavailable. A callback that raises does not
        keep the others or ``on_lost`` from running; the first such error is raised
        afterwards, so a test sees it.
        """
        with self._lock:
            if not self.alive:
                return
            self.alive = False
            pending = self._take_unconfirmed_locked(frozenset(never_read))
        broker = str(self._address)
        lost = cause or BrokerUnavailable("connection lost", broker=broker)
        text = f"session lost before the broker confirmed: {lost}"
        error = BrokerUnavailable(text, broker=broker)
        refused = BrokerRefused(text, broker=broker) if isinstance(lost, BrokerRefused) else error
        failures: list[Exception] = []
        for callback, read in pending:
            try:
                callback(refused if read else error)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after on_lost
                failures.append(exc)
        self._notify()
        self.listener.on_lost(self, lost)
        if failures:
            raise failures[0]

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("alive" if self.alive else "dead")
        return f"<FakeSession {self._address} {state} sent={len(self.sent)}>"


def _complete(message: SentMessage, error: BaseException | None) -> None:
    if message.on_confirm is not None:
        message.on_confirm(error)


def _nothing() -> None:
    """The default ``notify``: nobody waits."""
