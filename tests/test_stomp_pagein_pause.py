"""Page-in wake-ups that a busy write lock or a pause in deliveries must not lose (``_pagein``).

:class:`PageIn` runs on a real :class:`Timers` over a :class:`FakeClock`: time moves only when a
test advances it, and a test knows the timer thread finished a check when it waits for the next
deadline (``FakeClock.wait_for_deadline``) or for the thread to end. The session wiring runs on
the scripted transport of ``test_stomp_adapter_session``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from failover_client._timers import Timers
from failover_client.adapter import SubscriptionSpec
from failover_client.stomp import StompSession
from failover_client.stomp._pagein import (
    PAGE_IN_STEP,
    PAUSE_FIRST,
    PAUSE_LONGEST,
    PageIn,
)
from failover_client.testing import FakeClock
from failover_client.testing._clock import SAFETY_TIMEOUT
from tests.test_stomp_adapter_session import Harness
from tests.test_stomp_pagein import WAKE

SPEC = SubscriptionSpec("s1", "/queue/q", "client", prefetch=3000)

Frames = Sequence[tuple[str, dict[str, str]]]


class Writer:
    """A ``write`` that answers from a script (True once the script runs out) and records."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.written: list[list[str]] = []

    def __call__(self, frames: Frames) -> bool:
        self.asked += 1
        ok = self.answers.pop(0) if self.answers else True
        if ok:
            self.written.append([command for command, _ in frames])
        return ok

    @property
    def pairs(self) -> int:
        assert all(w == ["SUBSCRIBE", "UNSUBSCRIBE"] for w in self.written)
        return len(self.written)


class Rig:
    """One PageIn on a fake clock and its own timers."""

    def __init__(self, writer: Writer, spec: SubscriptionSpec = SPEC) -> None:
        self.clock = FakeClock()
        self.timers = Timers(self.clock, name="page-in-test-timer")
        self.page_in = PageIn(self.clock, self.timers)
        self.writer = writer
        self.page_in.watch(spec, "activemq", writer)

    def deliver(self, count: int = 1) -> None:
        for _ in range(count):
            self.page_in.delivered(SPEC.id)

    def advance_to(self, when: float, then_waits_until: float | None) -> None:
        """Move time to ``when`` and wait until the timer thread's check there is done: it
        waits again until ``then_waits_until``, or (None) it ended."""
        thread = self.timers.thread
        self.clock.advance(when - self.clock.monotonic())
        if then_waits_until is not None:
            assert self.clock.wait_for_deadline(then_waits_until)
        elif thread is not None:
            thread.join(SAFETY_TIMEOUT)
            assert not thread.is_alive()

    def close(self) -> None:
        self.page_in.close()
        assert len(self.timers) == 0


@pytest.fixture
def rigs() -> list[Rig]:
    made: list[Rig] = []
    yield made
    for rig in made:
        rig.close()


def rig(rigs: list[Rig], *answers: bool) -> Rig:
    made = Rig(Writer(*answers))
    rigs.append(made)
    return made


# --- a step's pair that could not be written ----------------------------------------------------


def test_a_pair_not_written_at_its_step_goes_with_the_next_delivery(rigs: list[Rig]) -> None:
    r = rig(rigs, False)
    r.deliver(PAGE_IN_STEP)
    assert (r.writer.asked, r.writer.pairs) == (1, 0)
    r.deliver()  # before: not retried until another whole step of deliveries
    assert (r.writer.asked, r.writer.pairs, r.page_in.wakeups) == (2, 1, 1)
    r.deliver(PAGE_IN_STEP - 1)  # counting from the pair written: no second one yet
    assert r.writer.pairs == 1
    r.deliver()
    assert r.writer.pairs == 2


def test_a_busy_writer_leaves_one_pending_pair_not_a_backlog(rigs: list[Rig]) -> None:
    r = rig(rigs, *[False] * 5)
    r.deliver(PAGE_IN_STEP + 5)  # the step, then four deliveries while the lock stays busy
    assert (r.writer.asked, r.writer.pairs) == (6, 1)  # tried once per delivery, written once
    r.deliver(PAGE_IN_STEP - 1)
    assert r.writer.pairs == 1


def test_an_acknowledgement_clears_a_pending_pair(rigs: list[Rig]) -> None:
    r = rig(rigs, False)
    r.deliver(PAGE_IN_STEP)
    r.page_in.acknowledged(SPEC.id)  # the ACK woke the queue itself
    r.deliver()
    assert (r.writer.asked, r.writer.pairs) == (1, 0)


# --- a pause in deliveries --------------------------------------------------------------------


