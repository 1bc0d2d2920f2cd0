"""Who is alive on a discovery channel: the last time each announcer was heard (pure state).

Both dynamic-discovery protocols work this way: every broker repeats its announcement on a
fixed period, and a listener forgets an announcer it has not heard for a set time (ActiveMQ
Classic: ten keep-alive intervals; Artemis: the discovery group's ``refreshTimeout``). A broker
that stops cleanly may also say so at once (ActiveMQ's ``dead`` packet). Times come from the
caller (the source's clock), so the table is tested with plain numbers.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["HeardTable"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Entry(Generic[V]):
    value: V
    heard_at: float


class HeardTable(Generic[K, V]):
    """Announcers by key (an ActiveMQ service URL, an Artemis node id), each with what it last
    announced and when; at most ``limit`` of them, so a flood of forged announcers costs a
    bounded amount of memory (the rest are refused until some expire)."""

    def __init__(self, timeout: float, limit: int) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.timeout = timeout
        self.limit = limit
        self._entries: dict[K, _Entry[V]] = {}
        self.refused = 0
        """Announcers not taken because the table was full (for the source's warning)."""

    def heard(self, key: K, value: V, now: float) -> bool:
        """``key`` announced ``value`` at ``now``; True when the announced set changed."""
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self.limit:
                self.refused += 1
                return False
            self._entries[key] = _Entry(value, now)
            return True
        entry.heard_at = max(entry.heard_at, now)
        if entry.value == value:
            return False
        entry.value = value
        return True

    def forget(self, key: K) -> bool:
        """``key`` said it is gone; True when it was known."""
        return self._entries.pop(key, None) is not None

    def expire(self, now: float) -> bool:
        """Drop every announcer not heard for ``timeout``; True when any was dropped."""
        stale = [k for k, e in self._entries.items() if now - e.heard_at >= self.timeout]
        for key in stale:
            del self._entries[key]
        return bool(stale)

    def next_expiry(self) -> float | None:
        """When the oldest announcer expires unless heard again; None when there is none."""
        if not self._entries:
            return None
        return min(e.heard_at for e in self._entries.values()) + self.timeout

    def values(self) -> list[V]:
        """What the live announcers announced, in the order they were first heard."""
        return [e.value for e in self._entries.values()]

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"HeardTable({len(self._entries)} live, timeout={self.timeout:g}s)"
