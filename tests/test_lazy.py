"""What an idle connection holds: events without conditions, no per-connection randomness,
no dispatch queue between clusters of events."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from failover_client import FailoverConnection
from failover_client._clock import SystemClock
from failover_client._lazy import LazyCondition, LazyEvent, lean_thread, shared_random
from failover_client.engine._arguments import resolve_target
from failover_client.engine._dispatch import Dispatcher
from failover_client.net._writer import FrameWriter
from failover_client.stomp._transport import _CONDITIONS, BoundTransport
from failover_client.testing import FakeClock, FakeConnector

WAIT = 5.0
"""Real seconds a test waits for a thread it started (each ends at once when all is well)."""


def test_a_lazy_event_is_a_threading_event_that_makes_no_condition_to_set_clear_or_read() -> None:
    event = LazyEvent()
    assert isinstance(event, threading.Event)
    assert not event.is_set()
    assert not event.wait(0)
    event.set()
    assert event.is_set()
    assert event.wait(0)
    assert event.wait(None)
    event.clear()
    assert not event.is_set()
    assert event._made is None  # waits that ended let their condition go


def test_a_waiter_on_another_thread_is_woken_by_set_and_the_condition_goes_with_it() -> None:
    event = LazyEvent()
    with ThreadPoolExecutor(4) as pool:
        waits = [pool.submit(event.wait, WAIT) for _ in range(4)]
        event.set()
        assert all(w.result(WAIT) for w in waits)
    assert event._made is None
    assert event._waiters_now == 0


def test_set_clear_set_wakes_a_waiter_that_came_after_the_clear() -> None:
    event = LazyEvent()
    event.set()
    event.clear()
    with ThreadPoolExecutor(1) as pool:
        waited = pool.submit(event.wait, WAIT)
        event.set()
        assert waited.result(WAIT)


def test_the_virtual_clock_waits_on_a_lazy_event_and_keeps_its_condition() -> None:
    clock = FakeClock()
    event = LazyEvent()
    with ThreadPoolExecutor(1) as pool:
        set_in_time = pool.submit(clock.wait, event, 10.0)
        assert clock.wait_for_waiters(1, timeout=WAIT)
        event.set()
        assert set_in_time.result(WAIT) is True
        event.clear()
        timed_out = pool.submit(clock.wait, event, 10.0)
        assert clock.wait_for_waiters(1, timeout=WAIT)
        clock.advance(10.0)
        assert timed_out.result(WAIT) is False
    assert event._made is not None  # read through ``_cond``: kept for the clock's waits


def test_connections_not_given_randomness_share_the_process_one() -> None:
    connector = FakeConnector()
    first = FailoverConnection("failover:(stomp://a:61613)", connector=connector)
    second = FailoverConnection("failover:(stomp://b:61613)", connector=connector)
    assert first._rng is shared_random()
    assert second._rng is shared_random()
    assert first._client_id != second._client_id


def test_equal_targets_resolve_to_one_shared_value_and_others_to_their_own() -> None:
    uri = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
    first, second = resolve_target(uri), resolve_target(uri)
    assert first == second
    assert first is second
    other = resolve_target("failover:(stomp://a:61613,stomp://b:61613)?randomize=true")
    assert other[1].randomize is True
    assert first[1].randomize is False


def test_the_dispatcher_keeps_no_queue_condition_or_thread_between_clusters_of_jobs() -> None:
    dispatcher = Dispatcher("dispatch-test", linger=0.0)
    assert dispatcher._jobs is None
    assert dispatcher._more is None
    dispatcher.start()
    ran: list[int] = []
    done = threading.Event()
    dispatcher.submit(lambda: ran.append(1))
    dispatcher.submit(done.set)
    thread = dispatcher.thread
    assert thread is not None
    assert done.wait(WAIT)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert dispatcher._jobs is None
    assert dispatcher._more is None
    assert dispatcher.thread is None
    again = threading.Event()
    dispatcher.submit(again.set)  # the next cluster starts a thread anew
    assert again.wait(WAIT)
    dispatcher.stop()
    dispatcher.join(WAIT)
    assert ran == [1]


def test_on_the_real_clock_the_reconnect_loop_has_no_thread_between_its_passes() -> None:
    conn = FailoverConnection("failover:(stomp://a:61613)", connector=FakeConnector())
    conn.connect(timeout=WAIT)
    try:
        assert conn._loop._parking is not None
        last_pass = conn._loop.thread  # None once the pass that connected has parked
        if last_pass is not None:
            last_pass.join(WAIT)  # it parks (connected: nothing to do until a wake-up), and ends
        assert conn._loop.thread is None
        assert conn.state == "connected"
    finally:
        conn.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("failover-client-loop")]


def test_on_a_virtual_clock_the_reconnect_loop_keeps_its_thread() -> None:
    clock = FakeClock(autojump=True)
    conn = FailoverConnection("failover:(stomp://a:61613)", connector=FakeConnector(), clock=clock)
    conn.connect(timeout=WAIT)
    try:
        assert conn._loop._parking is None
        thread = conn._loop.thread
        assert thread is not None
        assert thread.is_alive()
    finally:
        conn.close()


def test_a_writer_makes_its_conditions_only_for_a_backlog_and_drops_the_thread_s_with_it() -> None:
    written: list[bytes] = []
    writer = FrameWriter(
        written.append, on_written=lambda: None, on_failed=lambda exc: None, linger=0.0
    )
    writer.start()
    writer.put(b"inline", urgent=True)  # an idle writer: written on this thread
    assert writer.flush(WAIT)
    assert writer._work is None
    assert writer._progress is None
    writer.put(b"queued", inline=False)  # a backlog: the writer thread takes it
    thread = writer.thread
    assert thread is not None
    assert writer.flush(WAIT)  # waits (on the progress condition, made then) if still queued
    thread.join(WAIT)  # linger 0: it ends as soon as nothing is queued
    assert not thread.is_alive()
    assert writer._work is None
    assert written == [b"inline", b"queued"]


def test_a_lazy_condition_is_a_reentrant_lock_until_someone_waits() -> None:
    cond = LazyCondition()
    with cond, cond:  # reentrant, as a Condition over its default RLock
        cond.notify()
        cond.notify_all()
    assert cond._cond is None
    with cond:
        assert not cond.wait(0)
        assert cond.wait_for(lambda: True, 0)
    assert cond._cond is not None
    ready: list[bool] = []

    def waiter() -> bool:
        with cond:
            return cond.wait_for(lambda: bool(ready), WAIT)

    with ThreadPoolExecutor(1) as pool:
        woken = pool.submit(waiter)
        with cond:
            ready.append(True)
            cond.notify_all()
        assert woken.result(WAIT)


def test_a_stomp_transport_holds_lazy_conditions_and_a_plain_lock() -> None:
    transport = BoundTransport(
        "127.0.0.1",
        61613,
        deadline=0.0,
        clock=SystemClock(),
        ssl_context=None,
        server_hostname=None,
        on_bytes=lambda data: None,
        on_bad_frame=lambda reason: None,
    )
    for name in _CONDITIONS:
        assert isinstance(getattr(transport, name), LazyCondition)
    assert type(transport._Transport__socket_semaphore) is type(threading.Lock())


def test_a_lean_thread_runs_and_keeps_no_condition_once_started() -> None:
    ran = threading.Event()
    thread = lean_thread(ran.set, "lean-test")
    assert thread.daemon
    assert not thread.is_alive()
    thread.start()
    assert ran.wait(WAIT)
    thread.join(WAIT)
    assert not thread.is_alive()
    started = thread._started  # type: ignore[attr-defined]
    assert isinstance(started, LazyEvent)
    assert started.is_set()
    assert started._made is None
