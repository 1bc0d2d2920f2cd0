"""Rate-limited logging: a warning that repeats says so once, with a count, not once a time.

A broker that flaps, a source that keeps pushing garbage or a reconnect run against a dead group
repeat the same complaint thousands of times a minute. Each line is true, but a log that holds
3,000 copies of it hides everything else (and costs the disk and the CPU of whoever ships it).
:class:`LogThrottle` logs the first record of each *key* at once, swallows the repeats for
``interval`` seconds, and with the next record after that says how many it swallowed::

    throttle = LogThrottle(logging.getLogger("failover_client.topology"), clock=clock.monotonic)
    throttle.log(logging.WARNING, "bad-advisory", "ignored an advisory: %s", reason)

The clock is injected, as everywhere in the library, so the tests decide when a window ends.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["LogThrottle"]

DEFAULT_INTERVAL = 60.0
"""Seconds in which repeats of one key are counted rather than logged."""

_MAX_KEYS = 256
"""Keys remembered at most: the keys come from a peer's input, which must not grow memory."""

_lock = threading.Lock()
"""Guards every throttle's windows (held for a dict operation, never while logging): a
connection has a few throttles that rarely log, so one lock rather than one each."""


def _renew_after_fork() -> None:
    # A thread of the parent may have held the lock at fork() time; the child has no such thread.
    global _lock  # noqa: PLW0603 - the one lock of the module, replaced only in a forked child
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_after_fork)


@dataclass
class _Window:
    opened: float
    suppressed: int = 0


class LogThrottle:
    """Logs the first record of each key per ``interval``, then a count of the ones it dropped."""

    __slots__ = ("_clock", "_interval", "_logger", "_windows")

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"LogThrottle interval must be > 0 seconds, got {interval!r}")
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._windows: dict[Hashable, _Window] | None = None
        """Made by the first record logged: most throttles never log one."""

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless ``key`` was logged less than ``interval`` ago.

        Returns whether a record was written. A record written after repeats were swallowed
        ends with ``(N similar messages suppressed in the last S s)``.
        """
        if not self._logger.isEnabledFor(level):
            return False
        now = self._clock()
        with _lock:
            windows = self._windows
            if windows is None:
                windows = self._windows = {}
            window = windows.get(key)
            if window is not None and now - window.opened < self._interval:
                window.suppressed += 1
                return False
            suppressed = 0 if window is None else window.suppressed
            elapsed = 0.0 if window is None else now - window.opened
            if window is None and len(windows) >= _MAX_KEYS:
                _forget_oldest(windows)
            windows[key] = _Window(now)
        if suppressed:
            msg = f"{msg} ({suppressed} similar messages suppressed in the last {elapsed:.0f} s)"
        self._logger.log(level, msg, *args)
        return True

    def pending(self, key: Hashable) -> int:
        """How many records of ``key`` were swallowed since its last written one."""
        with _lock:
            window = None if self._windows is None else self._windows.get(key)
            return 0 if window is None else window.suppressed

    def __repr__(self) -> str:
        name, keys = self._logger.name, len(self._windows or ())
        return f"LogThrottle({name!r}, interval={self._interval:g}, keys={keys})"


def _forget_oldest(windows: dict[Hashable, _Window]) -> None:
    oldest = min(windows, key=lambda k: windows[k].opened)
    del windows[oldest]
