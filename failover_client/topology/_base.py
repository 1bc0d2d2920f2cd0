"""The topology-source interface: where changes to the broker list come from at run time.

A :class:`TopologySource` watches something beside the data connection (a file, DNS, a
broker's control channel) and pushes whole broker lists into a :class:`TopologySink`.
:class:`~failover_client.FailoverConnection` is a sink: its ``update_brokers`` merges a list
into the pool (seeds are never removed; ``action`` replaces, adds or ignores).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from failover_client.uri import BrokerAddress, ServerListAction

__all__ = ["TopologySink", "TopologySource"]


@runtime_checkable
class TopologySink(Protocol):
    """Receives broker lists; ``FailoverConnection.update_brokers`` has this signature."""

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        """Merge ``update`` (the source's whole current list) into the known brokers.

        ``tiers`` and ``weights`` map broker keys (``BrokerAddress.key``) of ``update`` to a
        priority tier (0 is best) and a relative weight (> 0), e.g. from DNS SRV records.
        Called on the source's own thread; it must not block for long.
        """


@runtime_checkable
class TopologySource(Protocol):
    """Pushes broker lists to a sink from its own thread until stopped."""

    name: str
    """Shown as the ``source`` of every update (and so in ``TopologyChanged`` events)."""

    def start(self, sink: TopologySink) -> None:
        """Begin watching and push lists to ``sink``; returns at once (work runs on a thread)."""

    def stop(self) -> None:
        """Stop watching and join the source's threads. Idempotent; never raises."""
