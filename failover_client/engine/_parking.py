"""The reconnect loop without a thread of its own while it waits.

The reconnect loop spends nearly all its life waiting: for its next decision's ``wake_at`` or
for a wake-up (a lost session, a topology change, ``close()``). Between two waits it does a
pass: a decision, and sometimes an action that blocks (a dial, a drain before a move). The
sync connection gives it a thread that sleeps through the waits. An event-loop driver with a
hundred connections would keep a hundred such threads asleep, so it *parks* the loop instead:

* the loop is a generator that yields each wait (:meth:`ReconnectLoop.steps`);
* :class:`Parking` runs the passes on a thread that exists only while a pass runs, and at
  each wait parks: it hands ``wake_at`` to a shared timer (``schedule``, one thread for every
  connection of the process) and lets the thread end;
* the state's :class:`WakeEvent` calls :meth:`Parking.wake` when set, as the timer does when
  due; either starts a thread for the next pass.

The decisions are the same, made at the same times: only where the wait happens changes.
Parking checks the wake event under the same lock the wake-up takes, so a wake-up is never
lost between the check and the park. Only for the real clock: a virtual clock
(:class:`~failover_client._clock.ThreadAwareClock`) moves time when every thread registered
with it waits, which a thread that ends cannot say, so the loop keeps its thread there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Protocol

from failover_client._clock import Clock
from failover_client._lazy import LazyEvent

__all__ = ["Cancellable", "Parking", "Schedule", "WakeEvent"]

Steps = Generator["float | None", None, None]
"""The loop's passes: each ``next()`` runs until the next wait and yields its ``wake_at``
(clock time; None: only a wake-up ends it)."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[float, Callable[[float], "float | None"]], Cancellable]
"""Run a callback at a clock time (``failover_client.net``'s shared timers have this shape:
the callback gets the time and returns when to run again, or None)."""


class WakeEvent(LazyEvent):
    """The reconnect loop's wake-up: a :class:`threading.Event` that also tells a parked loop.

    ``hook`` (set once, before the loop starts) is called after every ``set``, on the setting
    thread; it must be quick and must not block.
    """

    __slots__ = ("hook",)

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None

    def set(self) -> None:
        super().set()
        hook = self.hook
        if hook is not None:
            hook()


class Parking:
    """Runs a loop's passes on short-lived threads, parked between them (module docstring)."""

    __slots__ = (
        "_clock",
        "_generation",
        "_lock",
        "_name",
        "_parked",
        "_schedule",
        "_steps",
        "_thread",
        "_timer",
        "_wake",
        "done",
    )

    def __init__(
        self,
        steps: Steps,
        wake: WakeEvent,
        schedule: Schedule,
        clock: Clock,
        name: str,
    ) -> None:
        self._steps = steps
        self._wake = wake
        self._schedule = schedule
        self._clock = clock
        self._name = name
        self._lock = threading.Lock()
        self._parked = False
        self._generation = 0
        """Counts parkings: a timer from an earlier one that fires late does nothing."""
        self._timer: Cancellable | None = None
        self._thread: threading.Thread | None = None
        self.done = LazyEvent()
        """Set once the loop ended (stopped, gave up)."""
        wake.hook = self.wake

    @property
    def thread(self) -> threading.Thread | None:
        """The thread of the pass under way, or the one that ended the loop; None while parked
        (a thread that parked the loop may still be ending)."""
        return self._thread

    def start(self) -> None:
        """Run the first pass (on a thread of its own, as every pass)."""
        with self._lock:
            self._start_locked()

    def wake(self) -> None:
        """Something changed (the wake event was set): a parked loop runs its next pass."""
        with self._lock:
            timer = self._resume_locked()
        if timer is not None:
            timer.cancel()  # outside the lock: a cancel may wait for the timer thread

    def _due(self, generation: int) -> float | None:
        with self._lock:
            timer = self._resume_locked() if generation == self._generation else None
        del timer  # it is this callback's own entry, ended by returning None
        return None

    def _resume_locked(self) -> Cancellable | None:
        if not self._parked:
            return None  # a pass runs: it looks at the wake event before it parks again
        self._parked = False
        timer, self._timer = self._timer, None
        self._start_locked()
        return timer

    def _start_locked(self) -> None:
        thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        while True:
            try:
                wake_at = next(self._steps)
            except StopIteration:
                self.done.set()
                return
            if self._park(wake_at):
                return

    def _park(self, wake_at: float | None) -> bool:
        """Park until ``wake_at`` or a wake-up; False: the next pass is due now."""
        if wake_at is not None and wake_at <= self._clock.monotonic():
            return False
        with self._lock:
            if self._wake.is_set():
                return False  # set since the pass cleared it: look again at once
            self._generation += 1
            self._parked = True
            if self._thread is threading.current_thread():
                self._thread = None  # it ends now: a parked loop keeps no thread object
            if wake_at is not None:
                generation = self._generation
                self._timer = self._schedule(wake_at, lambda now: self._due(generation))
        return True

    def join(self) -> None:
        """Wait for the loop to end (after ``close()``: the stop wakes the parked loop).

        From a pass's own thread (a close from inside the loop) it returns at once: the pass
        sees the stop when it looks next.
        """
        if self._thread is threading.current_thread():
            return
        self.done.wait()  # ends: close() set stop and the wake event, whose pass sees it
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()  # ends at once: the thread set ``done`` as its last act
