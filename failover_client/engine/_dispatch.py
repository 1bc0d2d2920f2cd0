"""The dispatch thread: runs event listeners, one at a time, in order.

Listeners do not run on the adapter's I/O thread because one that blocks (or sends and waits for
a confirmation that the same I/O thread must read) would stall heart-beats and deadlock; and not
on the reconnect loop's thread because a slow listener must not delay a fail-over. Message
handlers run on their subscriptions' workers (:mod:`~failover_client.engine._consumers`), so a
slow handler delays no event; the thread also hands back the odd message that arrived for a
subscription already gone.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["Dispatcher"]

_log = logging.getLogger("failover_client")

Job = Callable[[], None]


class Dispatcher:
    """A named thread draining a queue of jobs; :meth:`stop` runs what is queued, then ends."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False
        self._stopped = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue ``job``; jobs submitted after :meth:`stop` are dropped."""
        with self._lock:
            if self._stopped:
                return
            self._queue.put(job)

    def stop(self) -> None:
        """Let the queued jobs run, then end the thread (does not wait; see :meth:`join`)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._queue.put(None)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end, unless called from the thread itself (a handler)."""
        if self._started and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # noqa: BLE001 - the dispatch thread must outlive any job
                # Jobs isolate their own failures; reaching here is a bug in the library.
                _log.exception("internal error in the dispatch thread")
