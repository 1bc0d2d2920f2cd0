"""Waking an ActiveMQ Classic queue for a subscription that holds its messages (``_pagein``).

The session is driven through the scripted transport of ``test_stomp_adapter_session``; its
CONNECTED frame names the broker in its ``server`` header.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from failover_client import BrokerUnavailable
from failover_client._timers import Timers
from failover_client.adapter import SubscriptionSpec
from failover_client.stomp import StompSession
from failover_client.stomp._pagein import PAGE_IN_STEP, PageIn, page_in_id
from failover_client.testing import FakeClock
from tests.test_stomp_adapter_session import Harness

ACTIVEMQ = "ActiveMQ/5.17.2"

WAKE = [
    (
        "SUBSCRIBE",
        {
            "destination": "/queue/q",
            "id": page_in_id("s1"),
            "ack": "client-individual",
            "activemq.prefetchSize": "0",
        },
    ),
    ("UNSUBSCRIBE", {"id": page_in_id("s1")}),
]


def connected(server: str = ACTIVEMQ, **spec: object) -> tuple[Harness, StompSession]:
    h = Harness()
    h.script = lambda t: t.play("connected", {"version": "1.2", "server": server})
    session = h.connect()
    # The harness's clock jumps on every wait: pauses would fire at once on a real timer
    # thread. A clock nobody advances keeps them out of these tests (see test_stomp_pagein_pause).
    clock = FakeClock()
    session._state.page_in = PageIn(clock, Timers(clock))
    fields: dict[str, object] = {
        "id": "s1",
        "destination": "/queue/q",
        "ack": "client-individual",
        "prefetch": 3000,
        **spec,
    }
    session.subscribe(SubscriptionSpec(**fields), None)  # type: ignore[arg-type]
    return h, session


def deliver(h: Harness, count: int, subscription: str = "s1", start: int = 0) -> None:
    for n in range(start, start + count):
        h.transport.play(
            "message",
            {
                "destination": "/queue/q",
                "message-id": f"m{n}",
                "subscription": subscription,
                "ack": f"a{n}",
            },
            b"x",
        )


def written_after_subscribe(h: Harness) -> list[tuple[str, dict[str, str]]]:
    return [(command, headers) for command, headers, _ in h.transport.frames[1:]]


def test_a_subscription_holding_its_messages_wakes_its_queue_every_step() -> None:
    h, _ = connected()
    deliver(h, PAGE_IN_STEP - 1)
    assert written_after_subscribe(h) == []
    deliver(h, 1, start=PAGE_IN_STEP - 1)
    assert written_after_subscribe(h) == WAKE
    deliver(h, PAGE_IN_STEP, start=PAGE_IN_STEP)
    assert written_after_subscribe(h) == WAKE + WAKE


def test_acknowledging_as_it_goes_never_wakes_the_queue() -> None:
    h, session = connected()
    for n in range(3 * PAGE_IN_STEP):
        deliver(h, 1, start=n)
        session.ack(h.listener.messages[-1])
    assert [command for command, _ in written_after_subscribe(h)] == ["ACK"] * 3 * PAGE_IN_STEP


def test_a_nack_counts_as_an_acknowledgement() -> None:
    h, session = connected()
    deliver(h, PAGE_IN_STEP - 1)
    session.nack(h.listener.messages[-1])
    deliver(h, PAGE_IN_STEP - 1, start=PAGE_IN_STEP)
    assert [command for command, _ in written_after_subscribe(h)] == ["NACK"]


@pytest.mark.parametrize(
    ("server", "spec"),
    [
        ("RabbitMQ/3.10.8", {}),  # RabbitMQ has no page-in
        ("ActiveMQ-Artemis/2.31.2", {}),
        ("", {}),  # a broker the CONNECTED frame does not name
        (ACTIVEMQ, {"destination": "/topic/t"}),  # a topic subscription has its own cursor
        (ACTIVEMQ, {"ack": "auto"}),  # ActiveMQ counts a message acknowledged once sent
        (ACTIVEMQ, {"prefetch": 200}),  # the first page of 200 covers the whole prefetch
        (ACTIVEMQ, {"engine_acks": True}),  # a user's auto subscription: acks keep coming
    ],
)
def test_only_activemq_queue_subscriptions_in_a_client_mode_above_a_page(
    server: str, spec: dict[str, object]
) -> None:
    h, _ = connected(server, **spec)
    deliver(h, 3 * PAGE_IN_STEP)
    assert written_after_subscribe(h) == []


def test_an_ended_subscription_wakes_nothing_and_others_count_apart() -> None:
    h, session = connected()
    session.subscribe(SubscriptionSpec("s2", "/queue/q", "client-individual", prefetch=3000), None)
    deliver(h, PAGE_IN_STEP - 1, subscription="s2")
    session.unsubscribe("s2")
    deliver(h, PAGE_IN_STEP - 1)
    deliver(h, PAGE_IN_STEP, subscription="s2")
    assert [command for command, _ in written_after_subscribe(h)] == ["SUBSCRIBE", "UNSUBSCRIBE"]
    deliver(h, 1, start=PAGE_IN_STEP)
    assert written_after_subscribe(h)[-2:] == WAKE


def test_a_write_that_fails_is_counted_once_and_raised() -> None:
    clock = FakeClock()
    page_in = PageIn(clock, Timers(clock))
    written: list[list[str]] = []

    def failing(frames: Sequence[tuple[str, dict[str, str]]]) -> bool:
        written.append([command for command, _ in frames])
        raise BrokerUnavailable("gone", broker="b1")

    spec = SubscriptionSpec("s1", "/queue/q", "client", prefetch=1000)
    page_in.watch(spec, "activemq", failing)
    for _ in range(PAGE_IN_STEP - 1):
        page_in.delivered("s1")
    with pytest.raises(BrokerUnavailable):
        page_in.delivered("s1")
    page_in.delivered("s1")  # counting again from zero: no second attempt
    assert written == [["SUBSCRIBE", "UNSUBSCRIBE"]]  # the pair goes together or not at all
    assert page_in.wakeups == 0


def test_the_io_thread_never_waits_for_a_busy_write_lock() -> None:
    h, session = connected()
    deliver(h, PAGE_IN_STEP - 1)
    state = session._state  # the lock another thread would hold
    with state.write_lock:  # a caller's thread writing (or stuck behind a full socket)
        deliver(h, 1, start=PAGE_IN_STEP - 1)  # returns: the pair is skipped, not waited for
    assert WAKE[0] not in written_after_subscribe(h)
    deliver(h, 1, start=PAGE_IN_STEP)  # still due: it goes with the next delivery
    assert written_after_subscribe(h) == WAKE


def test_a_lost_session_does_not_raise_into_the_io_thread() -> None:
    h, _ = connected()
    deliver(h, PAGE_IN_STEP - 1)
    h.transport.write_error = OSError("connection reset")
    deliver(h, 1, start=PAGE_IN_STEP - 1)  # the wake-up's write fails: no exception here
    assert len(h.listener.messages) == PAGE_IN_STEP


def _messages(count: int, start: int) -> list[tuple[str, dict[str, str] | None, bytes]]:
    return [
        (
            "message",
            {"destination": "/queue/q", "message-id": f"m{n}", "subscription": "s1", "ack": "a"},
            b"x",
        )
        for n in range(start, start + count)
    ]


def test_a_read_is_counted_at_its_end_one_pair_per_step_it_crossed() -> None:
    h, _ = connected()
    h.transport.play_read(_messages(2 * PAGE_IN_STEP + 10, 0))
    assert len(h.listener.messages) == 2 * PAGE_IN_STEP + 10
    assert written_after_subscribe(h) == WAKE + WAKE
    # The ten left over count towards the next step.
    h.transport.play_read(_messages(PAGE_IN_STEP - 10, 2 * PAGE_IN_STEP + 10))
    assert written_after_subscribe(h) == WAKE * 3


def test_the_watchdog_sees_no_silence_while_a_read_is_handed_on() -> None:
    # The dispatch bracket is one per read now: opened by its first MESSAGE, closed at its end.
    h = Harness(heartbeat=(0, 1000))
    h.script = lambda t: t.play("connected", {"version": "1.2", "heart-beat": "1000,0"})
    session = h.connect()
    beats = session.heartbeat_state
    assert beats is not None
    limit = beats.plan.silence_limit
    assert limit > 0
    seen: list[float | None] = []

    def on_message(session: object, message: object) -> None:
        seen.append(beats.poll(h.clock.monotonic() + 9 * limit).silence)

    h.listener.on_message = on_message  # type: ignore[method-assign,assignment]
    session.subscribe(
        SubscriptionSpec(id="s1", destination="/queue/q", ack="client-individual", prefetch=10),
        None,
    )
    h.transport.play_read(_messages(3, 0))
    assert seen == [None, None, None]
    assert beats.poll(h.clock.monotonic() + 9 * limit).silence is not None