def test_a_pause_after_sixty_deliveries_wakes_the_queue(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    assert r.writer.pairs == 0  # no step due: before, nothing woke the queue till an ACK
    r.advance_to(PAUSE_FIRST, then_waits_until=PAUSE_FIRST + 2 * PAUSE_FIRST)
    assert (r.writer.pairs, r.page_in.wakeups) == (1, 1)


def test_pauses_that_bring_nothing_double_up_to_the_longest(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    pair_times: list[float] = []
    when, pause = PAUSE_FIRST, PAUSE_FIRST
    while len(pair_times) < 8:
        pause = min(2 * pause, PAUSE_LONGEST)
        r.advance_to(when, then_waits_until=when + pause)
        pair_times.append(when)
        when += pause
    assert pair_times == [0.5, 1.5, 3.5, 7.5, 15.5, 23.5, 31.5, 39.5]
    assert r.writer.pairs == 8  # one per pause, never more


def test_a_delivery_starts_the_pauses_over(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    r.advance_to(0.5, then_waits_until=1.5)
    r.advance_to(1.5, then_waits_until=3.5)  # two pairs that brought nothing
    r.clock.advance(0.75)  # 2.25: one message of a slow producer's trickle
    r.deliver()
    assert r.clock.wait_for_deadline(2.25 + PAUSE_FIRST)  # brought forward from 3.5
    assert r.writer.pairs == 2
    r.advance_to(2.25 + PAUSE_FIRST, then_waits_until=2.75 + 2 * PAUSE_FIRST)
    assert r.writer.pairs == 3
    assert len(r.timers) == 1  # the check it replaced was cancelled


def test_deliveries_that_keep_coming_cause_no_pause_pair(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(10)  # at 0: checked at 0.5
    for at, check, following in ((0.375, 0.5, 0.875), (0.75, 0.875, 1.25), (1.125, 1.25, 1.625)):
        r.clock.advance(at - r.clock.monotonic())
        r.deliver(10)  # every 0.375 s: a trickle that never pauses for 0.5 s
        r.advance_to(check, then_waits_until=following)
    assert r.writer.pairs == 0


def test_an_acknowledgement_ends_the_pauses(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    r.page_in.acknowledged(SPEC.id)
    r.advance_to(PAUSE_FIRST, then_waits_until=None)  # the check found nothing and ended
    assert r.writer.pairs == 0
    assert len(r.timers) == 0
    r.deliver(60)  # a new batch arms it again
    r.advance_to(2 * PAUSE_FIRST, then_waits_until=2 * PAUSE_FIRST + 2 * PAUSE_FIRST)
    assert r.writer.pairs == 1


def test_a_forgotten_subscription_wakes_nothing_after_a_pause(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    r.page_in.forget(SPEC.id)
    r.advance_to(PAUSE_FIRST, then_waits_until=None)
    assert (r.writer.asked, len(r.timers)) == (0, 0)


def test_closing_cancels_the_pause_check(rigs: list[Rig]) -> None:
    r = rig(rigs)
    r.deliver(60)
    assert len(r.timers) == 1
    r.page_in.close()
    assert len(r.timers) == 0
    r.clock.advance(PAUSE_LONGEST)
    r.deliver(30)  # a late delivery of the closed session schedules nothing
    assert (r.writer.asked, len(r.timers)) == (0, 0)


def test_a_pause_pair_not_written_is_tried_again_after_the_same_pause(rigs: list[Rig]) -> None:
    r = rig(rigs, False)
    r.deliver(60)
    r.advance_to(0.5, then_waits_until=1.0)  # busy: not doubled, it was never sent
    assert (r.writer.asked, r.writer.pairs) == (1, 0)
    r.advance_to(1.0, then_waits_until=2.0)
    assert r.writer.pairs == 1


def test_a_subscription_that_needs_no_waking_schedules_nothing() -> None:
    r = Rig(Writer(), SubscriptionSpec("s1", "/queue/q", "client", prefetch=200))
    r.deliver(60)
    assert (len(r.timers), r.timers.thread) == (0, None)


# --- through the session ----------------------------------------------------------------------


class Wired:
    """A session to an ActiveMQ broker whose page-in runs on a fake clock's timers."""

    def __init__(self) -> None:
        self.h = Harness()
        self.h.script = lambda t: t.play(
            "connected", {"version": "1.2", "server": "ActiveMQ/5.17.2"}
        )
        self.session: StompSession = self.h.connect()
        self.clock = FakeClock()
        self.timers = Timers(self.clock, name="page-in-test-timer")
        self.session._state.page_in = PageIn(self.clock, self.timers)
        self.session.subscribe(SPEC, None)
        self.sent = 0

    def deliver(self, count: int) -> None:
        for _ in range(count):
            n, self.sent = self.sent, self.sent + 1
            self.h.transport.play(
                "message",
                {
                    "destination": "/queue/q",
                    "message-id": f"m{n}",
                    "subscription": "s1",
                    "ack": f"a{n}",
                },
                b"x",
            )

    def written(self) -> list[tuple[str, dict[str, str]]]:
        return [(command, headers) for command, headers, _ in self.h.transport.frames[1:]]


def test_the_session_wakes_a_queue_after_a_pause_and_a_cumulative_ack_ends_it() -> None:
    w = Wired()
    w.deliver(60)
    w.clock.advance(PAUSE_FIRST)
    assert w.clock.wait_for_deadline(3 * PAUSE_FIRST)
    assert w.written() == WAKE
    w.session.ack(w.h.listener.messages[-1])  # client mode: one ACK for the whole batch
    w.clock.advance(2 * PAUSE_FIRST)
    thread = w.timers.thread
    if thread is not None:
        thread.join(SAFETY_TIMEOUT)
    assert [command for command, _ in w.written()] == ["SUBSCRIBE", "UNSUBSCRIBE", "ACK"]
    w.session.close()


def test_a_closed_session_cancels_its_pause_check() -> None:
    w = Wired()
    w.deliver(60)
    assert len(w.timers) == 1
    w.session.close()
    assert len(w.timers) == 0


def test_a_lost_session_cancels_its_pause_check() -> None:
    w = Wired()
    w.deliver(60)
    w.h.transport.play("disconnected")
    assert len(w.timers) == 0
    assert len(w.h.listener.lost) == 1


def test_the_session_writes_a_step_pair_skipped_by_a_busy_lock_with_the_next_delivery() -> None:
    w = Wired()
    w.deliver(PAGE_IN_STEP - 1)
    with w.session._state.write_lock:  # a heart-beat or another subscription's frame
        w.deliver(1)
    assert w.written() == []
    w.deliver(1)
    assert w.written() == WAKE
    w.session.close()
