"""Outbox (window and replay bookkeeping) and ClockCondition."""

from __future__ import annotations

import threading

from failover_client.engine._outbox import MessageIds, Outbox
from failover_client.engine._sync import ClockCondition
from failover_client.testing import FakeClock


def message(outbox: Outbox, body: bytes, kind="confirmed"):
    return outbox.new(message_id="m", destination="/q", body=body, headers={}, kind=kind)


def test_message_ids_are_prefixed_and_sequential():
    ids = MessageIds("client")
    assert [ids.next(), ids.next()] == ["client-1", "client-2"]


def test_window_counts_messages_and_bytes():
    outbox = Outbox(window=2, max_bytes=10)
    assert outbox.has_room(50)  # empty: anything fits, or it could never be sent
    first = message(outbox, b"x" * 6)
    outbox.add(first, "s1")
    assert not outbox.has_room(5)
    assert outbox.has_room(4)
    outbox.add(message(outbox, b"y" * 4), "s1")
    assert not outbox.has_room(0)  # two messages: the window is full
    assert outbox.settle(first)
    assert not outbox.settle(first)
    assert outbox.has_room(6)
    assert repr(outbox) == "<Outbox pending=1 window=1/2 bytes=4>"


def test_take_for_returns_the_others_in_order_and_reassigns_them():
    outbox = Outbox(window=10, max_bytes=100)
    one, two, three = (message(outbox, bytes([n])) for n in range(3))
    outbox.add(one, "old")
    outbox.add(two, "old")
    outbox.add(three, "new")
    assert outbox.take_for("new") == [one, two]
    assert outbox.take_for("new") == []
    assert (one.writes, three.writes) == (2, 1)
    assert outbox.written_to("new") == 3


def test_tracked_messages_evict_the_oldest_beyond_the_byte_budget():
    outbox = Outbox(window=1, max_bytes=8)
    confirmed = message(outbox, b"c" * 4)
    outbox.add(confirmed, "s")
    tracked = [message(outbox, b"t" * 4, kind="tracked") for _ in range(3)]
    evicted = [outbox.add(t, "s") for t in tracked]
    assert evicted == [[], [], [tracked[0]]]
    assert len(outbox) == 3
    assert tracked[0].done
    assert outbox.clear() == [confirmed, tracked[1], tracked[2]]
    assert outbox.pending_bytes == 0


def test_clock_condition_times_out_on_the_fake_clock():
    clock = FakeClock()
    cond = ClockCondition(clock)
    result: list[bool] = []

    def wait() -> None:
        with cond:
            result.append(cond.wait_until(lambda: False, deadline=4.0))

    thread = threading.Thread(target=wait)
    thread.start()
    assert clock.wait_for_waiters(1, timed=True)
    clock.advance(4.0)
    thread.join(5)
    assert result == [False]


def test_clock_condition_wakes_on_notify():
    clock = FakeClock()
    cond = ClockCondition(clock)
    flag: list[bool] = []
    result: list[bool] = []

    def wait() -> None:
        with cond:
            result.append(cond.wait_until(lambda: bool(flag), deadline=None))

    thread = threading.Thread(target=wait)
    thread.start()
    assert clock.wait_for_waiters(1)
    with cond:
        flag.append(True)
        cond.notify_all()
    thread.join(5)
    assert result == [True]
