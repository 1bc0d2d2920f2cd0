"""The receive side against an in-memory AMQP peer: the credit window and the hand-over.

Two proton engines joined by a byte pump (no socket, no thread): ours drives
:class:`~failover_client.amqp._receiving.Incoming` with the events proton raises, the peer is a
broker that sends as long as it has credit. The peer checks after every exchange what a broker
sees: credit it may still use plus deliveries not yet settled, which ``prefetch`` bounds.
"""

from __future__ import annotations

import random
from typing import Any, cast

import pytest
from proton import Collector, Connection, Delivery, Event, Link, Sender, Transport

from failover_client import BrokerAddress
from failover_client._clock import SystemClock
from failover_client._errors import BrokerUnavailable
from failover_client.adapter import Received, SessionListener, SubscriptionSpec
from failover_client.amqp._book import Book
from failover_client.amqp._convert import encode_message
from failover_client.amqp._handler import ConnectSettings, _major
from failover_client.amqp._receiving import ACCEPT, NACK, RELEASE, Incoming
from failover_client.amqp._session import AmqpSession
from failover_client.amqp._state import SessionState


class Listener:
    def __init__(self) -> None:
        self.messages: list[Received] = []

    def on_message(self, session: object, message: Received) -> None:
        self.messages.append(message)

    def on_lost(self, session: object, cause: BaseException) -> None:
        raise AssertionError(f"lost: {cause}")

    def on_brokers(self, session: object, advertised: object) -> None:
        raise AssertionError("no brokers expected")


class State:
    """The parts of :class:`SessionState` the receive side reads."""

    def __init__(self) -> None:
        self.listener = Listener()
        self.book = Book()
        self.session = None
        self.broker = "peer"
        self.secrets = ()

    def report(self, error: BaseException) -> None:
        raise error


class Peer:
    """Our engine and a broker's, joined in memory."""

    def __init__(
        self, prefetch: int, *, ack: str = "client-individual", overshoot: bool = False
    ) -> None:
        self.prefetch = prefetch
        self.state = State()
        self.incoming = Incoming(cast("SessionState", self.state), self._failed)
        self.incoming.credit_overshoot = overshoot
        self.overshoot = overshoot
        self.ours = Connection()
        self._ours_transport = Transport()
        self._ours_transport.bind(self.ours)
        self.events = Collector()
        self.ours.collect(self.events)
        self.broker = Connection()
        self._broker_transport = Transport(Transport.SERVER)
        self._broker_transport.bind(self.broker)
        self._broker_events = Collector()
        self.broker.collect(self._broker_events)
        self.sender: Sender | None = None
        self.sent = 0
        self.unsettled: dict[str, Delivery] = {}
        """Broker side: sent, not settled by us."""
        self.most_outstanding = 0
        self.ours.open()
        self.incoming.connection = self.ours
        self.incoming.subscribe(
            SubscriptionSpec(id="s1", destination="/queue/q", ack=ack, prefetch=prefetch), None
        )
        self.exchange()
        self.handle(None)

    def _failed(self, error: BaseException) -> None:
        raise AssertionError(f"session failed: {error}")

    def exchange(self) -> None:
        """Move every pending byte both ways, let the broker react, check its window."""
        moved = True
        while moved:
            moved = False
            for source, target in (
                (self._ours_transport, self._broker_transport),
                (self._broker_transport, self._ours_transport),
            ):
                pending = source.pending()
                if pending > 0:
                    before = None if self.sender is None else self.sender.credit
                    target.push(source.peek(pending))
                    source.pop(pending)
                    moved = True
                    self._broker_reacts()
                    self._check(before)

    def _check(self, before: int | None) -> None:
        """The broker's window: credit it may use plus deliveries not settled; towards a broker
        that may deliver the credit it had left once more on a top-up, that too."""
        if self.sender is None:
            return
        outstanding = self.sender.credit + len(self.unsettled)
        if self.overshoot and before is not None and self.sender.credit > before:
            outstanding += before
        self.most_outstanding = max(self.most_outstanding, outstanding)
        assert outstanding <= self.prefetch, (before, self.sender.credit, len(self.unsettled))

    def _broker_reacts(self) -> None:
        while (event := self._broker_events.peek()) is not None:
            kind = event.type
            if kind == Event.CONNECTION_REMOTE_OPEN:
                event.connection.open()
            elif kind == Event.SESSION_REMOTE_OPEN:
                event.session.open()
            elif kind == Event.LINK_REMOTE_OPEN:
                link = event.link
                link.source.copy(link.remote_source)
                link.target.copy(link.remote_target)
                link.open()
                self.sender = cast("Sender", link)
            elif kind == Event.DELIVERY and event.delivery.settled:  # settled by us
                self.unsettled.pop(event.delivery.tag, None)
                event.delivery.settle()
            self._broker_events.pop()

    def send(self, most: int) -> int:
        """The broker sends up to ``most`` messages, as its credit allows; how many it sent."""
        sender = self.sender
        assert sender is not None
        count = 0
        while count < most and sender.credit > 0:
            tag = f"t{self.sent}"
            delivery = sender.delivery(tag)
            sender.send(encode_message(b"m", {"n": str(self.sent)}))
            sender.advance()
            self.unsettled[tag] = delivery
            self.sent += 1
            count += 1
        self.exchange()
        return count

    def handle(self, most: int | None) -> int:
        """Dispatch up to ``most`` of our proton events (None: all); how many deliveries."""
        deliveries = 0
        handled = 0
        while (most is None or handled < most) and (event := self.events.peek()) is not None:
            kind = event.type
            if kind == Event.LINK_REMOTE_OPEN:
                self.incoming.on_remote_attach(event.link)
            elif kind == Event.DELIVERY and not event.link.is_sender:
                self.incoming.on_delivery(event.delivery, cast("Link", event.link))
                deliveries += 1
            self.events.pop()
            handled += 1
        return deliveries

    @property
    def received(self) -> list[Received]:
        return self.state.listener.messages


