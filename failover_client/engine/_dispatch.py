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

    def __init__(self, name: str, *, linger: float = DEFAULT_LINGER) -> None:
        self._name = name
        self._linger = linger
        self._jobs: deque[Job] = deque()
        self._lock = threading.Lock()
        self._more = threading.Condition(self._lock)
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
            self._jobs.append(job)
            if self._started:
                self._wake_locked()

    def stop(self) -> None:
        """Let the queued jobs run, then end the thread (does not wait; see :meth:`join`)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._running:
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
        """The thread now running jobs, or the last one (None: no job ever ran)."""
        return self._thread

    def _wake_locked(self) -> None:
        if self._running:
            if self._parked:
                self._more.notify()
            return
        self._running = True
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _next(self) -> Job | None:
        """The next job, or None when the thread should end (stopped, or idle for ``linger``)."""
        with self._lock:
            while not self._jobs:
                if self._stopped:
                    self._running = False
                    return None
                self._parked = True
                # Woken by submit() or stop(); ends after ``linger`` quiet seconds.
                self._more.wait(self._linger)
                self._parked = False
                if not self._jobs and not self._stopped:
                    # Under the lock: a submit from now on starts a new thread.
                    self._running = False
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
