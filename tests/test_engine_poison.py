"""Poison frames: a send or subscription whose every write makes the broker end the session.

The fake connector here kills a session whenever the poison body (or a subscription to the
poison destination) is written to it, as ActiveMQ does with an over-long header and RabbitMQ
with an unknown exchange (an ERROR naming nothing, then the socket closes: BrokerRefused).
Without quarantine the connection would fail over for as long as the frame lives.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import (
    BrokerRefused,
    BrokerUnavailable,
    Disconnected,
    FailoverConnection,
    PoisonQuarantined,
    SendRejected,
    SubscriptionFailed,
    SubscriptionRefused,
)
from failover_client.adapter import SubscriptionSpec
from failover_client.engine._outbox import Outbox
from failover_client.engine._poison import CRASH_LOSSES, POISON_LOSSES
from failover_client.testing import EventRecorder, FakeClock, FakeConnector, FakeSession

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
SAFETY = 5.0  # real seconds, only against a hung test
POISON = b"poison"
POISON_DESTINATION = "/exchange/no-such-exchange/rk"


class PoisonConnector(FakeConnector):
    """Every session it makes dies when a message with the poison body is written to it.

    With ``lose_first_receipts``, the first session confirms nothing: ActiveMQ drops the receipts
    of the frames before the bad one when it closes, so that loss cannot name the culprit.
    """

    def __init__(
        self, *, lose_first_receipts: bool = False, refuse: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.lose_first_receipts = lose_first_receipts
        self.refuse = refuse
        self.first_death_plain = False
        """The first death is a reset without a word (the broker's ERROR lost with it)."""
        self.deaths = 0
        """Die with BrokerRefused (an ERROR naming nothing); else as a crash, without a word."""

    def _die(self, session: FakeSession, address: BrokerAddress) -> None:
        self.deaths += 1
        if self.refuse and not (self.first_death_plain and self.deaths == 1):
            session.kill(BrokerRefused("broker sent ERROR: frame refused", broker=str(address)))
        else:
            session.kill(BrokerUnavailable("connection reset", broker=str(address)))

    def connect(self, address: BrokerAddress, **kwargs: Any) -> FakeSession:
        session = super().connect(address, **kwargs)
        if self.lose_first_receipts and len(self.sessions) == 1:
            session.auto_confirm = False
        write, subscribe = session.send, session.subscribe

        def send(destination: str, body: bytes, headers: Any, on_confirm: Any) -> None:
            if body == POISON:
                write(destination, body, headers, None)  # recorded, never confirmed
                self._die(session, address)
                return
            write(destination, body, headers, on_confirm)

        def subscribe_(spec: SubscriptionSpec, on_confirm: Any) -> None:
            if spec.destination == POISON_DESTINATION:
                subscribe(spec, None)  # recorded, never confirmed
                self._die(session, address)
                return
            subscribe(spec, on_confirm)

        session.send = send  # type: ignore[method-assign]
        session.subscribe = subscribe_  # type: ignore[method-assign]
        return session


@dataclass
class Rig:
    conn: FailoverConnection
    connector: FakeConnector
    events: EventRecorder

    def failovers(self, expected: int | None = None) -> int:
        """The losses recorded so far; with ``expected``, once that many were (the recorder
        gets events from the dispatch thread, the last loss's possibly after the event a test
        waited for; fails if fewer come within the recorder's timeout)."""
        if expected is not None:
            self.events.wait_for(Disconnected, count=expected)
        return len(self.events.of_type(Disconnected))


@contextmanager
def connected(
    *,
    auto_confirm: bool = True,
    lose_first_receipts: bool = False,
    refuse: bool = True,
    autojump: bool = True,
) -> Iterator[Rig]:
    clock = FakeClock(autojump=autojump)
    connector = PoisonConnector(
        clock=clock,
        auto_confirm=auto_confirm,
        lose_first_receipts=lose_first_receipts,
        refuse=refuse,
    )
    events = EventRecorder()
    conn = FailoverConnection(
        (A, B),
        # No reconnect delay: with a clock that stands still, a delay would never end.
        options=FailoverOptions(randomize=False, initial_reconnect_delay=0, reconnect_delay=0),
        connector=connector,
        clock=clock,
        client_id="c",
        listeners=[events],
    )
    conn.connect()
    try:
        yield Rig(conn, connector, events)
    finally:
        conn.close()


def test_a_poison_send_is_quarantined_after_two_losses_and_ordinary_sends_complete():
    with connected() as rig:
        before = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(20)]
        poison = rig.conn.send_async("/queue/q", POISON)
        after = [rig.conn.send_async("/queue/q", f"n{i}".encode()) for i in range(20)]

        with pytest.raises(SendRejected, match="quarantined as poison after 2 connection losses"):
            poison.result(SAFETY)
        assert [f.result(SAFETY) for f in before + after] == [None] * 40
        event = rig.events.wait_for(PoisonQuarantined)
        assert (event.destination, event.losses) == ("/queue/q", POISON_LOSSES)
        assert isinstance(event.cause, BrokerRefused)
        assert isinstance(poison.exception().__cause__, BrokerRefused)
        assert rig.failovers() <= POISON_LOSSES
        # Carries on: later sends go through without another fail-over.
        rig.conn.send("/queue/q", b"later")
        rig.conn.send("/queue/q", b"later")
        assert rig.failovers() <= POISON_LOSSES
        stats = rig.conn.stats()
        assert (stats["rejected"], stats["in_flight"]) == (1, 0)


