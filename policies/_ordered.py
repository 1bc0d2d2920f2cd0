"""Policies that keep the configured list order: ``first-element`` and ``round-robin``."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from ._base import BrokerPolicy, H

__all__ = ["FirstElementPolicy", "RoundRobinPolicy"]


class FirstElementPolicy(BrokerPolicy[H]):
    """The list as given: always start with the first broker (Classic ``randomize=false``).

    Artemis's ``FirstElementConnectionLoadBalancingPolicy`` always selects index 0; a plan that
    then walks the rest of the list in order is what Classic does with ``randomize=false``.
    Stateless, so no lock.
    """

    name = "first-element"

    def plan(self, candidates: Sequence[H]) -> list[H]:
        return list(candidates)

    def first(self, candidates: Sequence[H]) -> H | None:
        return candidates[0] if candidates else None

    def __repr__(self) -> str:
        return "FirstElementPolicy()"


class RoundRobinPolicy(BrokerPolicy[H]):
    """Start at a random index once, then one index further on every plan.

    Artemis's ``RoundRobinConnectionLoadBalancingPolicy`` picks ``nextInt(max)`` on its first
    ``select`` and afterwards ``pos + 1``, wrapping to 0 when ``pos + 1 >= max`` (not modulo: a
    list that shrank under the cursor restarts at 0). It keeps an *index*, not a broker, and so
    does this policy. A plan is the list rotated to start at that index.

    Artemis advances once per *try*; a plan advances once per *pass*. The two agree whenever the
    first broker of a plan accepts the connection (the common case, which is what spreads
    connections over the cluster); after a failed try Artemis's next start is one further on.
    """

    name = "round-robin"

    def __init__(self, *, rng: random.Random | None = None) -> None:
        """Create the policy; ``rng`` draws the random starting index (seed it in tests)."""
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._pos: int | None = None

    def _advance(self, size: int) -> int:
        with self._lock:
            if self._pos is None:
                self._pos = self._rng.randrange(size)
            else:
                self._pos = self._pos + 1 if self._pos + 1 < size else 0
            return self._pos

    def plan(self, candidates: Sequence[H]) -> list[H]:
        if not candidates:
            return []
        pos = self._advance(len(candidates))
        items = list(candidates)
        return items[pos:] + items[:pos]

    def first(self, candidates: Sequence[H]) -> H | None:
        if not candidates:
            return None
        return candidates[self._advance(len(candidates))]

    def __repr__(self) -> str:
        return f"RoundRobinPolicy(pos={self._pos})"
