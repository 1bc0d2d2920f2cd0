"""The future of one ``send_async``: a real :class:`~concurrent.futures.Future` that costs
nothing until someone waits on it.

A pipelined send returns a future that most applications never look at (they ``flush()``), yet
a :class:`concurrent.futures.Future` builds a condition variable (with its re-entrant lock)
when it is made, takes that lock again to be marked running and once more, with a
``notify_all``, to be settled: a fifth of a group-committed send's CPU. :class:`SendFuture`
builds the condition only when something needs it (``result()``, ``exception()``,
``add_done_callback()``, :func:`concurrent.futures.wait`, ``repr``), and is settled without a
lock while nobody has.

Why settling without the lock loses no waiter: the settler stores the outcome and the final
state *first* and only then looks whether a condition exists. A thread that builds one
afterwards checks the state under it and finds the future done, so it neither waits nor
registers anything. A thread that built one before the settler looked is seen: the settler
then takes the condition, wakes the waiters and runs the callbacks, exactly as the base class
does. (Under the GIL these steps are seen by other threads in program order.)

The future is born running: its outcome belongs to the broker, so it cannot be cancelled.
Set once: the outbox hands each message to exactly one settler (``Outbox.settle``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, RUNNING
from typing import Any

from failover_client.engine._latch import Latch

__all__ = ["SendFuture", "confirm_outcomes"]

_BUILD = threading.Lock()
"""Makes two first users of one future agree on its condition (taken once per future at most)."""


class SendFuture(Future[None]):
    """A running future whose condition variable is made on first use (see the module)."""

    # The outcome until one is set: class attributes, so that a new future stores none.
    _result = None
    _exception: BaseException | None = None
    _waiter_list: list[Any] | None = None
    _callback_list: list[Callable[[Future[None]], object]] | None = None

    def __init__(self) -> None:
        # Not Future.__init__: it builds the condition this class exists to avoid, and two
        # lists (its waiters and callbacks), each one more object for the cyclic garbage
        # collector to visit while the send is in flight (made on first use here). These are
        # the attributes it sets, with the state a sender's future starts in.
        self._built: threading.Condition | None = None
        self._state = RUNNING

    @property  # the base class's attribute (concurrent.futures.wait appends to it)
    def _waiters(self) -> list[Any]:
        found = self._waiter_list
        if found is None:
            with _BUILD:
                found = self._waiter_list
                if found is None:
                    found = self._waiter_list = []
        return found

    @_waiters.setter
    def _waiters(self, value: list[Any]) -> None:
        self._waiter_list = value

    @property  # the base class's attribute (add_done_callback appends to it)
    def _done_callbacks(self) -> list[Callable[[Future[None]], object]]:
        found = self._callback_list
        if found is None:
            with _BUILD:
                found = self._callback_list
                if found is None:
                    found = self._callback_list = []
        return found

    @_done_callbacks.setter
    def _done_callbacks(self, value: list[Callable[[Future[None]], object]]) -> None:
        self._callback_list = value

    @property  # the base class's attribute, made on first use
    def _condition(self) -> threading.Condition:
        built = self._built
        if built is None:
            with _BUILD:
                built = self._built
                if built is None:
                    built = self._built = threading.Condition()
        return built

    @_condition.setter
    def _condition(self, value: threading.Condition) -> None:
        self._built = value

    def done(self) -> bool:
        """Whether the broker's answer (or a failure) is in; never blocks."""
        return self._state == FINISHED

    def set_result(self, result: None) -> None:
        if self._built is not None:  # someone is or was waiting: the base class's way
            super().set_result(result)
            return
        self._finish(result, None)

    def set_exception(self, exception: BaseException | None) -> None:
        if self._built is not None:
            super().set_exception(exception)
            return
        self._finish(None, exception)

    def _finish(self, result: None, exception: BaseException | None) -> None:
        if self._state == FINISHED:
            raise InvalidStateError(f"{self._state}: {self!r}")
        self._result = result
        self._exception = exception
        self._state = FINISHED  # before looking for a condition again (see the module)
        if self._built is not None:
            self._wake(exception)
        # else nobody waits, and nobody added a callback: they will see it done

    def _wake(self, exception: BaseException | None) -> None:
        """The waiters and callbacks of a future just finished without its condition."""
        built = self._built
        assert built is not None
        with built:
            for waiter in self._waiter_list or ():  # none made: nobody waited
                if exception is None:
                    waiter.add_result(self)
                else:
                    waiter.add_exception(self)
            built.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]  # the base class's, untyped


def confirm_outcomes(outcomes: Iterable[Future[None] | Latch | None]) -> BaseException | None:
    """Set every outcome of a confirmed transaction to success, in one pass.

    A :class:`SendFuture` nobody looked at (the usual case: the application flushes) only
    has its state changed, with no call; the others go through ``set_result``. Every outcome
    is set even when one raises (a callback of a plain future); the first error is returned.
    """
    failure: BaseException | None = None
    for outcome in outcomes:
        if outcome is None:
            continue
        if type(outcome) is SendFuture and outcome._built is None and outcome._state is RUNNING:
            # _result and _exception are None since __init__: the state alone says "done".
            outcome._state = FINISHED  # before looking for a condition again (see the module)
            if outcome._built is None:
                continue
            # Another thread built the condition meanwhile (mypy cannot see that it may).
            try:  # type: ignore[unreachable]
                outcome._wake(None)
            except Exception as exc:  # noqa: BLE001 - the others are still set; returned
                failure = failure or exc
            continue
        try:
            outcome.set_result(None)
        except Exception as exc:  # noqa: BLE001 - the others are still set; returned
            failure = failure or exc
    return failure