def test_a_poison_behind_unconfirmed_sends_is_found_by_replaying_them_one_at_a_time():
    with connected(lose_first_receipts=True) as rig:
        before = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(10)]
        poison = rig.conn.send_async("/queue/q", POISON)
        after = [rig.conn.send_async("/queue/q", f"n{i}".encode()) for i in range(10)]

        with pytest.raises(SendRejected, match="quarantined as poison"):
            poison.result(SAFETY)
        assert [f.result(SAFETY) for f in before + after] == [None] * 20
        rig.events.wait_for(PoisonQuarantined)
        assert rig.failovers(POISON_LOSSES) == POISON_LOSSES
        # The second session got the first loss's messages alone, in order, up to the poison.
        second = rig.connector.sessions[1]
        assert [m.body for m in second.sent] == [f"m{i}".encode() for i in range(10)] + [POISON]


def test_a_blocking_poison_send_raises_send_rejected_with_the_last_cause():
    with connected() as rig:
        with pytest.raises(SendRejected) as caught:
            rig.conn.send("/queue/q", POISON)
        assert "frame refused" in str(caught.value)
        rig.events.wait_for(PoisonQuarantined)  # listeners hear events on the dispatch thread
        assert rig.failovers(POISON_LOSSES) == POISON_LOSSES
        rig.conn.send("/queue/q", b"ok")


def test_several_poison_messages_cost_at_most_two_failovers_each():
    with connected() as rig:
        futures: list[Future[None]] = []
        poisons: list[Future[None]] = []
        for round_ in range(3):
            futures += [rig.conn.send_async("/queue/q", f"{round_}-{i}".encode()) for i in range(5)]
            poisons.append(rig.conn.send_async("/queue/q", POISON))
        for poison in poisons:
            with pytest.raises(SendRejected):
                poison.result(SAFETY)
        assert [f.result(SAFETY) for f in futures] == [None] * 15
        assert len(rig.events.wait_for(PoisonQuarantined, 3).message_id) > 0
        assert rig.failovers() <= POISON_LOSSES * len(poisons)


def test_a_message_in_flight_at_one_broker_crash_is_replayed_not_quarantined():
    with connected(auto_confirm=False) as rig:
        future = rig.conn.send_async("/queue/q", b"innocent")
        rig.connector.session(A).kill()
        assert rig.connector.wait_until(
            lambda: any(s.address == B and s.sent for s in rig.connector.sessions)
        )
        assert rig.connector.session(B).confirm() == 1
        assert future.result(SAFETY) is None
        assert rig.events.of_type(PoisonQuarantined) == []


def test_an_ordinary_loss_replays_the_whole_window_at_once():
    with connected(auto_confirm=False) as rig:
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(50)]
        rig.connector.session(A).kill()  # a crash: nothing says the broker refused a frame
        assert rig.connector.wait_until(
            lambda: any(s.address == B and len(s.sent) == 50 for s in rig.connector.sessions)
        )
        # All 50 written before any confirmation: no frame-by-frame probing after a crash.
        assert len(rig.connector.session(B).unconfirmed()) == 50
        assert rig.connector.session(B).confirm() == 50
        assert [f.result(SAFETY) for f in futures] == [None] * 50


