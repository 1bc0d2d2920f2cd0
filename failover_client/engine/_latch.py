"""The outcome of one blocking send: set once by whoever settles it, awaited by its caller.

A blocking ``send`` needs no :class:`concurrent.futures.Future`: nobody else holds it, adds
callbacks to it or cancels it. A future costs a condition variable (with its re-entrant
lock), its state machine and, to be waited on through the injected clock, a
:class:`threading.Event` (a second condition variable) fed by a done-callback: three lock
objects built and a dozen lock operations per message, which measured as a fifth of the
client's CPU of a blocking send. A :class:`Latch` is one primitive lock, acquired when it is
made; settling releases it, and the caller's wait is an acquire with a timeout, so the wake-up
is one lock release on the confirming thread.

On a clock that is not the real one (``FakeClock`` in tests) the wait must go through
``clock.wait``, which takes a :class:`threading.Event`: there the latch holds an Event instead,
and virtual time bounds the wait as it bounds every other.

Set exactly once: the outbox hands each message to exactly one settler (``Outbox.settle`` is
true for one caller only), and only a settler sets the latch.
"""

from __future__ import annotations

import threading

from failover_client._clock import Clock, SystemClock

__all__ = ["Latch"]


class Latch:
    """One send's outcome (``None``: confirmed), set once, awaited once.

    Offers the two setters of a future that the send path uses (``set_result``,
    ``set_exception``), so a settler does not care which kind of send it settles.
    """

    __slots__ = ("_error", "_event", "_lock", "_set")

    def __init__(self, clock: Clock) -> None:
        self._error: BaseException | None = None
        self._set = False
        self._lock: threading.Lock | None = None
        self._event: threading.Event | None = None
        if type(clock) is SystemClock:
            lock = threading.Lock()
            lock.acquire()  # released by the one settler
            self._lock = lock
        else:
            self._event = threading.Event()

    def set_result(self, result: None) -> None:
        """Confirmed."""
        self._settle(None)

    def set_exception(self, error: BaseException) -> None:
        """Failed with ``error`` (raised by :meth:`outcome`)."""
        self._settle(error)

    def _settle(self, error: BaseException | None) -> None:
        if self._set:
            raise RuntimeError("a send's outcome was set twice")
        self._error = error
        self._set = True  # before the release: the waiter reads it once woken
        if self._lock is not None:
            self._lock.release()
        else:
            assert self._event is not None
            self._event.set()

    def wait(self, clock: Clock, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds of ``clock`` (None: until set); whether it was set.

        ``clock`` is the one the latch was made with.
        """
        if self._lock is not None:
            # An acquire with a timeout: the real clock's wait, without building an Event.
            return self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))
        assert self._event is not None
        return clock.wait(self._event, timeout)

    def outcome(self) -> None:
        """Return when confirmed; raise the failure. Only after :meth:`wait` returned True."""
        if self._error is not None:
            raise self._error

    @property
    def done(self) -> bool:
        return self._set

    def __repr__(self) -> str:
        state = "pending" if not self._set else ("failed" if self._error else "confirmed")
        return f"Latch({state})"
