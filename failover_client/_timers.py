"""One timer thread per clock, shared by every connection of the process.

A thread per connection only to wait for its next heart-beat costs a stack, a thread state and
a wake-up per beat for each of them, while the work per wake-up is a few microseconds. Instead
every connection schedules its deadlines on the :class:`Timers` of its clock (one per clock
object; all :class:`~failover_client._clock.SystemClock` instances share one), which keeps a
heap of deadlines and runs each callback on its single thread when its time comes.

The thread exists only while something is scheduled: it starts with the first entry and ends
when the heap is empty, so a process without connections has none. A callback returns the
absolute time it wants to run again, or None to end; it must not block (it delays every other
connection's deadlines): the STOMP watchdog writes heart-beats without blocking and hands the
loss of a hung broker to a thread of its own.

Time is the injected clock's: the thread waits with ``clock.wait`` on an event that a new,
earlier deadline (or a cancel) sets, so it sleeps exactly until the next deadline.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import weakref
from collections.abc import Callable

from failover_client._clock import Clock, SystemClock

__all__ = ["TimerEntry", "Timers", "timers_for"]

_log = logging.getLogger("failover_client")

Callback = Callable[[float], "float | None"]
"""Called with the time it runs at; returns when to run next (absolute), or None to end."""

THREAD_NAME = "failover-client-timer"

END_TIMEOUT = 1.0
"""Real seconds the cancel of the last entry waits for the thread to end (it ends at once:
nothing is left to wait for, and callbacks do not block)."""


class TimerEntry:
    """One scheduled callback; :meth:`cancel` ends it (it may be running at that moment)."""

    __slots__ = ("_timers", "callback", "cancelled")

    def __init__(self, timers: Timers, callback: Callback) -> None:
        self._timers = timers
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Never run it again (a run under way finishes); wakes the thread to drop it."""
        self._timers.cancel(self)


class Timers:
    """A heap of deadlines on one clock and the thread that runs them when due."""

    def __init__(self, clock: Clock, name: str = THREAD_NAME) -> None:
        self._clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, TimerEntry]] = []
        self._order = itertools.count()  # ties run in scheduling order; entries never compare
        self._wake = threading.Event()
        self._ended = threading.Condition(self._lock)
        """Notified when the thread ends, and when an entry comes after none was left."""
        self._thread: threading.Thread | None = None
        self._live = 0
        """Entries scheduled and not cancelled (the thread ends when none is left)."""

    def schedule(self, when: float, callback: Callback) -> TimerEntry:
        """Run ``callback(now)`` at ``when`` (clock time), then again whenever it asks."""
        entry = TimerEntry(self, callback)
        with self._lock:
            self._live += 1
            if self._live == 1:
                self._ended.notify_all()  # a cancel waiting for the thread to end: it goes on
            self._push_locked(when, entry)
        return entry

    def cancel(self, entry: TimerEntry) -> None:
        """Drop ``entry``; the cancel of the last one returns once the thread has ended (so a
        closed connection leaves no thread behind), unless another entry came meanwhile."""
        with self._lock:
            if entry.cancelled:
                return
            entry.cancelled = True
            self._live -= 1
            if self._live:
                return
            self._wake.set()  # nothing left: the thread ends now rather than at a deadline
            thread = self._thread
            if thread is None or thread is threading.current_thread():
                return
            self._ended.wait_for(lambda: self._thread is not thread or self._live > 0, END_TIMEOUT)

    @property
    def thread(self) -> threading.Thread | None:
        """The timer thread while one runs."""
        with self._lock:
            return self._thread

    def __len__(self) -> int:
        with self._lock:
            return self._live

    def _push_locked(self, when: float, entry: TimerEntry) -> None:
        heapq.heappush(self._heap, (when, next(self._order), entry))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        elif self._heap[0][2] is entry:
            self._wake.set()  # earlier than what the thread waits for

    def _run(self) -> None:
        clock = self._clock
        while True:
            with self._lock:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._thread = None  # the next schedule() starts a new thread
                    self._ended.notify_all()
                    return
                when, _, entry = self._heap[0]
                now = clock.monotonic()
                if when > now:
                    self._wake.clear()  # under the lock: a push after this sets it again
                    due = None
                else:
                    heapq.heappop(self._heap)
                    due = entry
            if due is None:
                # Ends at the deadline, or earlier when schedule()/cancel() set the event.
                clock.wait(self._wake, when - now)
                continue
            following = self._call(due, now)
            with self._lock:
                if following is not None and not due.cancelled:
                    self._push_locked(following, due)
                elif not due.cancelled:
                    due.cancelled = True
                    self._live -= 1

    def _call(self, entry: TimerEntry, now: float) -> float | None:
        try:
            return entry.callback(now)
        except Exception:  # noqa: BLE001 - one connection's bug must not stop the others' timers
            _log.exception("internal error in a timer callback; it is not run again")
            return None

    def __repr__(self) -> str:
        with self._lock:
            live, running = self._live, self._thread is not None
        return f"Timers(entries={live}, thread={'running' if running else 'none'})"


_registry_lock = threading.Lock()
# Weak values: the timers of a clock live as long as someone holds them (a session's watchdog);
# they hold their clock, so its id cannot be reused by another clock meanwhile.
_registry: weakref.WeakValueDictionary[int, Timers] = weakref.WeakValueDictionary()
_SYSTEM_KEY = 0


def timers_for(clock: Clock) -> Timers:
    """The process's timers for ``clock`` (every real clock shares one)."""
    key = _SYSTEM_KEY if type(clock) is SystemClock else id(clock)
    with _registry_lock:
        found = _registry.get(key)
        if found is None:
            found = Timers(clock)
            _registry[key] = found
        return found


def _forget_after_fork() -> None:
    """In a forked child: the parent's timer threads did not follow, and a lock may be held.

    The parent's connections are unusable in the child (``engine._lifetime``); new ones get
    new timers.
    """
    global _registry_lock, _registry  # noqa: PLW0603 - the process-wide registry, reset once
    _registry_lock = threading.Lock()
    _registry = weakref.WeakValueDictionary()


os.register_at_fork(after_in_child=_forget_after_fork)
