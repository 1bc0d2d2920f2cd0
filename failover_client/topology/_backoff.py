"""The one back-off of topology sources: how long a source waits after its watch failed.

Every source retries what failed (a control channel, a DNS lookup, a URL read, the advisory
watcher's connection) after a delay that starts at ``first`` and doubles up to ``longest``,
and starts over after a success. The sources used to write that arithmetic each on its own;
this is it, once. (The data connection's reconnect delays are the engine's schedule, with the
options' semantics; a source has no options of that kind, only its own two bounds.)
"""

from __future__ import annotations

from failover_client._errors import ConfigurationError

__all__ = ["Backoff"]

_MAX_EXPONENT = 64  # 2 ** 1024 no longer converts to a float; the cap is reached long before


class Backoff:
    """Delays ``first``, ``2 * first``, ... up to ``longest`` for failures in a row."""

    def __init__(self, first: float, longest: float, *, owner: str = "topology source") -> None:
        for what, value in (("first delay", first), ("longest delay", longest)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"{owner}: {what} must be a number > 0, got {value!r}")
        if longest < first:
            raise ConfigurationError(
                f"{owner}: the longest delay ({longest!r}) must be >= the first ({first!r})"
            )
        self.first = float(first)
        self.longest = float(longest)
        self.failures = 0
        """Failures in a row (since the last success)."""

    def delay(self, failures: int) -> float:
        """The delay after the ``failures``-th failure in a row (1: ``first``)."""
        exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
        return min(self.longest, self.first * 2.0**exponent)

    def failed(self) -> float:
        """Count a failure; the delay before the next try."""
        self.failures += 1
        return self.delay(self.failures)

    def succeeded(self) -> int:
        """Start over; returns how many failures in a row this ends."""
        ended, self.failures = self.failures, 0
        return ended

    def __repr__(self) -> str:
        return f"Backoff({self.first:g}..{self.longest:g}s, failures={self.failures})"
