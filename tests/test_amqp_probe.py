"""``sync`` on AMQP against an in-memory peer: the probe's attach goes behind the dispositions
and the question is answered only by the broker's reply.

Two proton engines joined by a byte pump (no socket, no thread): ours drives
:class:`~failover_client.amqp._receiving.Incoming` and :class:`~failover_client.amqp._probe.
Probes` with the events proton raises; the peer is a broker that records, in the order its
engine read them, the settlements and the attaches it got.
"""

from __future__ import annotations

from typing import Any, cast

from proton import Collector, Connection, Event, Link, Sender, Transport

from failover_client._errors import BrokerUnavailable
from failover_client.adapter import SubscriptionSpec
from failover_client.amqp._convert import encode_message
from failover_client.amqp._errors import Condition
from failover_client.amqp._probe import ANONYMOUS_RELAY, Probes
from failover_client.amqp._receiving import ACCEPT, Incoming
from failover_client.amqp._state import SessionState
from tests.test_amqp_receiving import State


class _Peer:
    def __init__(self) -> None:
        self.state = State()  # the receive side's stand-in: the probes read the same parts
        state = cast("SessionState", self.state)
        self.incoming = Incoming(state, self._failed)
        self.probes = Probes(state, self.incoming)
        self.ours = Connection()
        self._ours = Transport()
        self._ours.bind(self.ours)
        self.events = Collector()
        self.ours.collect(self.events)
        self.broker = Connection()
        self._broker = Transport(Transport.SERVER)
        self._broker.bind(self.broker)
        self._broker_events = Collector()
        self.broker.collect(self._broker_events)
        self.sender: Sender | None = None
        self.seen: list[str] = []
        """What the broker read, in order: ``settled <tag>``, ``attach <name> <address>``."""
        self.answer_attaches = True
        self.answer_ends = True
        self.ours.open()
        self.incoming.connection = self.ours
        self.probes.connection = self.ours
        self.incoming.subscribe(
            SubscriptionSpec(id="s1", destination="/queue/q", ack="client-individual"), None
        )
        self.pump()

    def _failed(self, error: BaseException) -> None:
        raise AssertionError(f"session failed: {error}")

    def to_broker(self) -> None:
        self._move(self._ours, self._broker)
        self._broker_reacts()

    def to_us(self) -> None:
        self._move(self._broker, self._ours)
        self._handle()

    def pump(self) -> None:
        for _ in range(4):
            self.to_broker()
            self.to_us()

    @staticmethod
    def _move(source: Transport, target: Transport) -> None:
        pending = source.pending()
        if pending > 0:
            target.push(source.peek(pending))
            source.pop(pending)

    def _broker_reacts(self) -> None:
        while (event := self._broker_events.peek()) is not None:
            kind = event.type
            if kind == Event.CONNECTION_REMOTE_OPEN:
                event.connection.open()
            elif kind == Event.SESSION_REMOTE_OPEN:
                event.session.open()
            elif kind == Event.LINK_REMOTE_OPEN:
                link = event.link
                if link.is_sender:
                    self.sender = cast("Sender", link)
                else:
                    self.seen.append(f"attach {link.name} {link.remote_target.address}")
                if link.is_sender or self.answer_attaches:
                    link.source.copy(link.remote_source)
                    link.target.copy(link.remote_target)
                    link.open()
            elif kind == Event.LINK_REMOTE_CLOSE:
                event.link.close()
            elif kind == Event.SESSION_REMOTE_CLOSE and self.answer_ends:
                self.seen.append("end")
                event.session.close()
            elif kind == Event.DELIVERY and event.delivery.settled:
                self.seen.append(f"settled {event.delivery.tag}")
                event.delivery.settle()
            self._broker_events.pop()

    def _handle(self) -> None:
        while (event := self.events.peek()) is not None:
            kind = event.type
            link: Any = event.link
            if kind == Event.LINK_REMOTE_OPEN:
                if link.is_sender:
                    assert self.probes.on_remote_attach(link)
                else:
                    self.incoming.on_remote_attach(link)
            elif kind == Event.SESSION_REMOTE_CLOSE:
                condition = Condition.of(event.session.remote_condition)
                for ended in _links(self.ours):
                    if ended.session == event.session and ended.is_sender:
                        assert self.probes.on_link_ended(ended, condition)
                self.probes.on_session_ended(event.session)
            elif kind == Event.DELIVERY and not link.is_sender:
                self.incoming.on_delivery(event.delivery, cast("Link", link))
            self.events.pop()
        self.incoming.flush()

    def deliver(self, count: int) -> None:
        sender = self.sender
        assert sender is not None
        for n in range(count):
            sender.delivery(f"t{n}")
            sender.send(encode_message(b"m", {}))
            sender.advance()
        self.to_us()

    def answers(self) -> list[BaseException | None]:
        return [completion.outcome for completion in self.state.book.take_decided()]


