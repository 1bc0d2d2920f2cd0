"""Client-side rebalancing: which broker this client belongs on, and when it moves there.

No broker tells a STOMP or AMQP client to move, so each client decides alone, the same way
every time: its *home* is the broker of the best live priority tier with the highest weighted
rendezvous score for its client id (:func:`failover_client.policies.weighted_rendezvous_score`).
A broker's score does not depend on the other brokers, so when one joins only the clients it
now out-scores move (about 1/N of them, or its weight's share), and when one leaves only its
own clients move; when it comes back (its quarantine over), they return. Tiers come first: a
client stays in the best tier that has a live broker and balances inside it, falls back to the
next tier only when that one is empty, and comes back when a member returns.

Moves are spread over ``rebalance_drain_window``: a client whose home changed waits a random
part of the window (from the injected random source), so a join does not make every client
that must move hit the new broker in the same millisecond. The move itself is the priority
switch's: the old session drains (confirmed sends finish or are replayed), subscriptions are
restored on the new one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from failover_client.engine._pool import BrokerState
from failover_client.policies import weighted_rendezvous_score
from failover_client.uri import BrokerAddress

__all__ = ["Rebalancer"]


class Rebalancer:
    """Computes this client's home and paces its moves; used by the reconnect loop only."""

    def __init__(self, client_id: str, drain_window: float, rng: random.Random) -> None:
        self.client_id = client_id
        self._window = drain_window
        self._rng = rng
        self._scores: dict[tuple[str, float], float] = {}
        self._pending: tuple[str, float] | None = None
        """(home key, time the move is due) of the move waiting for its turn."""

    def score(self, state: BrokerState) -> float:
        """This client's score for a broker (cached: the weight only changes by a source)."""
        key = (state.key, state.weight)
        score = self._scores.get(key)
        if score is None:
            if len(self._scores) > 4096:  # brokers are few; only endless churn gets here
                self._scores.clear()
            score = self._scores[key] = weighted_rendezvous_score(
                self.client_id, state.key, state.weight
            )
        return score

    def order(self, tier: Sequence[BrokerState]) -> list[BrokerAddress]:
        """One tier's brokers, this client's home first."""
        return [s.address for s in sorted(tier, key=self.score, reverse=True)]

    def home(self, live_tiers: Sequence[Sequence[BrokerState]]) -> BrokerAddress | None:
        """The home: the best-scoring broker of the first non-empty tier (None: no broker)."""
        for tier in live_tiers:
            if tier:
                return max(tier, key=self.score).address
        return None

    def due(self, home: BrokerAddress, now: float) -> float:
        """When the move to ``home`` is due: a random part of the drain window after the home
        changed (the same time while it stays the same)."""
        if self._pending is None or self._pending[0] != home.key:
            self._pending = (home.key, now + self._rng.uniform(0.0, self._window))
        return self._pending[1]

    def turn(self, home: BrokerAddress) -> float | None:
        """When the move to ``home`` is due, if its turn was drawn (else None)."""
        pending = self._pending
        return pending[1] if pending is not None and pending[0] == home.key else None

    @property
    def pending(self) -> bool:
        """Whether a turn is drawn (for some home)."""
        return self._pending is not None

    def settle(self) -> None:
        """No move is waiting (the client is home, or the move was made or failed)."""
        self._pending = None

    def __repr__(self) -> str:
        return f"Rebalancer(client_id={self.client_id!r}, window={self._window:g}s)"
