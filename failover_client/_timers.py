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

A wake-up runs every entry that is due by then, and also those that said they may run a little
early (a heart-beat may go out a tenth of its interval ahead of time; a silence check may not):
with many connections the thread wakes once for a group of beats instead of once per beat, and
the entries of a group come due together again after it.
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

Callback = Callable[[float], "float | tuple[float, float] | None"]
"""Called with the time it runs at; returns when to run next (absolute), or None to end. The
time may come with how much earlier it may run, ``(when, early)``, to share another entry's
wake-up."""

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
        self._heap: list[tuple[float, int, TimerEntry, float]] = []
        """(when, order, entry, how much earlier it may run)."""
        self._order = itertools.count()  # ties run in scheduling order; entries never compare
        self._wake = threading.Event()
        self._ended = threading.Condition(self._lock)
        """Notified when the thread ends, and when an entry comes after none was left."""
        self._thread: threading.Thread | None = None
        self._live = 0
        """Entries scheduled and not cancelled (the thread ends when none is left)."""

    def schedule(self, when: float, callback: Callback, early: float = 0.0) -> TimerEntry:
        """Run ``callback(now)`` at ``when`` (clock time), or up to ``early`` seconds sooner
        when the thread wakes for another entry then; then again whenever it asks."""
        entry = TimerEntry(self, callback)
        with self._lock:
            self._live += 1
            if self._live == 1:
                self._ended.notify_all()  # a cancel waiting for the thread to end: it goes on
            self._push_locked(when, entry, early)
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

    def _push_locked(self, when: float, entry: TimerEntry, early: float = 0.0) -> None:
        heapq.heappush(self._heap, (when, next(self._order), entry, early))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        elif self._heap[0][2] is entry:
            self._wake.set()  # earlier than what the thread waits for

    def _run(self) -> None:
        clock = self._clock
        heap = self._heap
        while True:
            with self._lock:
                while heap and heap[0][2].cancelled:
                    heapq.heappop(heap)
                if not heap:
                    self._thread = None  # the next schedule() starts a new thread
                    self._ended.notify_all()
                    return
                when = heap[0][0]
                now = clock.monotonic()
                if when > now:
                    self._wake.clear()  # under the lock: a push after this sets it again
                    due = None
                else:
                    due = self._take_due_locked(now)
            if due is None:
                # Ends at the deadline, or earlier when schedule()/cancel() set the event.
                clock.wait(self._wake, when - now)
                continue
            for entry in due:
                if not entry.cancelled:  # else cancelled while an earlier one of these ran
                    self._reschedule(entry, self._call(entry, now))

    def _take_due_locked(self, now: float) -> list[TimerEntry]:
        """The due head, and with it every entry next in line that may run early enough to be
        due ``now``: one wake-up for all of them."""
        heap = self._heap
        due: list[TimerEntry] = []
        while heap and heap[0][0] - heap[0][3] <= now:
            entry = heapq.heappop(heap)[2]
            if not entry.cancelled:
                due.append(entry)
        return due

    def _reschedule(self, entry: TimerEntry, following: float | tuple[float, float] | None) -> None:
        with self._lock:
            if entry.cancelled:
                return
            if following is None:
                entry.cancelled = True
                self._live -= 1
            elif isinstance(following, tuple):
                self._push_locked(following[0], entry, following[1])
            else:
                self._push_locked(following, entry)

    def _call(self, entry: TimerEntry, now: float) -> float | tuple[float, float] | None:
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