def test_after_a_refusal_the_frames_in_flight_go_one_at_a_time_then_the_rest_at_once():
    # The fake clock stands still: a probe's wait for its confirmation never times out here.
    with connected(auto_confirm=False, autojump=False) as rig:
        suspects = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(3)]
        rig.connector.session(A).kill(BrokerRefused("broker sent ERROR: no", broker="a"))
        assert rig.connector.wait_until(
            lambda: any(s.address == B and s.sent for s in rig.connector.sessions)
        )
        second = rig.connector.session(B)
        for written in range(1, 4):
            # One frame on the wire until the broker confirms it.
            assert rig.connector.wait_until(lambda n=written: len(second.sent) == n)
            assert len(second.unconfirmed()) == 1
            second.confirm()
        assert [f.result(SAFETY) for f in suspects] == [None] * 3
        rig.conn.send_async("/queue/q", b"later")
        assert rig.connector.wait_until(lambda: len(second.sent) == 4)


def test_frames_the_adapter_says_were_never_read_are_replayed_at_once():
    with connected(auto_confirm=False, autojump=False) as rig:
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(10)]
        first = rig.connector.session(A)
        ids = first.message_ids()
        # The broker refused something among the first three; the adapter knows it never
        # read the other seven (written in later transactions).
        first.kill(BrokerRefused("broker sent ERROR: no", broker="a"), never_read=ids[3:])
        assert rig.connector.wait_until(
            lambda: any(s.address == B and s.sent for s in rig.connector.sessions)
        )
        second = rig.connector.session(B)
        for written in range(1, 4):  # the three that may hold the culprit: one at a time
            assert rig.connector.wait_until(lambda n=written: len(second.sent) == n)
            assert len(second.unconfirmed()) == 1
            second.confirm()
        assert rig.connector.wait_until(lambda: len(second.sent) == 10)  # the rest at once
        assert second.confirm() == 7
        assert [f.result(SAFETY) for f in futures] == [None] * 10


def test_a_broker_that_crashes_on_a_frame_without_a_word_quarantines_it_later():
    with connected(refuse=False) as rig:
        with pytest.raises(SendRejected, match=f"after {CRASH_LOSSES} connection losses"):
            rig.conn.send("/queue/q", POISON)
        assert rig.events.wait_for(PoisonQuarantined).losses == CRASH_LOSSES
        assert rig.failovers(CRASH_LOSSES) == CRASH_LOSSES
        rig.conn.send("/queue/q", b"ok")


def test_a_poison_subscription_is_refused_after_two_losses_and_the_rest_carries_on():
    with connected(autojump=False) as rig:  # no virtual deadline passes while threads switch
        good = rig.conn.subscribe("/queue/good", lambda m: None)
        good.wait_active(SAFETY)
        bad = rig.conn.subscribe(POISON_DESTINATION, lambda m: None)
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(10)]
        with pytest.raises(SubscriptionRefused, match="quarantined as poison after 2"):
            bad.wait_active(SAFETY)
        assert [f.result(SAFETY) for f in futures] == [None] * 10
        event = rig.events.wait_for(SubscriptionFailed)
        assert (event.subscription_id, event.destination) == (bad.id, POISON_DESTINATION)
        assert isinstance(bad.error, SubscriptionRefused)
        assert isinstance(bad.error.__cause__, BrokerRefused)
        assert rig.failovers(POISON_LOSSES) == POISON_LOSSES
        good.wait_active(SAFETY)  # restored on the session that is now current
        current = rig.connector.sessions[-1]
        assert set(current.subscriptions) == {good.id}
        rig.conn.send("/queue/q", b"later")
        assert rig.failovers(POISON_LOSSES) == POISON_LOSSES
        assert "refused" in repr(bad)


def test_a_poison_subscription_whose_first_error_was_lost_still_costs_two_failovers():
    with connected(autojump=False) as rig:  # no virtual deadline passes while threads switch
        assert isinstance(rig.connector, PoisonConnector)
        rig.connector.first_death_plain = True  # RabbitMQ resets: its ERROR never arrives
        bad = rig.conn.subscribe(POISON_DESTINATION, lambda m: None)
        with pytest.raises(SubscriptionRefused, match="after 2 connection losses"):
            bad.wait_active(SAFETY)
        rig.events.wait_for(SubscriptionFailed)  # events come on the dispatch thread, in order
        assert rig.failovers(POISON_LOSSES) == POISON_LOSSES


def test_the_outbox_lists_what_a_session_holds_and_what_it_still_needs():
    outbox = Outbox(window=10, max_bytes=1000)
    first = outbox.new(message_id="1", destination="/q", body=b"a", headers={}, kind="confirmed")
    second = outbox.new(message_id="2", destination="/q", body=b"b", headers={}, kind="confirmed")
    old, new = object(), object()
    outbox.add(first, old)
    outbox.add(second, new)
    assert outbox.on(new) == [second]
    assert outbox.first_not_on(new) is first
    outbox.settle(first)
    assert outbox.on(old) == []
    assert outbox.first_not_on(new) is None
