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
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["LogThrottle"]

DEFAULT_INTERVAL = 60.0
"""Seconds in which repeats of one key are counted rather than logged."""

_MAX_KEYS = 256
"""Keys remembered at most: the keys come from a peer's input, which must not grow memory."""


@dataclass
class _Window:
    opened: float
    suppressed: int = 0


class LogThrottle:
    """Logs the first record of each key per ``interval``, then a count of the ones it dropped."""

    __slots__ = ("_clock", "_interval", "_lock", "_logger", "_windows")

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
        self._lock = threading.Lock()
        self._windows: dict[Hashable, _Window] = {}

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless ``key`` was logged less than ``interval`` ago.

        Returns whether a record was written. A record written after repeats were swallowed
        ends with ``(N similar messages suppressed in the last S s)``.
        """
        if not self._logger.isEnabledFor(level):
            return False
        now = self._clock()
        with self._lock:
            window = self._windows.get(key)
            if window is not None and now - window.opened < self._interval:
                window.suppressed += 1
                return False
            suppressed = 0 if window is None else window.suppressed
            elapsed = 0.0 if window is None else now - window.opened
            if window is None and len(self._windows) >= _MAX_KEYS:
                self._forget_oldest()
            self._windows[key] = _Window(now)
        if suppressed:
            msg = f"{msg} ({suppressed} similar messages suppressed in the last {elapsed:.0f} s)"
        self._logger.log(level, msg, *args)
        return True

    def pending(self, key: Hashable) -> int:
        """How many records of ``key`` were swallowed since its last written one."""
        with self._lock:
            window = self._windows.get(key)
            return 0 if window is None else window.suppressed

    def _forget_oldest(self) -> None:
        oldest = min(self._windows, key=lambda k: self._windows[k].opened)
        del self._windows[oldest]

    def __repr__(self) -> str:
        name, keys = self._logger.name, len(self._windows)
        return f"LogThrottle({name!r}, interval={self._interval:g}, keys={keys})"
