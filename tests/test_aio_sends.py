"""AsyncFailoverConnection: connect, confirmed and pipelined sends, replay, cancellation."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aio_support import A, B, eventually, in_thread, make, our_threads, run
from failover_client.uri import FailoverOptions

import failover_client.aio
from failover_client import (
    AllBrokersFailed,
    ConfigurationError,
    ConnectionClosed,
    FailoverConnection,
    NotConnected,
    SendTimeout,
)
from failover_client._clock import SystemClock
from failover_client._events import Closed, Connected, FailedOver
from failover_client.aio import AsyncFailoverConnection
from failover_client.aio._bridge import LoopBridge
from failover_client.aio._connection import _hand_over
from failover_client.aio._events import EventHub
from failover_client.engine._sender import UNSET
from failover_client.testing import EventRecorder, FakeConnector


def test_all_is_pinned() -> None:
    assert failover_client.aio.__all__ == [
        "AsyncFailoverConnection",
        "AsyncHandler",
        "AsyncListener",
        "AsyncMessage",
        "AsyncSubscription",
        "EventStream",
    ]
    for name in ("AsyncFailoverConnection", "AsyncMessage", "AsyncSubscription", "EventStream"):
        assert getattr(failover_client.aio, name).__doc__, name


def test_send_returns_once_confirmed_with_the_engine_ids_and_counters() -> None:
    rig = make((A,))

    async def scenario() -> None:
        async with rig.conn as conn:
            assert conn.state == "connected"
            await conn.send("/queue/q", "héllo", {"k": "v"})
            await conn.send("/queue/q", b"2", message_id="order-7")
            first, second = rig.connector.session(A).sent
            assert first.body == "héllo".encode()
            assert first.headers["failover-message-id"] == "c-1"
            assert second.headers["failover-message-id"] == "order-7"
            assert conn.stats()["confirmed"] == 2
        assert conn.state == "closed"

    run(scenario)


def test_calls_before_connect_and_after_close_raise_what_the_engine_raises() -> None:
    rig = make((A,))

    async def scenario() -> None:
        with pytest.raises(NotConnected):
            await rig.conn.send("/queue/q", b"x")
        await rig.conn.connect()
        await rig.conn.close()
        with pytest.raises(ConnectionClosed):
            await rig.conn.send("/queue/q", b"x")
        with pytest.raises(ConfigurationError, match="timeout"):
            await rig.conn.send("/queue/q", b"x", timeout=0)

    run(scenario)


def test_a_bounded_connect_to_dead_brokers_fails_with_every_cause() -> None:
    rig = make((A, B), startup_max_reconnect_attempts=1, max_reconnect_attempts=1)
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")

    async def scenario() -> None:
        with pytest.raises(AllBrokersFailed) as caught:
            await rig.conn.connect()
        assert set(caught.value.causes) == {"stomp://a:61613", "stomp://b:61613"}
        await rig.conn.close()

    run(scenario)


def test_a_burst_of_confirmations_is_one_hand_off_to_the_loop() -> None:
    rig = make((A,), auto_confirm=False)

    async def scenario() -> None:
        async with rig.conn as conn:
            futures = [await conn.submit("/queue/q", f"m{i}".encode()) for i in range(200)]
            # The Connected event is handed over by the dispatch thread: counted before.
            await eventually(lambda: bool(rig.events.of_type(Connected)))
            before = conn.handoffs
            # 200 confirmations on another thread before the loop runs again: the loop is
            # held (join) until that thread posted them all.
            reader = threading.Thread(target=rig.connector.session(A).confirm)
            reader.start()
            reader.join()  # ends: confirm() returns once it settled the 200
            await asyncio.gather(*futures)
            assert conn.handoffs - before == 1
            assert conn.stats()["confirmed"] == 200

    run(scenario)


def test_confirmations_read_on_the_loop_are_no_hand_off() -> None:
    rig = make((A,), auto_confirm=False)

    async def scenario() -> None:
        async with rig.conn as conn:
            futures = [await conn.submit("/queue/q", f"m{i}".encode()) for i in range(200)]
            # The Connected event is handed over by the dispatch thread: counted before.
            await eventually(lambda: bool(rig.events.of_type(Connected)))
            before = conn.handoffs
            rig.connector.session(A).confirm()  # on the loop's thread, as a loop-read session
            assert all(future.done() for future in futures)  # resolved at once, in order
            await asyncio.gather(*futures)
            assert conn.handoffs == before
            assert conn.stats()["confirmed"] == 200

    run(scenario)


def test_unconfirmed_sends_are_replayed_with_their_ids_after_a_failover() -> None:
    rig = make((A, B), auto_confirm=False)

    async def scenario() -> None:
        async with rig.conn as conn:
            futures = [await conn.submit("/queue/q", f"m{i}".encode()) for i in range(3)]
            session_a = rig.connector.session(A)
            session_a.confirm(1)
            await futures[0]
            rig.connector.behave(A, "refuse")
            session_a.kill()
            await in_thread(lambda: rig.events.wait_for(FailedOver))
            session_b = rig.connector.session(B)
            await eventually(lambda: len(session_b.sent) == 2)
            assert session_b.message_ids() == ["c-2", "c-3"]
            session_b.confirm()
            await asyncio.gather(*futures)
            stats = conn.stats()
            assert (stats["confirmed"], stats["replayed"], stats["in_flight"]) == (3, 2, 0)

    run(scenario)


def test_a_send_during_a_failover_awaits_the_next_broker_without_blocking_the_loop() -> None:
    rig = make((A, B))

    async def scenario() -> None:
        async with rig.conn as conn:
            rig.connector.behave(A, "refuse")
            rig.connector.behave(B, "hang")
            rig.connector.session(A).kill()
            await eventually(lambda: conn.state != "connected")
            send = asyncio.create_task(conn.send("/queue/q", b"later"))
            ticks = 0
            while ticks < 5:  # the loop runs while the send waits for a broker
                await asyncio.sleep(0)
                ticks += 1
            assert not send.done()
            rig.connector.release_hangs()
            await send
            assert [m.body for m in rig.connector.session(B).sent] == [b"later"]

    run(scenario)


def test_a_send_cancelled_before_its_write_wrote_nothing() -> None:
    rig = make((A, B))

    async def scenario() -> None:
        async with rig.conn as conn:
            rig.connector.behave(A, "refuse")
            rig.connector.behave(B, "hang")
            rig.connector.session(A).kill()
            await eventually(lambda: conn.state != "connected")
            send = asyncio.create_task(conn.send("/queue/q", b"cancelled", message_id="x-1"))
            await asyncio.sleep(0)
            send.cancel()
            with pytest.raises(asyncio.CancelledError):
                await send
            rig.connector.release_hangs()
            await conn.send("/queue/q", b"after")
            assert [m.body for m in rig.connector.session(B).sent] == [b"after"]
            assert conn.stats()["sent"] == 1

    run(scenario)


def test_a_send_cancelled_after_its_write_is_in_doubt_and_replayed_with_its_id() -> None:
    rig = make((A, B), auto_confirm=False)

    async def scenario() -> None:
        async with rig.conn as conn:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    await conn.send("/queue/q", b"doubt", message_id="x-2")
            assert conn.stats()["in_flight"] == 1  # still tracked
            rig.connector.behave(A, "refuse")
            rig.connector.session(A).kill()
            await in_thread(lambda: rig.events.wait_for(FailedOver))
            session_b = rig.connector.session(B)
            await eventually(lambda: session_b.message_ids() == ["x-2"])
            session_b.confirm()
            await conn.flush()
            stats = conn.stats()
            assert (stats["confirmed"], stats["replayed"], stats["in_flight"]) == (1, 1, 0)

    run(scenario)


def test_a_send_past_its_timeout_is_abandoned_with_send_timeout() -> None:
    rig = make((A,), auto_confirm=False)

    async def scenario() -> None:
        async with rig.conn as conn:
            with pytest.raises(SendTimeout, match="not confirmed in time") as caught:
                await conn.send("/queue/q", b"slow", timeout=0.01, message_id="x-3")
            assert caught.value.message_id == "x-3"
            assert conn.stats()["in_flight"] == 0  # no longer tracked, as the blocking send

    run(scenario)


def test_on_the_loop_a_confirmation_settles_at_once_and_a_failure_is_queued() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        bridge = LoopBridge()
        bridge.bind(loop)
        confirmed, failed = loop.create_future(), loop.create_future()
        _hand_over(bridge, confirmed, None)  # read on the loop: no turn of the loop needed
        assert confirmed.done()
        _hand_over(bridge, failed, SendTimeout("not confirmed in time"))
        assert not failed.done()
        # What send() does with a message it abandons: the queued failure then finds it
        # cancelled (settled inline, it would be an exception nobody retrieves).
        failed.cancel()
        await asyncio.sleep(0)
        assert failed.cancelled()

    asyncio.run(scenario())


def test_a_full_window_makes_submit_await_room() -> None:
    rig = make((A,), auto_confirm=False, confirm_window=2)

    async def scenario() -> None:
        async with rig.conn as conn:
            first = await conn.submit("/queue/q", b"1")
            await conn.submit("/queue/q", b"2")
            third = asyncio.create_task(conn.submit("/queue/q", b"3"))
            await asyncio.sleep(0.01)
            assert not third.done()
            with pytest.raises(SendTimeout, match="no room"):
                await conn.submit("/queue/q", b"4", timeout=0.01)
            rig.connector.session(A).confirm(1)
            await first
            await third
            rig.connector.session(A).confirm()
            await conn.flush()
            assert conn.stats()["confirmed"] == 3

    run(scenario)


def test_close_with_drain_lets_outstanding_confirmations_arrive() -> None:
    rig = make((A,), auto_confirm=False)

    async def scenario() -> None:
        await rig.conn.connect()
        pending = await rig.conn.submit("/queue/q", b"1")
        closing = asyncio.create_task(rig.conn.close(drain=5))
        await asyncio.sleep(0.01)
        assert not closing.done()
        rig.connector.session(A).confirm()
        await closing
        assert pending.result() is None
        assert rig.conn.state == "closed"

    run(scenario)


def test_close_without_drain_fails_what_waits_with_connection_closed() -> None:
    rig = make((A,), auto_confirm=False)

    async def scenario() -> None:
        await rig.conn.connect()
        pending = await rig.conn.submit("/queue/q", b"1")
        await rig.conn.close()
        with pytest.raises(ConnectionClosed):
            await pending

    run(scenario)


def test_events_come_as_an_async_iterator_and_to_coroutine_listeners() -> None:
    rig = make((A, B))
    heard: list[str] = []

    async def listener(event: object) -> None:
        await asyncio.sleep(0)
        heard.append(type(event).__name__)

    async def scenario() -> None:
        rig.conn.add_listener(listener)
        stream = rig.conn.events()
        await rig.conn.connect()
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        kinds = []
        async for event in stream:
            kinds.append(type(event))
            if isinstance(event, FailedOver):
                break
        assert kinds.index(Connected) < kinds.index(FailedOver)
        await rig.conn.close()
        assert [type(e) for e in [e async for e in rig.conn.events()]] == []
        assert "Connected" in heard
        assert heard[-1] == Closed.__name__

    run(scenario)


def test_the_asyncio_layer_adds_no_thread() -> None:
    def sync_threads() -> int:
        rig = make((A,))
        plain = FailoverConnection([A], connector=rig.connector, clock=rig.clock)
        before = our_threads()
        plain.connect()
        count = len(our_threads() - before)
        plain.close()
        return count

    expected = sync_threads()
    rig = make((A,))

    async def scenario() -> int:
        before = our_threads()
        async with rig.conn:
            return len(our_threads() - before)

    assert run(scenario) == expected


def test_failover_timeout_bounds_the_wait_for_a_broker_as_call_failover_timeout() -> None:
    rig = make((A, B), failover_timeout=0.02)

    async def scenario() -> None:
        async with rig.conn as conn:
            rig.connector.behave(A, "refuse")
            rig.connector.behave(B, "hang")
            rig.connector.session(A).kill()
            await eventually(lambda: conn.state != "connected")
            with pytest.raises(SendTimeout, match="while failing over"):
                await conn.send("/queue/q", b"x")
            assert conn.stats()["sent"] == 0
            rig.connector.release_hangs()

    run(scenario)


def test_a_failing_listener_is_counted_and_the_others_still_hear() -> None:
    rig = make((A,))
    heard: list[object] = []

    def broken(event: object) -> None:
        raise RuntimeError("listener bug")

    async def scenario() -> None:
        rig.conn.add_listener(broken)
        rig.conn.add_listener(heard.append)
        async with rig.conn as conn:
            await eventually(lambda: any(isinstance(e, Connected) for e in heard))
            assert conn.stats()["listener_errors"] >= 1

    run(scenario)


def test_connect_after_close_raises_connection_closed() -> None:
    rig = make((A,))

    async def scenario() -> None:
        await rig.conn.close()
        with pytest.raises(ConnectionClosed):
            await rig.conn.connect()

    run(scenario)


def test_on_the_real_clock_the_reconnect_loop_has_no_thread_while_it_waits() -> None:
    # The real clock (a virtual one keeps the loop's thread: it must see every waiter): the
    # loop parks on the shared timer between passes, and a lost session still wakes it.
    clock = SystemClock()
    connector = FakeConnector(clock=clock)
    events = EventRecorder()
    options = FailoverOptions(randomize=False, reconnect_jitter=0.0, initial_reconnect_delay=0.0)
    conn = AsyncFailoverConnection(
        (A, B), options=options, connector=connector, clock=clock, listeners=[events]
    )

    def loop_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("failover-client-loop")]

    async def scenario() -> None:
        async with conn:
            await eventually(lambda: not loop_threads())  # the first pass parked
            connector.behave(A, "refuse")
            connector.session(A).kill()
            moved = await in_thread(lambda: events.wait_for(FailedOver))
            assert moved.to_broker == "stomp://b:61613"
            await conn.send("/queue/q", b"after")
            assert [m.body for m in connector.session(B).sent] == [b"after"]
            await eventually(lambda: not loop_threads())
        assert not loop_threads()

    run(scenario)


def test_an_event_after_close_starts_no_listener_task() -> None:
    seen: list[object] = []

    async def scenario() -> None:
        hub = EventHub([seen.append])
        hub.deliver(Connected("stomp://a:61613", 1, 0.0))
        await hub.finish()
        # A straggler after close: a task started now might never run (the loop closing).
        hub.deliver(Connected("stomp://b:61613", 1, 0.0))
        assert len(asyncio.all_tasks()) == 1  # this test's own

    run(scenario)
    assert [getattr(e, "broker", None) for e in seen] == ["stomp://a:61613"]


def test_sends_without_bounds_share_one_budget_and_bounded_ones_get_their_own() -> None:
    rig = make((A,))

    async def scenario() -> None:
        async with rig.conn as conn:
            shared = conn._budget(UNSET, confirmed=True)
            assert shared.connected is None
            assert shared.failing_over is None
            assert conn._budget(UNSET, confirmed=True) is shared
            own = conn._budget(5.0, confirmed=True)
            assert own is not shared
            assert own.connected == 5.0
            await conn.send("/queue/q", b"1")
            assert conn._budget(UNSET, confirmed=False) is shared

    run(scenario)

    bounded = AsyncFailoverConnection(
        [A],
        options=FailoverOptions(timeout=2.0),
        connector=FakeConnector(),
    )
    first = bounded._budget(UNSET, confirmed=True)
    assert first.connected == 2.0
    assert bounded._budget(UNSET, confirmed=True) is not first  # a bound: one per call
