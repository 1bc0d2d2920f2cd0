"""The plans the reconnect loop follows: whom to dial, whom to probe, where this client lives.

:class:`Planner` binds the pure placement functions (:mod:`._placement`) to one connection's
pool, policy, pending redirect and, with ``rebalance=true``, its :class:`Rebalancer`:

* :meth:`Planner.plan`: the order to try brokers in (best live tier first; inside a tier the
  policy's order, or this client's rendezvous order when rebalancing; quarantined ones last);
* :meth:`Planner.dial_plan`: the same, a pending redirect's target first;
* :meth:`Planner.better`: the brokers of better tiers, for priority backup to probe;
* :meth:`Planner.home`: where rebalancing wants the client, when that is not where it is.
"""

from __future__ import annotations

from failover_client._clock import Clock
from failover_client.engine._placement import (
    PlanPolicy,
    Redirects,
    better_brokers,
    plan,
    redirected,
)
from failover_client.engine._pool import BrokerPool
from failover_client.engine._rebalance import Rebalancer
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["Planner"]


class Planner:
    """Plans for one connection; any thread may ask (the pool is thread-safe)."""

    __slots__ = ("_clock", "_options", "_policy", "_pool", "_redirects", "rebalancer")

    def __init__(
        self,
        *,
        pool: BrokerPool,
        policy: PlanPolicy,
        redirects: Redirects,
        rebalancer: Rebalancer | None,
        options: FailoverOptions,
        clock: Clock,
    ) -> None:
        self._pool = pool
        self._policy = policy
        self._redirects = redirects
        self.rebalancer = rebalancer
        self._options = options
        self._clock = clock

    def plan(self, now: float | None = None) -> list[BrokerAddress]:
        """The order to try brokers in at ``now`` (default: the clock's time)."""
        if now is None:
            now = self._clock.monotonic()
        rebalancer = self.rebalancer
        if rebalancer is None:
            ordered = plan(self._pool.by_tier(now), self._policy)
        else:
            ordered = [a for tier in self._pool.live_tiers(now) for a in rebalancer.order(tier)]
        return ordered + self._pool.quarantined(now)

    def dial_plan(self) -> list[BrokerAddress]:
        """The plan of a reconnect run: a pending redirect goes first, and is used up."""
        return redirected(self.plan(), self._redirects.take())

    def bouncing(self) -> bool:
        """Whether redirects come faster than they may be followed (see
        :meth:`Redirects.exhausted`)."""
        return self._redirects.exhausted()

    def better(self, current: BrokerAddress, now: float) -> list[BrokerAddress]:
        if not self._options.priority_backup:
            return []  # tiers then only order the plan; nobody probes
        tier_of = {s.key: s.tier for s in self._pool.states()}
        better = better_brokers(current, self._pool.by_tier(), tier_of)
        rebalancer = self.rebalancer
        if rebalancer is None or not better:
            return better
        # The best of the better tiers, in this client's rendezvous order: priority backup
        # then lands on the client's home, and rebalancing has nothing left to do.
        wanted = {a.key for a in better}
        return [
            a
            for tier in self._pool.live_tiers(now)
            for a in rebalancer.order([s for s in tier if s.key in wanted])
        ] or better

    def home(self, current: BrokerAddress, now: float) -> BrokerAddress | None:
        """The broker rebalancing wants this client on at ``now``, if not ``current``."""
        rebalancer = self.rebalancer
        if rebalancer is None:
            return None
        home = rebalancer.home(self._pool.live_tiers(now))
        if home is None or home.key == current.key:
            return None
        return home

    def next_release(self, now: float) -> float | None:
        """When the next broker quarantined at ``now`` becomes live again (it may be a new
        home). Takes ``now`` from the caller: read separately from :meth:`home`'s, a release
        between the two readings would be neither the home nor a deadline (a lost wake-up)."""
        releases = [
            s.quarantined_until
            for s in self._pool.states()
            if s.quarantined_until is not None and s.quarantined_until > now
        ]
        return min(releases, default=None)
