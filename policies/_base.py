"""The policy interface: a strategy object that turns the live broker list into a plan.

A *plan* is the order in which the connection manager tries brokers during one pass. Brokers are
opaque hashable keys (the engine passes ``BrokerAddress.key`` strings such as
``"127.0.0.1:61613"``; tests use plain ints), so a policy never sees addresses, credentials or
state beyond the keys it is given.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["BrokerPolicy", "H", "distinct_plan"]

H = TypeVar("H", bound=Hashable)
"""A broker key: anything hashable (``BrokerAddress.key`` in the engine, ints in tests)."""


@runtime_checkable
class BrokerPolicy(Protocol[H]):
    """Orders the live brokers for one connection pass.

    Implementations must be thread-safe (stateful ones hold a lock) and must not do I/O.
    ``candidates`` is the live broker list in its configured order, without duplicates; it may
    differ from call to call as brokers join, leave or are quarantined.

    Subclass this protocol explicitly to inherit the default :meth:`first`.
    """

    @property
    def name(self) -> str:
        """The registered name of the policy (e.g. ``"round-robin"``)."""
        ...

    def plan(self, candidates: Sequence[H]) -> list[H]:
        """Return the brokers to try, in order; may advance the policy's state.

        Every built-in policy except ``random`` returns each candidate exactly once. ``random``
        returns ``len(candidates)`` independent picks that may repeat, as Artemis's random policy
        does; the engine passes every plan through :func:`distinct_plan` so that one pass tries
        each distinct broker at most once and never skips one. An empty list gives an empty plan.
        """
        ...

    def first(self, candidates: Sequence[H]) -> H | None:
        """The broker :meth:`plan` would start with now, without building the whole plan.

        Advances a cursor or sticky choice exactly as :meth:`plan` does. Random policies draw
        one number here where a plan draws one per broker, so after the first call the two
        sequences differ (each is still uniform). Returns None for an empty list.
        """
        plan = self.plan(candidates)
        return plan[0] if plan else None


def distinct_plan(plan: Sequence[H], candidates: Sequence[H]) -> list[H]:
    """Make a plan visit every candidate exactly once, keeping the plan's order.

    Repeats are dropped (trying a broker that just failed again in the same pass only costs a
    connect timeout), then any candidate the plan never named is appended in list order, so a pass
    that ends in "all brokers failed" really did try every live broker. The first entries, which
    decide where connections land, keep the policy's distribution unchanged.
    """
    seen: set[H] = set()
    ordered: list[H] = []
    for key in plan:
        if key not in seen:
            seen.add(key)
            ordered.append(key)
    if len(ordered) != len(candidates):
        ordered.extend(key for key in candidates if key not in seen)
    return ordered
