"""LoopBridge: posts from other threads wake the loop once per burst; posts from the loop's own
thread (a session read on the loop) are scheduled without a wake-up, in the same order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from failover_client.aio._bridge import BATCH, LoopBridge


class FakeLoop:
    """Records how the bridge schedules its drain; runs it when the test says."""

    def __init__(self) -> None:
        self.soon: list[Callable[[], None]] = []
        self.threadsafe = 0

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.soon.append(callback)

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self.threadsafe += 1
        self.soon.append(callback)

    def is_closed(self) -> bool:
        return False

    def run_once(self) -> None:
        soon, self.soon = self.soon, []
        for callback in soon:
            callback()


def bound() -> tuple[LoopBridge, FakeLoop]:
    bridge, loop = LoopBridge(), FakeLoop()
    bridge.bind(loop)  # type: ignore[arg-type]  # bound on this thread: it is the loop's
    return bridge, loop


def off_the_loop(work: Callable[[], None]) -> None:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()  # ends: work() only posts


def test_posts_on_the_loop_thread_schedule_without_a_wake_up() -> None:
    bridge, loop = bound()
    ran: list[int] = []
    bridge.post(lambda: ran.append(1))
    bridge.post(lambda: ran.append(2))
    assert loop.threadsafe == 0
    assert len(loop.soon) == 1  # one drain for the burst
    assert bridge.handoffs == 0
    loop.run_once()
    assert ran == [1, 2]


def test_posts_from_both_sides_keep_their_order() -> None:
    bridge, loop = bound()
    ran: list[str] = []
    off_the_loop(lambda: bridge.post(lambda: ran.append("thread 1")))
    bridge.post(lambda: ran.append("loop 1"))
    off_the_loop(lambda: bridge.post(lambda: ran.append("thread 2")))
    bridge.post_now(lambda: ran.append("loop, now"))  # earlier posts wait: it queues
    assert loop.threadsafe == 1
    assert bridge.handoffs == 1
    assert ran == []
    loop.run_once()
    assert ran == ["thread 1", "loop 1", "thread 2", "loop, now"]


def test_post_now_runs_at_once_on_an_idle_bridge() -> None:
    bridge, loop = bound()
    ran: list[str] = []
    bridge.post_now(lambda: ran.append("now"))
    assert ran == ["now"]
    assert loop.soon == []
    off_the_loop(lambda: bridge.post_now(lambda: ran.append("from a thread")))
    assert ran == ["now"]  # another thread never runs it
    loop.run_once()
    assert ran == ["now", "from a thread"]


def test_post_now_inside_a_drain_waits_for_the_jobs_the_drain_took() -> None:
    bridge, loop = bound()
    ran: list[str] = []

    def first() -> None:
        ran.append("first")
        bridge.post_now(lambda: ran.append("posted by first"))

    bridge.post(first)
    bridge.post(lambda: ran.append("second"))
    loop.run_once()
    loop.run_once()
    assert ran == ["first", "second", "posted by first"]


def test_a_drain_runs_at_most_a_batch_then_yields() -> None:
    bridge, loop = bound()
    ran: list[int] = []
    for number in range(BATCH + 3):
        bridge.post(lambda number=number: ran.append(number))  # type: ignore[misc]
    loop.run_once()
    assert len(ran) == BATCH
    assert len(loop.soon) == 1
    loop.run_once()
    assert ran == list(range(BATCH + 3))


def test_running_here_names_the_bound_loop_only_on_its_thread_while_it_runs() -> None:
    loop = asyncio.new_event_loop()
    bridge = LoopBridge()
    try:
        assert bridge.running_here() is None  # not bound yet

        async def on_the_loop() -> asyncio.AbstractEventLoop | None:
            bridge.bind(asyncio.get_running_loop())
            seen: list[asyncio.AbstractEventLoop | None] = []
            off_the_loop(lambda: seen.append(bridge.running_here()))
            assert seen == [None]  # another thread: not its loop
            return bridge.running_here()

        assert loop.run_until_complete(on_the_loop()) is loop
        assert bridge.running_here() is None  # on its thread, but the loop stopped
    finally:
        loop.close()
