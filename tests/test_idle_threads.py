"""An idle connection holds no thread it does not need: shared timers, on-demand writer and
dispatch threads, each ending once its work is done."""

from __future__ import annotations

import threading
from collections.abc import Callable

from failover_client._clock import SystemClock
from failover_client._timers import Timers, _forget_after_fork, timers_for
from failover_client.engine._dispatch import Dispatcher
from failover_client.net._writer import FrameWriter
from failover_client.stomp._heartbeat import HeartbeatMonitor, HeartbeatPlan, HeartbeatState
from failover_client.testing import FakeClock

WAIT = 5.0
"""Upper bound for waits on events that the code under test is bound to set."""


# --- the shared timer ----------------------------------------------------------------------------


def test_timers_run_each_deadline_in_order_and_the_thread_ends_when_none_is_left() -> None:
    clock = FakeClock(autojump=True)  # jumps to the timer's next deadline as it waits
    timers = Timers(clock, name="timer-test")
    ran: list[tuple[str, float]] = []
    done = threading.Event()

    def every_two(now: float) -> float | None:
        ran.append(("b", now))
        return now + 2.0 if now < 4.0 else None

    def once(now: float) -> float | None:
        ran.append(("a", now))
        done.set()
        return None

    # The thread starts with the first entry and the clock jumps as soon as it waits: a gate
    # holds it at 0.5 until both entries are in, or a slow test thread would see "b" first.
    scheduled = threading.Event()

    def gate(now: float) -> float | None:
        assert scheduled.wait(WAIT)
        return None

    timers.schedule(0.5, gate)
    timers.schedule(2.0, every_two)
    timers.schedule(1.0, once)
    scheduled.set()
    thread = timers.thread
    assert thread is not None
    thread.join(WAIT)
    assert done.is_set()
    assert ran == [("a", 1.0), ("b", 2.0), ("b", 4.0)]
    assert not thread.is_alive()
    assert timers.thread is None
    assert len(timers) == 0


def test_entries_that_may_run_early_share_the_wake_up_of_an_earlier_one() -> None:
    clock = FakeClock(autojump=True)
    timers = Timers(clock, name="timer-test")
    ran: list[tuple[str, float]] = []
    scheduled = threading.Event()

    def gate(now: float) -> float | None:
        assert scheduled.wait(WAIT)
        return None

    def beat(name: str, every: float) -> Callable[[float], tuple[float, float] | None]:
        def run(now: float) -> tuple[float, float] | None:
            ran.append((name, now))
            return (now + every, 0.1) if now < 2.0 else None

        return run

    def check(now: float) -> float | None:
        ran.append(("check", now))
        return None

    timers.schedule(0.5, gate)
    timers.schedule(1.0, beat("a", 1.0))
    timers.schedule(1.05, beat("b", 1.0), early=0.1)  # runs at 1.0, with "a"
    timers.schedule(1.08, check)  # may not run early: a wake-up of its own
    timers.schedule(1.5, beat("c", 1.0), early=0.1)  # too far ahead to join at 1.0
    scheduled.set()
    thread = timers.thread
    assert thread is not None
    thread.join(WAIT)
    assert not thread.is_alive()
    # After sharing a wake-up, "a" and "b" come due together again.
    assert ran == [
        ("a", 1.0),
        ("b", 1.0),
        ("check", 1.08),
        ("c", 1.5),
        ("a", 2.0),
        ("b", 2.0),
        ("c", 2.5),
    ]


def test_an_entry_cancelled_during_a_shared_wake_up_does_not_run() -> None:
    clock = FakeClock()
    timers = Timers(clock, name="timer-test")
    ran: list[str] = []

    def first(now: float) -> float | None:
        ran.append("first")
        second.cancel()
        return None

    timers.schedule(1.0, first)
    second = timers.schedule(1.05, lambda now: ran.append("second"), early=0.1)
    keep = timers.schedule(9.0, lambda now: None)  # keeps the thread waiting afterwards
    assert clock.wait_for_deadline(1.0)
    clock.advance(1.0)
    assert clock.wait_for_deadline(9.0)  # the shared wake-up at 1.0 is over
    assert ran == ["first"]
    keep.cancel()
    assert timers.thread is None


def test_a_cancelled_entry_never_runs_and_its_thread_ends_at_once() -> None:
    clock = FakeClock()
    timers = Timers(clock, name="timer-test")
    entry = timers.schedule(10.0, lambda now: (_ for _ in ()).throw(AssertionError("ran")))
    thread = timers.thread
    assert thread is not None
    entry.cancel()  # returns once the thread ended: no deadline was left to wait for
    assert timers.thread is None
    thread.join(WAIT)
    assert not thread.is_alive()
    assert repr(timers) == "Timers(entries=0, thread=none)"


def test_every_real_clock_shares_one_timer_and_other_clocks_have_their_own() -> None:
    shared = timers_for(SystemClock())
    assert timers_for(SystemClock()) is shared
    fake = FakeClock()
    assert timers_for(fake) is timers_for(fake)
    assert timers_for(fake) is not shared


