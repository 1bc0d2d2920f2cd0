"""Where a connection's broker list changes at run time: its topology sources and their pushes.

:class:`TopologyHub` owns one connection's topology sources (given in code or asked for by the
URI: ``updateURIsURL``, ``discovery:(...)``, ``topology=...``), starts and stops them with the
connection, and applies what they push:

* a list is merged into the pool (:meth:`BrokerPool.merge`); a change wakes the reconnect loop
  and cuts a reconnect delay short (a broker that just joined is tried at once), and is told as
  a ``TopologyChanged`` event;
* a list a *broker* sent (``pushed``: an AMQP ``failover-server-list``, ActiveMQ's cluster push)
  is ignored under ``updateURIsSupported=false``; lists the user configured (a file, a URL, DNS)
  are always taken;
* a broker's request to rebalance (ActiveMQ's ``rebalanceConnection``) turns rendezvous placement
  on if it was off and wakes the loop to evaluate this client's home at once; it is ignored under
  ``reconnectSupported=false``. The move itself still waits for this client's turn in the drain
  window: a whole cluster told to rebalance at the same instant must not reconnect at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client._events import Event
from failover_client._throttle import LogThrottle
from failover_client.engine._arguments import check_update
from failover_client.engine._hosts import shown_list
from failover_client.engine._planner import Planner
from failover_client.engine._pool import BrokerPool, TopologyDelta
from failover_client.engine._rebalance import Rebalancer
from failover_client.uri import BrokerAddress, DiscoveryAgent, FailoverOptions, ServerListAction

if TYPE_CHECKING:
    from failover_client.engine._connection import FailoverConnection

__all__ = ["TopologyFeed", "TopologyHub", "UriSources", "install_uri_sources", "uri_sources"]

_log = logging.getLogger("failover_client")


class TopologyFeed(Protocol):
    """What the connection needs of a topology source (:mod:`failover_client.topology`)."""

    def start(self, sink: FailoverConnection) -> None: ...

    def stop(self) -> None: ...


class TopologyHub:
    """One connection's topology sources and the rules for what they push (any thread)."""

    def __init__(
        self,
        *,
        pool: BrokerPool,
        planner: Planner,
        options: FailoverOptions,
        now: Callable[[], float],
        wake: threading.Event,
        emit: Callable[[Event], None],
        new_rebalancer: Callable[[], Rebalancer],
        sources: Sequence[TopologyFeed],
    ) -> None:
        self._pool = pool
        self._planner = planner
        self._options = options
        self._now = now
        self._wake = wake
        self._emit = emit
        self._new_rebalancer = new_rebalancer
        self._lock = threading.Lock()
        self._throttle = LogThrottle(_log, clock=now)
        self._truncated: dict[str, int] = {}  # source -> brokers dropped from its last list
        self.sources = tuple(sources)
        self.changed = threading.Event()
        """Set when the pool changed (and when the connection closes): the dialer's delay
        waits on it, so a broker that joins during a back-off is tried at once."""

    def start(self, sink: FailoverConnection) -> None:
        for source in self.sources:
            source.start(sink)

    def stop(self) -> None:
        self.changed.set()  # first: a dialer waiting on it sees the connection's stop at once
        for source in self.sources:
            source.stop()  # never raises (the TopologySource contract)

    def update(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None,
        tiers: Mapping[str, int] | None,
        weights: Mapping[str, float] | None,
        pushed: bool,
    ) -> None:
        check_update(source, action, tiers, weights)
        if pushed and not self._options.update_uris_supported:
            _log.debug("updateURIsSupported=false: ignored the broker list from %s", source)
            return
        chosen = action or self._options.server_list_action
        delta = self._pool.merge(
            update, chosen, source=source, now=self._now(), tiers=tiers, weights=weights
        )
        self._report_left_out(source, delta)
        if delta.changed:
            self.changed.set()
            self._wake.set()
        if (event := delta.event(source)) is not None:
            self._emit(event)

    def _report_left_out(self, source: str, delta: TopologyDelta) -> None:
        """Log (rate-limited, bounded) what the merge left out; tell a cap once per change."""
        if delta.foreign:
            self._throttle.log(
                logging.WARNING,
                (source, "foreign"),
                "%s: skipped %s: another protocol than this connection's",
                source,
                shown_list(delta.foreign),
            )
        if delta.rejected:
            self._throttle.log(
                logging.WARNING,
                (source, "rejected"),
                "%s: skipped brokers that cannot be reached: %s",
                source,
                shown_list(delta.rejected, limit=3),
            )
        with self._lock:
            told = self._truncated.get(source, 0)
            if delta.dropped:
                self._truncated[source] = delta.dropped
            else:
                self._truncated.pop(source, None)
        if delta.dropped and delta.dropped != told:
            # One event per change of the excess: a source that pushes the same oversized
            # list every second tells the application once.
            _log.warning(
                "%s: the list names %d brokers more than topology.maxBrokers=%d lets the pool "
                "hold; the first ones were taken, the rest dropped",
                source,
                delta.dropped,
                delta.limit,
            )
            truncated = delta.truncated(source)
            if truncated is not None:
                self._emit(truncated)

    def request_rebalance(self, source: str) -> None:
        if not self._options.reconnect_supported:
            _log.debug("reconnectSupported=false: ignored the rebalance request of %s", source)
            return
        with self._lock:
            if self._planner.rebalancer is None:
                _log.info("%s asked for rebalancing: placing this client by rendezvous", source)
                self._planner.rebalancer = self._new_rebalancer()
        self._wake.set()


UriSources = Callable[..., Sequence[TopologyFeed]]
"""Builds the sources a URI asks for: ``(members, options, agents, *, login, passcode, clock)``."""

_uri_sources: list[UriSources] = []


def install_uri_sources(builder: UriSources) -> None:
    """Called once by the package's facade: the sources live in a layer above the engine."""
    _uri_sources[:] = [builder]


def uri_sources(
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    agents: Sequence[DiscoveryAgent],
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock,
) -> tuple[TopologyFeed, ...]:
    """The sources the URI asks for (``updateURIsURL``, ``discovery:(...)``, ``topology=``)."""
    if not (options.update_uris_url or agents or options.topology):
        return ()
    if not _uri_sources:
        raise ConfigurationError("the URI asks for topology sources, but none are installed")
    built = _uri_sources[0](members, options, agents, login=login, passcode=passcode, clock=clock)
    return tuple(built)