def test_deliveries_reach_the_listener_only_when_flushed_in_order() -> None:
    peer = Peer(10)
    assert peer.send(5) == 5
    assert peer.handle(None) == 5
    assert peer.received == []  # decoded, waiting for the flush
    peer.incoming.flush()
    assert [m.headers["n"] for m in peer.received] == ["0", "1", "2", "3", "4"]


def test_a_top_up_while_a_read_s_deliveries_wait_for_their_events_grants_nothing_twice() -> None:
    """The broker used its whole credit; acks of the first few are settled while proton
    still holds the rest of the read, their events to come. Those count as credit until
    taken (proton's receiver credit), so the top-up waits; counting them as neither credit
    nor unsettled would grant their credit again (the window would reach 14 of 10)."""
    peer = Peer(10)
    assert peer.send(10) == 10
    while len(peer.received) < 4:
        peer.handle(1)
        peer.incoming.flush()
    peer.incoming.settle_all((m.ack_id or "", ACCEPT) for m in peer.received)
    peer.exchange()  # checks the broker's window
    assert peer.sender is not None
    assert peer.sender.credit == 0  # 4 free: less than half the window, and 6 still to take
    peer.handle(None)
    peer.incoming.flush()
    peer.exchange()
    assert peer.sender.credit == 4  # all taken, the credit ran out: the 4 free are granted
    assert peer.send(100) == 4
    assert peer.most_outstanding == 10


@pytest.mark.parametrize("overshoot", [False, True], ids=["exact broker", "overshooting broker"])
@pytest.mark.parametrize("ack", ["client-individual", "client"])
@pytest.mark.parametrize("prefetch", [1, 2, 7, 100])
def test_the_window_never_passes_prefetch_whatever_the_interleaving(
    ack: str, prefetch: int, overshoot: bool
) -> None:
    rng = random.Random(prefetch)
    peer = Peer(prefetch, ack=ack, overshoot=overshoot)
    total = 40 * prefetch + 50
    settled: set[str] = set()
    while len(settled) < total:
        peer.send(rng.randrange(0, prefetch + 2))
        peer.handle(rng.randrange(0, 2 * prefetch + 3))
        if rng.random() < 0.7:
            peer.incoming.flush()
        waiting = [m for m in peer.received if m.ack_id not in settled]
        if waiting and rng.random() < 0.6:
            chosen = rng.sample(waiting, rng.randrange(1, len(waiting) + 1))
            if ack == "client":
                chosen = [max(chosen, key=lambda m: int(m.ack_id or 0))]
                chosen_ids = {
                    m.ack_id for m in waiting if int(m.ack_id or 0) <= int(chosen[0].ack_id or 0)
                }
            else:
                chosen_ids = {m.ack_id for m in chosen}
            what = (
                rng.choice([ACCEPT, ACCEPT, ACCEPT, NACK, RELEASE]) if ack != "client" else ACCEPT
            )
            peer.incoming.settle_all((m.ack_id or "", what) for m in chosen)
            settled |= {i for i in chosen_ids if i is not None}
        peer.exchange()
        assert peer.sent <= total + prefetch * 40  # never stalls into a loop
        if peer.sent >= total and not waiting and peer.events.peek() is None:
            break
    # Every delivery reached the listener, and the window reopened as it was settled.
    peer.handle(None)
    peer.incoming.flush()
    assert len(peer.received) == peer.sent
    assert peer.most_outstanding == prefetch


