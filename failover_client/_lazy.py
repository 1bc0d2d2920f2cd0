"""Synchronisation objects that cost next to nothing until someone waits on them.

A :class:`threading.Event` carries a :class:`threading.Condition` from birth: a lock, a waiter
deque with a preallocated block, a dict and bound methods, about 1.2 KiB. An idle connection
holds a dozen events that are set or waited on at most at connect and close time, so these
conditions were a large part of what an idle connection costs.

:class:`LazyEvent` is a :class:`threading.Event` (same methods, same semantics, accepted
wherever one is) whose condition is made by the first :meth:`~LazyEvent.wait` that has to
block, or by the first reader of ``_cond`` (the virtual clock of
:mod:`failover_client.testing` waits on an event's condition directly). Setting, clearing and
reading the flag never make one.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["LazyCondition", "LazyEvent", "lean_thread", "shared_random"]

_T = TypeVar("_T")

_made_lock = threading.Lock()
"""Guards the creation of every LazyEvent's condition and the flag changes that race with it;
held for a few instructions only, never while waiting."""


def _renew_after_fork() -> None:
    # A thread of the parent may have held the lock at fork() time; the child has no such thread.
    global _made_lock  # noqa: PLW0603 - the one lock of the module, replaced only in a forked child
    _made_lock = threading.Lock()


_random = random.Random()
"""The randomness of every connection not given its own: a Mersenne Twister's state is 2.5 KiB,
which a connection needs only for the odd jitter and shuffle. Its methods are safe to call from
several threads (each draw is one step under the interpreter lock)."""


def shared_random() -> random.Random:
    """The process's :class:`random.Random` for connections not given one (reseeded in a
    forked child, like the :mod:`random` module's own, so parent and child draw apart)."""
    return _random


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_after_fork)
    os.register_at_fork(after_in_child=_random.seed)


class LazyEvent(threading.Event):
    """A :class:`threading.Event` whose condition exists only while a waiter needs one.

    :meth:`wait` makes the condition (when the flag is not set) and lets it go when the last
    waiter leaves, so an event waited on once, at connect time, costs nothing afterwards.
    Correctness: a waiter registers and takes the current condition under the module's lock,
    and the condition is only dropped, under that lock, when no waiter is registered; :meth:`set`
    changes the flag and takes the current condition under the same lock, then notifies it. So
    a registered waiter either sees the flag set when it checks (under the condition) or is
    waiting on the very condition :meth:`set` notifies. A condition read through ``_cond`` (the
    virtual clock of :mod:`failover_client.testing` waits on it directly) is kept for good.
    """

    __slots__ = ("_flag", "_made", "_pinned", "_waiters_now")

    def __init__(self) -> None:  # no super().__init__(): that is what makes the condition
        self._flag = False
        self._made: threading.Condition | None = None
        self._waiters_now = 0
        self._pinned = False

    def _take_locked(self) -> threading.Condition:
        made = self._made
        if made is None:
            made = self._made = threading.Condition(threading.Lock())
        return made

    @property
    def _cond(self) -> threading.Condition:
        """The condition guarding the flag: made on first use, and kept from then on."""
        with _made_lock:
            self._pinned = True
            return self._take_locked()

    def _at_fork_reinit(self) -> None:
        made = self._made
        if made is not None:
            made._at_fork_reinit()  # type: ignore[attr-defined]

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with _made_lock:
            self._flag = True
            made = self._made
        if made is not None:
            with made:
                made.notify_all()

    def clear(self) -> None:
        with _made_lock:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        with _made_lock:
            self._waiters_now += 1
            cond = self._take_locked()
        try:
            with cond:
                signaled: bool = self._flag
                if not signaled:
                    signaled = cond.wait(timeout)
                return signaled
        finally:
            with _made_lock:
                self._waiters_now -= 1
                if not self._waiters_now and not self._pinned:
                    self._made = None


class LazyCondition:
    """A :class:`threading.Condition` (over a reentrant lock) whose waiter queue is made by the
    first :meth:`wait`: used as a lock and notified while nobody waits, it is just its lock.

    Every method must be called with the lock held (with ``with``), as a Condition's: then the
    queue is made and read under that lock, and a notify that finds none has nobody to wake.
    ``lock``: a reentrant lock to share with other conditions (default: a new one).
    """

    __slots__ = ("_cond", "_lock")

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = threading.RLock() if lock is None else lock
        self._cond: threading.Condition | None = None

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def _made(self) -> threading.Condition:
        if self._cond is None:
            self._cond = threading.Condition(self._lock)
        return self._cond

    def wait(self, timeout: float | None = None) -> bool:
        return self._made().wait(timeout)

    def wait_for(self, predicate: Callable[[], _T], timeout: float | None = None) -> _T:
        return self._made().wait_for(predicate, timeout)

    def notify(self, n: int = 1) -> None:
        if self._cond is not None:
            self._cond.notify(n)

    def notify_all(self) -> None:
        if self._cond is not None:
            self._cond.notify_all()


_shared_hook: list[object] = []
"""The one ``_invoke_excepthook`` of every lean thread, made by the first (see lean_thread)."""


def lean_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon :class:`threading.Thread` that keeps less for as long as it lives.

    Its "started" event lets its condition go once :meth:`~threading.Thread.start` has
    returned (otherwise a 1.2 KiB condition nobody waits on again), and it shares one
    ``_invoke_excepthook`` with the other lean threads: CPython makes that closure (five cells,
    0.4 KiB) per thread only to hold ``threading.excepthook`` and ``sys.excepthook`` as they
    were, as fallbacks for a hook set to None at shutdown; the hook in force is looked up when
    it runs, so one made at the first lean thread does the same for all of them.
    """
    thread = threading.Thread(target=target, name=name, daemon=True)
    if isinstance(getattr(thread, "_started", None), threading.Event):  # CPython 3.11-3.13
        thread._started = LazyEvent()  # type: ignore[attr-defined]
    if hasattr(thread, "_invoke_excepthook"):  # CPython 3.8-3.13
        if not _shared_hook:
            _shared_hook.append(thread._invoke_excepthook)
        thread._invoke_excepthook = _shared_hook[0]
    return thread
