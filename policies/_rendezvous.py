"""Rendezvous (highest-random-weight) hashing of a stable client id over the live brokers.

Every (client id, broker) pair gets a pseudo-random weight; a client's plan lists the brokers by
descending weight. Because a broker's weight does not depend on which other brokers exist, a
broker that joins becomes the first choice of only the clients for which it out-weighs every
existing broker (about 1/N of them), and a broker that leaves moves only the clients that had it
first. That is what client-side rebalancing needs: no coordinator, minimal movement.

The weight must be the same in every process and on every run, so it is a keyed BLAKE2b digest,
never Python's ``hash()`` (salted per process for str).
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from collections.abc import Hashable, Sequence

from ._base import BrokerPolicy, H

__all__ = ["RendezvousPolicy", "rendezvous_weight", "weighted_rendezvous_score"]

_DIGEST_SIZE = 8
_MAX_WEIGHT = 2 ** (8 * _DIGEST_SIZE) - 1
_CACHE_LIMIT = 4096
"""Weights kept per policy; brokers are few, the bound only guards against endless churn."""


def _client_hasher(client_id: str) -> hashlib.blake2b:
    # The separator keeps ("ab", "c") and ("a", "bc") apart.
    return hashlib.blake2b(client_id.encode("utf-8") + b"\x00", digest_size=_DIGEST_SIZE)


def _weight(prefix: hashlib.blake2b, key: Hashable) -> int:
    hasher = prefix.copy()
    hasher.update(str(key).encode("utf-8"))
    return int.from_bytes(hasher.digest(), "big")


def rendezvous_weight(client_id: str, key: Hashable) -> int:
    """The stable 64-bit weight of broker ``key`` for ``client_id`` (its ``str()`` is hashed)."""
    return _weight(_client_hasher(client_id), key)


def weighted_rendezvous_score(client_id: str, key: Hashable, weight: float) -> float:
    """The score of broker ``key`` with relative ``weight`` (> 0) for ``client_id``.

    Weighted rendezvous hashing: with the 64-bit hash mapped to ``u`` in (0, 1), the score is
    ``-weight / ln(u)``, so over many clients each broker wins in proportion to its weight,
    and a broker's score still does not depend on which other brokers exist. With equal
    weights the order is that of :func:`rendezvous_weight`.
    """
    u = (rendezvous_weight(client_id, key) + 1) / (_MAX_WEIGHT + 2)
    return -weight / math.log(u)


class RendezvousPolicy(BrokerPolicy[H]):
    """Brokers ordered by descending rendezvous weight for one stable client id.

    Deterministic: the same client id and the same brokers always give the same plan, in every
    process. Give each application instance its own stable ``client_id`` (e.g. host name plus
    role) to spread instances over brokers; with ``client_id=None`` a random id is drawn from
    ``rng`` once, which spreads connections but not across restarts.
    """

    name = "rendezvous"

    def __init__(self, *, client_id: str | None = None, rng: random.Random | None = None) -> None:
        """Create the policy for ``client_id`` (a random one from ``rng`` when None)."""
        if client_id is None:
            client_id = f"{(rng if rng is not None else random.Random()).getrandbits(64):016x}"
        self.client_id = client_id
        self._prefix = _client_hasher(client_id)
        self._lock = threading.Lock()
        self._weights: dict[Hashable, int] = {}
        # The engine asks again and again for the same broker list; remember the last answer.
        self._last_in: tuple[H, ...] = ()
        self._last_out: tuple[H, ...] = ()

    def weight(self, key: Hashable) -> int:
        """This client's weight for broker ``key`` (cached)."""
        with self._lock:
            return self._weight_locked(key)

    def _weight_locked(self, key: Hashable) -> int:
        weight = self._weights.get(key)
        if weight is None:
            if len(self._weights) >= _CACHE_LIMIT:
                self._weights.clear()
            weight = self._weights[key] = _weight(self._prefix, key)
        return weight

    def plan(self, candidates: Sequence[H]) -> list[H]:
        current = tuple(candidates)
        with self._lock:
            if current != self._last_in:
                weight = self._weight_locked
                # Ties (a 64-bit collision) keep list order: sorted() is stable.
                self._last_out = tuple(sorted(current, key=weight, reverse=True))
                self._last_in = current
            return list(self._last_out)

    def first(self, candidates: Sequence[H]) -> H | None:
        if not candidates:
            return None
        current = tuple(candidates)
        with self._lock:
            if current == self._last_in:
                return self._last_out[0]
            return max(current, key=self._weight_locked)

    def __repr__(self) -> str:
        return f"RendezvousPolicy(client_id={self.client_id!r})"
