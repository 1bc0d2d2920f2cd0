"""Which broker the connection should be on: pure functions of pool state and policy.

* :func:`tiers_for` turns ``priority_backup`` / ``priority_uris`` (and explicit overrides) into
  priority tiers: tier 0 is preferred, higher tiers are fall-backs (e.g. the local data centre
  first, a remote one second).
* :func:`plan` orders the brokers to try: the best live tier first, the policy balancing inside
  each tier, each broker once.
* :func:`better_brokers` names the brokers of a strictly better tier than the current one: what
  priority backup probes in the background.
* :func:`redirected` puts the broker a redirect named at the head of a plan, and
  :class:`Redirects` holds the pending redirect and bounds how many are followed in a row.

Keeping "where should I be" a pure function of (pool state, policy, current broker) is what lets
client-side rebalancing (rendezvous hashing) plug in later as one more decision here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from failover_client._clock import Clock
from failover_client.policies import distinct_plan
from failover_client.uri import BrokerAddress, FailoverOptions, broker_key

__all__ = [
    "MAX_REDIRECT_HOPS",
    "REDIRECT_WINDOW",
    "PlanPolicy",
    "Redirects",
    "better_brokers",
    "plan",
    "redirected",
    "tiers_for",
]

_log = logging.getLogger("failover_client")

MAX_REDIRECT_HOPS = 5
"""Redirects followed in a row; more within :data:`REDIRECT_WINDOW` are not followed, so two
brokers that send a client to each other cannot bounce it forever."""

REDIRECT_WINDOW = 30.0
"""Seconds without a redirect after which the count of redirects in a row starts again."""


class PlanPolicy(Protocol):
    """The part of :class:`failover_client.policies.BrokerPolicy` the engine uses."""

    def plan(self, candidates: Sequence[str], /) -> list[str]: ...


def tiers_for(
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    overrides: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Priority tier per ``host:port`` key.

    With ``priority_backup``, the ``priority_uris`` (or, when empty, the first member) form tier 0
    and every other member tier 1; without it every member is tier 0. ``overrides`` (key -> tier)
    wins over both, so several tiers can be described explicitly; its keys are spelled as
    :attr:`BrokerAddress.key` spells them (host names without case), so ``Broker1:61613``
    names the same broker as ``broker1:61613``.
    """
    tiers: dict[str, int] = {}
    if options.priority_backup and (members or options.priority_uris):
        preferred = set(options.priority_uris) or {members[0].key}
        for member in members:
            tiers[member.key] = 0 if member.key in preferred else 1
        for key in preferred:
            tiers.setdefault(key, 0)  # a priority broker a source will name later
    else:
        for member in members:
            tiers[member.key] = 0
    for key, tier in (overrides or {}).items():
        host, _, port = key.rpartition(":")
        tiers[broker_key(host, int(port)) if host and port.isdigit() else key] = tier
    return tiers


def plan(tiers: Sequence[Sequence[BrokerAddress]], policy: PlanPolicy) -> list[BrokerAddress]:
    """Every broker of ``tiers`` once: tier by tier, in the policy's order inside a tier."""
    ordered: list[BrokerAddress] = []
    seen: set[str] = set()
    for tier in tiers:
        by_key = {address.key: address for address in tier}
        keys = list(by_key)
        for key in distinct_plan(policy.plan(keys), keys):
            if key in by_key and key not in seen:
                seen.add(key)
                ordered.append(by_key[key])
    return ordered


def better_brokers(
    current: BrokerAddress,
    tiers: Sequence[Sequence[BrokerAddress]],
    tier_of: Mapping[str, int],
) -> list[BrokerAddress]:
    """Brokers of a strictly better tier than ``current``'s, best tier first."""
    mine = tier_of.get(current.key, 0)
    return [a for tier in tiers for a in tier if tier_of.get(a.key, 0) < mine]


def redirected(plan: Sequence[BrokerAddress], target: BrokerAddress | None) -> list[BrokerAddress]:
    """``plan`` with ``target`` (a redirect's broker) moved to the head; else ``plan`` as it is.

    A broker the plan does not hold is not added: the plan is what the pool and the policy
    allow (quarantined brokers included, last), and a redirect only reorders it. The rest keeps
    the policy's order, so a redirect that fails costs one try.
    """
    if target is None:
        return list(plan)
    head = [a for a in plan if a.key == target.key][:1]
    return head + [a for a in plan if a.key != target.key]


class Redirects:
    """The redirect a broker asked for, waiting to be followed; thread-safe.

    A redirect is a hop, not a failure: the dialer tries its target at once, in the same
    attempt, and the reconnect schedule does not count it. At most :data:`MAX_REDIRECT_HOPS`
    are followed in a row (a row ends after :data:`REDIRECT_WINDOW` seconds without one). The
    row counts on across handshakes: a broker reached by a redirect that redirects again right
    after its handshake is the next hop of the same row, and once the row is full such a
    session's end costs the reconnect schedule's next delay (:meth:`exhausted`).
    """

    __slots__ = ("_clock", "_hops", "_last", "_lock", "_refused", "_target")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._target: BrokerAddress | None = None
        self._hops = 0
        self._last = -REDIRECT_WINDOW
        self._refused = False
        """The latest redirect was not followed (the row was full)."""

    def offer(self, target: BrokerAddress) -> bool:
        """Follow ``target`` next, unless too many redirects came in a row; True if taken."""
        now = self._clock.monotonic()
        with self._lock:
            if now - self._last > REDIRECT_WINDOW:
                self._hops = 0
            self._last = now
            if self._hops >= MAX_REDIRECT_HOPS:
                refused = True
            else:
                refused = False
                self._hops += 1
                self._target = target
            self._refused = refused
        if refused:
            _log.warning(
                "not following a redirect to %s: %d redirects in a row already",
                target,
                MAX_REDIRECT_HOPS,
            )
        return not refused

    def exhausted(self) -> bool:
        """Whether the latest redirect was not followed, the row being full (until it ends).

        A session that a redirect ended while the row is full is no success to start the
        reconnect schedule over from: two brokers that each accept the handshake and redirect
        at once would otherwise bounce the client at the schedule's first delay for ever.
        """
        now = self._clock.monotonic()
        with self._lock:
            return self._refused and now - self._last <= REDIRECT_WINDOW

    def take(self) -> BrokerAddress | None:
        """The target to try next, once (None when no redirect is pending)."""
        with self._lock:
            target, self._target = self._target, None
        return target
