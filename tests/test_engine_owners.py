"""The send path and the subscriptions own their data: each works alone against a stub state.

``Sender`` and ``SubscriptionKeeper`` ask the connection only what ``Lifecycle`` declares (is a
session current, is the connection over); nothing here builds a ``ConnectionState``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import ConnectionClosed, SendTimeout
from failover_client.adapter import ConfirmCallback, SubscriptionSpec
from failover_client.engine._inbox import Inbox
from failover_client.engine._outbox import MessageIds
from failover_client.engine._restore import SubscriptionKeeper
from failover_client.engine._sender import Sender
from failover_client.engine._slot import Slot
from failover_client.engine._subscriptions import Subscription
from failover_client.engine._sync import ClockCondition
from failover_client.testing import FakeClock

A = BrokerAddress("stomp", "a", 61613)


class StubSession:
    """Records sends; the test answers their confirmations."""

    def __init__(self) -> None:
        self.confirms: list[ConfirmCallback] = []

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        if on_confirm is not None:
            self.confirms.append(on_confirm)


class StubLifecycle:
    """The state machine as the sender and the keeper see it, set by the test."""

    def __init__(self, slot: Slot) -> None:
        self.slot = slot
        self.state = "connected"
        self.lost: list[tuple[Slot, BaseException]] = []

    def connected_slot(self) -> Slot | None:
        return self.slot if self.state == "connected" else None

    def is_over(self) -> bool:
        return self.state == "closed"

    def phase(self) -> str:
        return self.state

    def raise_unusable(self) -> None:
        if self.state == "closed":
            raise ConnectionClosed("closed")

    def slot_lost(self, slot: Slot, cause: BaseException) -> None:
        self.lost.append((slot, cause))


def _sender(**options: object) -> tuple[Sender, StubLifecycle, StubSession, FakeClock]:
    clock = FakeClock()
    session = StubSession()
    slot = Slot(1, A, role="current", session=session)  # type: ignore[arg-type]
    life = StubLifecycle(slot)
    sender = Sender(
        options=FailoverOptions(**options),  # type: ignore[arg-type]
        clock=clock,
        cond=ClockCondition(clock),
        lifecycle=life,
        message_ids=MessageIds("t"),
    )
    return sender, life, session, clock


def test_the_sender_counts_and_settles_its_own_sends() -> None:
    sender, life, session, _clock = _sender()
    message = sender.submit(
        "/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None
    )
    assert message is not None
    assert sender.in_flight() == 1
    assert sender.unconfirmed_on(life.slot) == [message]
    assert not sender.drained(life.slot)
    (confirm,) = session.confirms
    confirm(None)
    assert sender.in_flight() == 0
    assert sender.drained(life.slot)
    counters = sender.counters()
    assert (counters.sent, counters.confirmed) == (1, 1)


def test_the_sender_asks_the_lifecycle_and_names_the_state_it_waited_for() -> None:
    sender, life, _session, clock = _sender()
    life.state = "reconnecting"
    with pytest.raises(SendTimeout, match=r"not connected \(reconnecting\)"):
        sender.submit(
            "/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=clock.monotonic()
        )
    life.state = "closed"
    with pytest.raises(ConnectionClosed):
        sender.submit("/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None)
    assert sender.counters().sent == 0


def test_the_keeper_tracks_what_each_session_was_asked_for() -> None:
    clock = FakeClock()
    slot = Slot(1, A, role="current")
    life = StubLifecycle(slot)
    keeper = SubscriptionKeeper(clock=clock, cond=ClockCondition(clock), lifecycle=life, emit=print)
    spec = SubscriptionSpec(id=keeper.new_id(), destination="/queue/q")
    inbox = Inbox(clock, spec.prefetch, lambda: None)
    keeper.add(Subscription(spec, lambda m: None, router=None, inbox=inbox))  # type: ignore[arg-type]
    assert len(keeper) == 1
    assert keeper.claim_missing(slot) == [spec]
    assert keeper.claim_missing(slot) == []  # asked once per session
    assert keeper.claim_missing(Slot(2, A)) == [spec]  # a new session is asked again
    assert keeper.unanswered(slot) == 0
    assert keeper.release(spec.id, slot) is True  # the session must drop it
    assert keeper.release(spec.id, slot) is False
    assert keeper.get(spec.id) is None
    assert len(keeper) == 0
