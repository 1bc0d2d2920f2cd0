"""Policies driven by an injected ``random.Random``: ``random``, ``random-sticky``, ``shuffle``."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Sequence

from ._base import BrokerPolicy, H

__all__ = ["RandomPolicy", "RandomStickyPolicy", "ShufflePolicy"]


class RandomPolicy(BrokerPolicy[H]):
    """Every pick independent and uniform, with replacement (Artemis ``Random...Policy``).

    Artemis's policy answers each ``select(max)`` with ``nextInt(max)``, so two tries in a row may
    name the same broker. A plan is ``len(candidates)`` such picks and may therefore repeat one
    broker and omit another; repeats are kept here so the first choice has exactly Artemis's
    distribution. The engine runs every plan through
    :func:`~failover_client.policies.distinct_plan`, which drops repeats and appends the brokers
    the picks missed, so one pass still tries every distinct broker exactly once.
    """

    name = "random"

    def __init__(self, *, rng: random.Random | None = None) -> None:
        """Create the policy; every pick comes from ``rng`` (seed it in tests)."""
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()

    def plan(self, candidates: Sequence[H]) -> list[H]:
        with self._lock:
            return self._rng.choices(candidates, k=len(candidates))

    def first(self, candidates: Sequence[H]) -> H | None:
        if not candidates:
            return None
        # The same draw ``choices`` makes for its first pick, so first() == plan()[0] for the
        # same generator state.
        with self._lock:
            return candidates[math.floor(self._rng.random() * len(candidates))]

    def __repr__(self) -> str:
        return "RandomPolicy()"


class RandomStickyPolicy(BrokerPolicy[H]):
    """Pick a broker at random once, then keep it for as long as it is in the list.

    Artemis's ``RandomStickyConnectionLoadBalancingPolicy`` draws an *index* once and returns it
    forever, even after the list changed under it (it can then name another broker or run past
    the end). This policy sticks to the *broker* instead and draws a new one, uniformly from the
    current list, only when the sticky broker has left it. A plan is the sticky broker followed by
    the others in list order.
    """

    name = "random-sticky"

    def __init__(self, *, rng: random.Random | None = None) -> None:
        """Create the policy; ``rng`` draws the sticky broker (seed it in tests)."""
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        # Zero or one element: a broker key may be any hashable, so None cannot mean "unset".
        self._sticky: list[H] = []

    def _choose(self, candidates: Sequence[H]) -> H:
        with self._lock:
            if not self._sticky or self._sticky[0] not in candidates:
                self._sticky = [candidates[self._rng.randrange(len(candidates))]]
            return self._sticky[0]

    def plan(self, candidates: Sequence[H]) -> list[H]:
        if not candidates:
            return []
        sticky = self._choose(candidates)
        rest = list(candidates)
        rest.remove(sticky)  # one C-level scan instead of a comparison loop in Python
        return [sticky, *rest]

    def first(self, candidates: Sequence[H]) -> H | None:
        if not candidates:
            return None
        return self._choose(candidates)

    def __repr__(self) -> str:
        sticky = self._sticky[0] if self._sticky else None
        return f"RandomStickyPolicy(sticky={sticky!r})"


class ShufflePolicy(BrokerPolicy[H]):
    """A fresh uniformly random permutation on every plan (Classic ``randomize=true``).

    ActiveMQ Classic reorders its URI list before every reconnect pass. Its swap loop
    (``Math.random() * 100 % size``) is not uniform; this policy draws a uniform permutation
    instead. The permutation is built front to back (Fisher-Yates from index 0), so its first
    element is one ``randrange(len)`` draw and :meth:`first` returns exactly ``plan()[0]`` for
    the same generator state.
    """

    name = "shuffle"

    def __init__(self, *, rng: random.Random | None = None) -> None:
        """Create the policy; every permutation comes from ``rng`` (seed it in tests)."""
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()

    def plan(self, candidates: Sequence[H]) -> list[H]:
        items = list(candidates)
        size = len(items)
        with self._lock:
            randrange = self._rng.randrange
            for i in range(size - 1):
                j = randrange(i, size)
                items[i], items[j] = items[j], items[i]
        return items

    def first(self, candidates: Sequence[H]) -> H | None:
        if len(candidates) <= 1:
            # plan() draws nothing for fewer than two brokers; neither may first().
            return candidates[0] if candidates else None
        with self._lock:
            return candidates[self._rng.randrange(0, len(candidates))]

    def __repr__(self) -> str:
        return "ShufflePolicy()"
