"""The one hand-off from the connection's threads to the event loop.

Confirmations arrive on an adapter's I/O thread, deliveries and state changes on the threads
that cause them, events on the dispatch thread. Each is turned into a small callable and
posted here; the first post of a burst schedules one drain on the loop
(``loop.call_soon_threadsafe``, which writes to the loop's self-pipe), and the posts that
follow before that drain runs only append to the pending deque. A thousand confirmations read
from one socket chunk are one wake-up of the loop, not a thousand.

A drain runs at most :data:`BATCH` callables, then yields to the loop (``call_soon``) before
the rest: resolving futures wakes tasks, and the loop's other work (a ticker, a web request)
must not wait behind a burst of ten thousand.

A STOMP session of the connection is read on the loop itself (``stomp._loopread``): what it
posts comes from the loop's own thread, which schedules the drain with a plain ``call_soon``
(no self-pipe, no wake-up) into the same queue, so the order of all posts is kept.
:meth:`LoopBridge.post_now` goes further for jobs that only resolve a future (a send's
confirmation): on the loop's thread, with nothing posted before still waiting, it runs the job
at once rather than a turn of the loop later.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable

__all__ = ["BATCH", "SLICE", "Fairness", "LoopBridge"]

_log = logging.getLogger("failover_client.aio")

BATCH = 256
"""Callables run per turn of the loop (about a quarter of a millisecond of work)."""


class LoopBridge:
    """Posts from any thread, run in order on one event loop (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: collections.deque[Callable[[], None]] = collections.deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread_id = -1
        """The ident of the loop's thread (set by bind, which runs on it)."""
        self._draining = False
        """A drain holds jobs it took and has not run yet (post_now must not pass them)."""
        self.handoffs = 0
        """How many times a drain was scheduled from another thread (one per burst)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run posts on ``loop`` from now on (what was posted before runs there too)."""
        if self._loop is loop:
            return  # every call after the first: no lock on the send path
        with self._lock:
            if self._loop is loop:
                return
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError(
                    "an AsyncFailoverConnection belongs to the event loop it was first used in"
                )
            self._loop = loop
            self._thread_id = threading.get_ident()
            schedule = bool(self._pending) and not self._scheduled
            self._scheduled = self._scheduled or schedule
        if schedule:
            loop.call_soon(self._drain)

    def running_here(self) -> asyncio.AbstractEventLoop | None:
        """The bound loop when the caller runs on it, without asking asyncio (whose
        ``get_running_loop`` makes a ``getpid`` system call, once per send otherwise); None:
        ask asyncio. A thread runs one loop at a time, so a bound loop that runs on the
        caller's thread is the caller's running loop."""
        loop = self._loop
        if loop is not None and threading.get_ident() == self._thread_id and loop.is_running():
            return loop
        return None

    def reading_loop(self) -> tuple[asyncio.AbstractEventLoop, int] | None:
        """The running loop and its thread's ident, for a session to be read on; None before
        the connection is used in a loop, or once that loop stopped."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return None
        return loop, self._thread_id

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the loop soon (any thread; never blocks beyond a short lock)."""
        with self._lock:
            self._pending.append(job)
            if self._scheduled or self._loop is None:
                return
            self._scheduled = True
            loop = self._loop
        if threading.get_ident() == self._thread_id:
            loop.call_soon(self._drain)  # posted on the loop (a session it reads): no wake-up
            return
        self.handoffs += 1
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:
            # The loop was closed under a connection never closed: nobody is left to await
            # what the job would resolve.
            _log.debug("event loop closed; %d hand-off(s) dropped", len(self._pending))

    def post_now(self, job: Callable[[], None]) -> None:
        """Run ``job`` now when called on the loop's thread with no earlier post waiting,
        else :meth:`post` it. Only for jobs that resolve futures (safe wherever the caller
        is: a future's callbacks are scheduled, never run, by resolving it)."""
        if threading.get_ident() == self._thread_id and not self._draining:
            with self._lock:
                idle = not self._pending
            if idle:
                _run(job)
                return
        self.post(job)

    def _drain(self) -> None:
        with self._lock:
            pending = self._pending
            jobs = [pending.popleft() for _ in range(min(BATCH, len(pending)))]
            more = bool(pending)
            # Nothing left: the next post schedules a drain of its own (which runs after
            # this one, in order).
            self._scheduled = more
        self._draining = True
        try:
            for job in jobs:
                _run(job)
        finally:
            self._draining = False
        if more:
            loop = self._loop
            assert loop is not None
            loop.call_soon(self._drain)  # still marked scheduled: later posts only append


def _run(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:  # noqa: BLE001 - one failing job must not strand the rest
        _log.exception("a hand-off to the event loop failed")


SLICE = 0.0005
"""Seconds of work a caller may do on the loop without suspending before it yields once."""


class Fairness:
    """Bounds how long a run of calls that need not wait holds the loop.

    A pipelined burst with room in the window, or a buffer full of deliveries, never has to
    suspend: without this, ten thousand of them would run as one step of the loop and hold
    every other task (a ticker, a web request) for its whole length. Each call asks
    :meth:`pause`, which yields to the loop once :data:`SLICE` seconds passed since the caller
    last suspended.
    """

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.perf_counter()

    def suspended(self) -> None:
        """The caller just waited (the loop ran other work meanwhile)."""
        self._since = time.perf_counter()

    def due(self) -> bool:
        """Whether the caller held the loop for :data:`SLICE` (a plain call: the usual answer,
        no, costs no coroutine)."""
        return time.perf_counter() - self._since >= SLICE

    async def pause(self) -> None:
        if self.due():
            await asyncio.sleep(0)  # one turn of the loop for the others
            self._since = time.perf_counter()
