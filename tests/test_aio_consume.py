"""AsyncFailoverConnection: subscriptions as async iterators and with coroutine handlers."""

from __future__ import annotations

import asyncio

import pytest
from aio_support import A, B, eventually, in_thread, make, run

from failover_client._events import FailedOver, HandlerError, MessagesReleased
from failover_client.aio import AsyncMessage


def test_async_iteration_acknowledges_auto_messages_when_the_next_is_asked() -> None:
    rig = make((A,))

    async def scenario() -> None:
        async with rig.conn as conn:
            sub = await conn.subscribe("/queue/in", prefetch=10)
            session = rig.connector.session(A)
            await eventually(lambda: sub.id in session.subscriptions)
            for i in range(3):
                session.deliver(sub.id, f"m{i}".encode(), message_id=f"id-{i}")
            got = []
            async for message in sub:
                got.append((message.body, message.message_id))
                if len(got) == 3:
                    break
            assert got == [(b"m0", "id-0"), (b"m1", "id-1"), (b"m2", "id-2")]
            assert [r.body for r in session.acks] == [b"m0", b"m1"]  # m2: when the next is asked
            await sub.unsubscribe()
            assert sub.id in session.unsubscribed

    run(scenario)


def test_receive_awaits_a_delivery_and_times_out_with_none() -> None:
    rig = make((A,))

    async def scenario() -> None:
        async with rig.conn as conn:
            sub = await conn.subscribe("/queue/in", ack="client-individual")
            session = rig.connector.session(A)
            await eventually(lambda: sub.id in session.subscriptions)
            assert await sub.receive(timeout=0.01) is None
            waiting = asyncio.create_task(sub.receive())
            await asyncio.sleep(0)
            assert not waiting.done()
            session.deliver(sub.id, b"late")
            message = await waiting
            assert message is not None
            assert message.body == b"late"
            assert session.acks == []
            await message.ack()
            assert [r.body for r in session.acks] == [b"late"]

    run(scenario)


def test_a_burst_is_one_wake_up_and_the_prefetch_bounds_the_buffer() -> None:
    rig = make((A,))

    async def scenario() -> None:
        async with rig.conn as conn:
            sub = await conn.subscribe("/queue/in", ack="client-individual", prefetch=50)
            session = rig.connector.session(A)
            await eventually(lambda: sub.id in session.subscriptions)
            first = asyncio.create_task(sub.receive())
            await asyncio.sleep(0)
            before = conn.handoffs
            for i in range(200):
                session.deliver(sub.id, str(i).encode())
            assert session.waiting(sub.id) == 150  # the rest stays on the broker
            assert sub.in_flight == 50
            bodies = [(await first).body]  # type: ignore[union-attr]
            while len(bodies) < 200:
                message = await sub.receive()
                assert message is not None
                bodies.append(message.body)
                await message.ack()
            assert bodies == [str(i).encode() for i in range(200)]
            assert conn.handoffs - before < 20

    run(scenario)


def test_coroutine_handlers_run_in_order_and_failures_are_nacked_and_reported() -> None:
    rig = make((A,))
    handled: list[bytes] = []

    async def handler(message: AsyncMessage) -> None:
        await asyncio.sleep(0)
        if message.body == b"bad":
            raise ValueError("cannot handle")
        handled.append(message.body)

    async def scenario() -> None:
        async with rig.conn as conn:
            stream = conn.events()
            sub = await conn.subscribe("/queue/in", handler)
            session = rig.connector.session(A)
            await eventually(lambda: sub.id in session.subscriptions)
            for body in (b"1", b"bad", b"2", b"3"):
                session.deliver(sub.id, body)
            await eventually(lambda: len(handled) == 3)
            assert handled == [b"1", b"2", b"3"]
            assert [r.body for r in session.nacks] == [b"bad"]
            assert [r.body for r in session.acks] == [b"1", b"2", b"3"]
            async for event in stream:
                if isinstance(event, HandlerError):
                    assert isinstance(event.error, ValueError)
                    break

    run(scenario)


def test_close_with_drain_lets_the_handler_finish_what_is_buffered() -> None:
    rig = make((A,))
    handled: list[bytes] = []
    gate = asyncio.Event()

    async def handler(message: AsyncMessage) -> None:
        await gate.wait()
        handled.append(message.body)

    async def scenario() -> None:
        await rig.conn.connect()
        sub = await rig.conn.subscribe("/queue/in", handler)
        session = rig.connector.session(A)
        await eventually(lambda: sub.id in session.subscriptions)
        for body in (b"1", b"2", b"3"):
            session.deliver(sub.id, body)
        await eventually(lambda: sub.subscription.inbox.running >= 1)
        closing = asyncio.create_task(rig.conn.close(drain=5))
        await asyncio.sleep(0.01)
        gate.set()
        await closing
        assert handled == [b"1", b"2", b"3"]
        assert [r.body for r in session.acks] == [b"1", b"2", b"3"]

    run(scenario)


def test_close_without_drain_hands_back_what_was_not_handled() -> None:
    rig = make((A,))

    async def never(message: AsyncMessage) -> None:
        await asyncio.Event().wait()

    async def scenario() -> None:
        await rig.conn.connect()
        sub = await rig.conn.subscribe("/queue/in", never)
        session = rig.connector.session(A)
        await eventually(lambda: sub.id in session.subscriptions)
        for body in (b"1", b"2"):
            session.deliver(sub.id, body)
        await eventually(lambda: sub.subscription.inbox.running >= 1)
        await rig.conn.close()
        assert session.acks == []
        released = rig.events.of_type(MessagesReleased)
        assert sum(e.count for e in released) >= 1

    run(scenario)


def test_a_subscription_is_restored_on_the_next_broker_after_a_failover() -> None:
    rig = make((A, B))

    async def scenario() -> None:
        async with rig.conn as conn:
            sub = await conn.subscribe("/queue/in", ack="client-individual")
            session_a = rig.connector.session(A)
            await eventually(lambda: sub.id in session_a.subscriptions)
            rig.connector.behave(A, "refuse")
            session_a.kill()
            await in_thread(lambda: rig.events.wait_for(FailedOver))
            session_b = rig.connector.session(B)
            await eventually(lambda: sub.id in session_b.subscriptions)
            session_b.deliver(sub.id, b"from b", message_id="id-9")
            message = await sub.receive()
            assert message is not None
            assert (message.body, message.message_id) == (b"from b", "id-9")

    run(scenario)


def test_iteration_ends_when_the_connection_closes() -> None:
    rig = make((A,))

    async def scenario() -> None:
        await rig.conn.connect()
        sub = await rig.conn.subscribe("/queue/in")
        reader = asyncio.create_task(anext(aiter(sub), None))
        await asyncio.sleep(0.01)
        await rig.conn.close()
        assert await reader is None

    run(scenario)


def test_a_handler_must_be_callable() -> None:
    rig = make((A,))

    async def scenario() -> None:
        with pytest.raises(Exception, match="handler"):
            await rig.conn.subscribe("/queue/in", "not a handler")  # type: ignore[arg-type]
        await rig.conn.close()

    run(scenario)