def test_a_forked_child_gets_new_timers() -> None:
    clock = FakeClock()
    parents = timers_for(clock)
    _forget_after_fork()  # what os.fork() runs in the child
    assert timers_for(clock) is not parents


def test_heartbeat_monitors_of_many_sessions_share_one_thread() -> None:
    clock = FakeClock()
    timers = Timers(clock, name="timer-test")
    beats: list[int] = []
    monitors = []
    for n in range(3):
        monitor = HeartbeatMonitor(
            None,
            clock,
            send_beat=lambda n=n: beats.append(n),  # type: ignore[misc]
            on_silence=lambda silence: None,
            timers=timers,
        )
        monitor.arm(HeartbeatState(HeartbeatPlan(beat_every=1.0, silence_limit=0.0), now=0.0))
        monitors.append(monitor)
    assert len(timers) == 3
    for monitor in monitors:
        monitor.stop()
    assert len(timers) == 0
    assert timers.thread is None
    assert beats == []  # no virtual time passed


def test_a_silent_broker_is_reported_on_a_thread_of_its_own() -> None:
    clock = FakeClock()
    timers = Timers(clock, name="timer-test")
    reported: list[tuple[float, str]] = []
    done = threading.Event()

    def on_silence(silence: float) -> None:
        reported.append((silence, threading.current_thread().name))
        done.set()

    monitor = HeartbeatMonitor(
        None, clock, send_beat=lambda: None, on_silence=on_silence, name="hb", timers=timers
    )
    monitor.arm(HeartbeatState(HeartbeatPlan(beat_every=0.0, silence_limit=2.0), now=0.0))
    clock.advance(2.0)
    assert done.wait(WAIT)
    assert reported == [(2.0, "hb lost")]
    monitor.stop(join_timeout=WAIT)
    reporter = monitor.thread
    assert reporter is not None
    assert not reporter.is_alive()


# --- the writer ----------------------------------------------------------------------------------


def test_the_writer_thread_starts_with_a_backlog_and_ends_when_it_drained() -> None:
    written: list[tuple[str, bytes]] = []
    wrote = threading.Event()

    def write(data: bytes) -> None:
        written.append((threading.current_thread().name, data))
        wrote.set()

    writer = FrameWriter(
        write, on_written=lambda: None, on_failed=lambda exc: None, name="writer", linger=0.0
    )
    writer.start()
    assert writer.thread is None
    writer.put(b"a", inline=False)
    first = writer.thread
    assert first is not None
    assert writer.flush(WAIT)
    first.join(WAIT)  # linger 0: it ends as soon as nothing is queued
    assert not first.is_alive()
    writer.put(b"b", inline=False)
    second = writer.thread
    assert second is not None
    assert second is not first
    assert writer.flush(WAIT)
    assert written == [("writer", b"a"), ("writer", b"b")]
    writer.cancel()
    assert writer.join(WAIT)


def test_a_heartbeat_offered_to_an_idle_writer_is_written_without_a_thread() -> None:
    plain: list[bytes] = []
    nowait: list[bytes] = []

    def send(data: bytes) -> int:
        nowait.append(data)
        return len(data)

    writer = FrameWriter(
        plain.append,
        on_written=lambda: None,
        on_failed=lambda exc: None,
        write_nowait=send,
    )
    writer.start()
    assert writer.offer(b"\n")
    assert nowait == [b"\n"]
    assert plain == []
    assert writer.thread is None


def test_a_full_socket_skips_the_beat_and_keeps_the_writer_usable() -> None:
    def full(data: bytes) -> int:
        raise BlockingIOError("full")

    plain: list[bytes] = []
    writer = FrameWriter(
        plain.append, on_written=lambda: None, on_failed=lambda exc: None, write_nowait=full
    )
    writer.start()
    assert not writer.offer(b"\n")
    writer.put(b"frame", urgent=True)
    assert plain == [b"frame"]


# --- the dispatcher ------------------------------------------------------------------------------


def test_the_dispatch_thread_runs_jobs_in_order_and_exists_only_while_there_are_jobs() -> None:
    dispatcher = Dispatcher("dispatch-test", linger=0.0)
    ran: list[int] = []
    dispatcher.start()
    assert dispatcher.thread is None
    gate = threading.Event()
    dispatcher.submit(lambda: ran.append(1) if gate.wait(WAIT) else None)
    dispatcher.submit(lambda: ran.append(2))
    first = dispatcher.thread
    assert first is not None
    gate.set()
    first.join(WAIT)
    assert ran == [1, 2]
    assert not first.is_alive()
    dispatcher.submit(lambda: ran.append(3))
    dispatcher.stop()
    dispatcher.join(WAIT)
    assert ran == [1, 2, 3]
    dispatcher.submit(lambda: ran.append(4))  # after stop: dropped
    assert ran == [1, 2, 3]
