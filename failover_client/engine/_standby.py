"""Standby sessions (``backup=True``): which brokers to keep pre-connected.

With ``backup_pool_size`` = n the reconnect loop keeps n handshaken sessions to *other* brokers
than the current one, taken in plan order (the best tier first, balanced by the policy), so a
fail-over promotes a standby instead of connecting. Standbys carry no traffic and no
subscriptions; one that dies is dropped quietly (a ``StandbyLost`` event) and replaced in the
background, with the reconnect schedule's back-off when its replacement cannot be reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from failover_client.uri import BrokerAddress

__all__ = ["refill_candidates"]


def refill_candidates(plan: Sequence[BrokerAddress], exclude: Iterable[str]) -> list[BrokerAddress]:
    """The brokers of ``plan``, in order, that are neither current nor already standing by."""
    excluded = set(exclude)
    return [address for address in plan if address.key not in excluded]