def _asked(peer: _Peer) -> list[BaseException | None]:
    answers: list[BaseException | None] = []
    peer.state.book.add(answers.append)
    return answers


def test_the_probe_follows_the_settlements_and_only_its_answer_confirms() -> None:
    peer = _Peer()
    peer.probes.choose_target([ANONYMOUS_RELAY], rabbitmq=False, major=0)
    peer.deliver(3)
    messages = peer.state.listener.messages
    peer.incoming.settle_all((m.ack_id or "", ACCEPT) for m in messages[:2])
    _asked(peer)
    peer.probes.ask(1)
    assert peer.answers() == []
    peer.answer_attaches = False
    peer.to_broker()
    # The settlements were encoded before the link existed: the broker reads them first.
    assert peer.seen == ["settled t0", "settled t1", "attach failover-client-sync-1 None"]
    peer.to_us()
    assert peer.answers() == []  # written and read, but not answered: not confirmed


def test_the_answer_confirms_and_a_question_with_nothing_settled_is_answered_at_once() -> None:
    peer = _Peer()
    peer.probes.choose_target(None, rabbitmq=True, major=3)
    answers = _asked(peer)
    peer.probes.ask(1)
    assert [completion.outcome for completion in peer.state.book.take_decided()] == [None]
    assert peer.seen == []  # nothing settled: no probe
    peer.deliver(1)
    peer.incoming.settle_all([(peer.state.listener.messages[0].ack_id or "", ACCEPT)])
    _asked(peer)
    peer.probes.ask(2)
    peer.pump()
    assert peer.seen == ["settled t0", "attach failover-client-sync-1 /queue"]
    assert peer.answers() == [None]
    assert answers == []  # told by the container (``take_decided``), not by the probes


def test_a_probe_names_the_subscription_s_address_without_anonymous_relay() -> None:
    peer = _Peer()
    peer.probes.choose_target([], rabbitmq=False, major=0)
    peer.deliver(1)
    peer.incoming.settle_all([(peer.state.listener.messages[0].ack_id or "", ACCEPT)])
    _asked(peer)
    peer.probes.ask(1)
    peer.pump()
    assert peer.seen[-1] == "attach failover-client-sync-1 /queue/q"
    assert peer.answers() == [None]


def test_an_amqp_session_ended_before_the_answer_fails_the_question() -> None:
    peer = _Peer()
    peer.probes.choose_target(None, rabbitmq=True, major=3)
    peer.deliver(1)
    peer.incoming.settle_all([(peer.state.listener.messages[0].ack_id or "", ACCEPT)])
    _asked(peer)
    peer.probes.ask(1)
    peer.answer_attaches = False
    peer.to_broker()
    (probe,) = [
        link for link in _links(peer.broker) if link.name.startswith("failover-client-sync")
    ]
    probe.session.close()  # the broker ends the AMQP session without answering the attach
    peer.to_us()
    (outcome,) = peer.answers()
    assert isinstance(outcome, BrokerUnavailable)
    assert "before the broker confirmed" in str(outcome)


def test_a_subscription_ended_after_settling_is_confirmed_by_the_answer_to_its_end() -> None:
    peer = _Peer()
    peer.probes.choose_target(None, rabbitmq=True, major=3)
    peer.deliver(1)
    peer.incoming.settle_all([(peer.state.listener.messages[0].ack_id or "", ACCEPT)])
    peer.incoming.unsubscribe("s1")  # a drain: the AMQP session ends behind the disposition
    _asked(peer)
    peer.probes.ask(1)
    peer.answer_ends = False
    peer.to_broker()
    assert peer.seen == ["settled t0"]  # no probe: no link can be attached on an ended session
    peer.to_us()
    assert peer.answers() == []  # the broker has not answered the end yet
    peer.broker.session_head(0).close()  # the broker's answer to the end
    peer.to_us()
    assert peer.answers() == [None]
    assert peer.incoming.ending == []
    _asked(peer)
    peer.probes.ask(2)
    assert peer.answers() == [None]  # its end was answered: nothing left to wait for


def _links(connection: Connection) -> list[Link]:
    links = []
    link = connection.link_head(0)
    while link is not None:
        links.append(link)
        link = link.next(0)
    return links
