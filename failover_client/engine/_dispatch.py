"""The dispatch thread: runs event listeners, one at a time, in order, while there are any.

Listeners do not run on the adapter's I/O thread because one that blocks (or sends and waits for
a confirmation that the same I/O thread must read) would stall heart-beats and deadlock; and not
on the reconnect loop's thread because a slow listener must not delay a fail-over. Message
handlers run on their subscriptions' workers (:mod:`~failover_client.engine._consumers`), so a
slow handler delays no event; the thread also hands back the odd message that arrived for a
subscription already gone.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["DEFAULT_LINGER", "Dispatcher"]

_log = logging.getLogger("failover_client")

Job = Callable[[], None]

DEFAULT_LINGER = 1.0
"""Real seconds the thread waits for another job before it ends (the next job starts another).

Events come in clusters (a connect, a fail-over); between them an idle connection holds no
dispatch thread. Real time, not the injected clock's: it bounds how long an operating-system
thread is kept, which no virtual timeline should stretch or cut.
"""


class Dispatcher:
    """Jobs run one at a time, in order, on a thread that exists while there are jobs.

    :meth:`stop` runs what is queued, then ends.
    """

    __slots__ = (
        "_jobs",
        "_linger",
        "_lock",
        "_more",
        "_name",
        "_parked",
        "_running",
        "_started",
        "_stopped",
        "_thread",
    )

    def __init__(self, name: str, *, linger: float = DEFAULT_LINGER) -> None:
        self._name = name
        self._linger = linger
        # The queue and the condition exist only while a thread runs (an idle connection
        # keeps neither: a deque preallocates a block, a condition holds a deque of its own).
        self._jobs: deque[Job] | None = None
        self._lock = threading.Lock()
        self._more: threading.Condition | None = None
        self._thread: threading.Thread | None = None
        self._running = False
        """A thread runs and has not decided to end: a submit only needs to wake it."""
        self._parked = False
        self._started = False
        self._stopped = False

    def start(self) -> None:
        """Allow the thread from now on; it starts with the first job."""
        with self._lock:
            if not self._started:
                self._started = True
                if self._jobs:
                    self._wake_locked()

    def submit(self, job: Job) -> None:
        """Queue ``job``; jobs submitted after :meth:`stop` are dropped."""
        with self._lock:
            if self._stopped:
                return
            if self._jobs is None:
                self._jobs = deque()
            self._jobs.append(job)
            if self._started:
                self._wake_locked()

    def stop(self) -> None:
        """Let the queued jobs run, then end the thread (does not wait; see :meth:`join`)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._running and self._more is not None:
                self._more.notify()
            elif self._jobs and self._started:
                self._wake_locked()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end, unless called from the thread itself (a handler)."""
        thread = self._thread
        if thread is not None and threading.current_thread() is not thread:
            thread.join(timeout)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread now running jobs, or the one that ran them until :meth:`stop` (None: no
        job ran since the last thread ended for want of jobs)."""
        return self._thread

    def _wake_locked(self) -> None:
        if self._running:
            if self._parked and self._more is not None:
                self._more.notify()
            return
        self._running = True
        if self._more is None:
            self._more = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _next(self) -> Job | None:
        """The next job, or None when the thread should end (stopped, or idle for ``linger``)."""
        with self._lock:
            more = self._more
            assert more is not None  # made before the thread started, dropped only as it ends
            while not self._jobs:
                if self._stopped:
                    self._running = False
                    return None
                self._parked = True
                # Woken by submit() or stop(); ends after ``linger`` quiet seconds.
                more.wait(self._linger)
                self._parked = False
                if not self._jobs and not self._stopped:
                    # Under the lock: a submit from now on starts a new thread (and makes the
                    # queue, the condition and the thread object anew).
                    self._running = False
                    self._jobs = self._more = self._thread = None
                    return None
            return self._jobs.popleft()

    def _run(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                job()
            except Exception:  # noqa: BLE001 - the dispatch thread must outlive any job
                # Jobs isolate their own failures; reaching here is a bug in the library.
                _log.exception("internal error in the dispatch thread")