def test_towards_an_overshooting_broker_a_top_up_leaves_room_for_the_credit_left() -> None:
    """RabbitMQ 3.x: credit 100, 60 delivered and settled, 40 left. An exact grant of 60
    (window 100) lets the 40 the queue may have in flight come on top: 140. Granting 20
    keeps even that at 100; once the credit ran out the grant is exact again."""
    peer = Peer(100, overshoot=True)
    peer.send(60)
    peer.handle(None)
    peer.incoming.flush()
    peer.incoming.settle_all((m.ack_id or "", ACCEPT) for m in peer.received)
    peer.exchange()
    assert peer.sender is not None
    assert peer.sender.credit == 40  # 60 - 40 = 20: less than half the window, no flow yet
    peer.send(40)
    peer.handle(None)
    peer.incoming.flush()
    peer.exchange()
    assert peer.sender.credit == 60  # the credit ran out: 100 less the 40 unsettled, exactly


def test_an_auto_subscription_settles_each_delivery_once_handed_over() -> None:
    peer = Peer(4, ack="auto")
    for _ in range(10):
        peer.send(4)
        peer.handle(None)
        peer.incoming.flush()
        peer.exchange()
    assert len(peer.received) == 40
    assert peer.unsettled == {}
    assert peer.most_outstanding == 4


def test_settle_all_tops_up_once_and_ignores_unknown_ids() -> None:
    peer = Peer(10)
    peer.send(10)
    peer.handle(None)
    peer.incoming.flush()
    flows: list[int] = []
    link = peer.incoming._by_id["s1"].link
    original = link.flow

    def counting_flow(n: int) -> Any:
        flows.append(n)
        return original(n)

    link.flow = counting_flow  # type: ignore[method-assign]
    peer.incoming.settle_all(
        [("unknown", ACCEPT)] + [(m.ack_id or "", ACCEPT) for m in peer.received]
    )
    assert flows == [10]


@pytest.mark.parametrize(
    ("version", "major"), [("3.10.7", 3), ("4.0.1", 4), (None, 0), ("", 0), ("x.1", 0)]
)
def test_the_major_version_of_an_open_frame(version: object, major: int) -> None:
    assert _major(version) == major


def _open_session() -> AmqpSession:
    settings = ConnectSettings(
        url="amqp://h:5672",
        hostname="h",
        user=None,
        password=None,
        idle_timeout=None,
        ssl_domain=None,
        close_timeout=1.0,
        sasl_mechanisms="ANONYMOUS",
    )
    session = AmqpSession(
        BrokerAddress("amqp", "h", 5672),
        listener=cast("SessionListener", Listener()),
        clock=SystemClock(),
        settings=settings,
        container_id=None,
    )
    session._state.phase = "open"  # as the broker's open makes it; the container never runs
    return session


def _received(ack_id: str) -> Received:
    return Received(
        subscription_id="s1", destination="/queue/q", body=b"", headers={}, ack_id=ack_id
    )


def test_settlements_from_other_threads_reach_the_container_in_one_call_in_order() -> None:
    session = _open_session()
    batches: list[list[tuple[str, int]]] = []
    session._events.incoming.settle_all = lambda items: batches.append(list(items))  # type: ignore[method-assign]
    session.ack(_received("1"))
    session.release(_received("2"))
    session.nack(_received("3"))
    mailbox = session._loop._mailbox
    assert len(mailbox._calls) == 1  # one posted call for the three
    mailbox.on_selectable_readable(None)
    assert batches == [[("1", ACCEPT), ("2", RELEASE), ("3", NACK)]]
    session.ack(_received("4"))  # the queue is empty again: a new call
    assert len(mailbox._calls) == 1
    mailbox.on_selectable_readable(None)
    assert batches[-1] == [("4", ACCEPT)]
    mailbox.release()


def test_a_settlement_on_a_dead_session_raises_and_queues_nothing() -> None:
    session = _open_session()
    session._state.phase = "lost"
    with pytest.raises(BrokerUnavailable):
        session.ack(_received("1"))
    assert session._settlements == []
    session._loop._mailbox.release()
