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
  window: a whole cluster told to rebalance at the same instant must not reconnect at once;
* a list past ``topology.maxBrokers`` is cut by the pool and told once (``TopologyTruncated``);
  a source's failure is told as ``TopologySourceFailed``; warnings are rate-limited.

The boundary is declared here, once: :class:`TopologySource` is what the connection needs of a
source, :class:`TopologySink` everything a source may use of the connection. A connection gives
its sources a :class:`ConnectionSink` (never itself), and builds the sources its URI asks for
with a :class:`UriSourceFactory` it is given: the sources live in a layer above the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client._events import Event, Listener, ListenerSet, TopologySourceFailed
from failover_client._hosts import shown_list
from failover_client._lazy import LazyEvent
from failover_client._throttle import LogThrottle
from failover_client.engine._arguments import check_update
from failover_client.engine._planner import Planner
from failover_client.engine._pool import BrokerPool, TopologyDelta
from failover_client.engine._rebalance import Rebalancer
from failover_client.uri import BrokerAddress, DiscoveryAgent, FailoverOptions, ServerListAction

__all__ = [
    "ConnectionSink",
    "TopologyHub",
    "TopologySink",
    "TopologySource",
    "UriSourceFactory",
    "first_list_wait",
    "uri_sources",
]

_log = logging.getLogger("failover_client")


@runtime_checkable
class TopologySink(Protocol):
    """Everything a topology source may use of what it feeds: the whole interface, declared.

    A connection gives its sources a :class:`ConnectionSink`; a source started by hand may be
    given any object with these members (``failover_client.topology.BaseSink`` has harmless
    defaults for all but :meth:`update_brokers`). Every method may be called from any thread
    and must not block for long.
    """

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        """Merge ``update`` (the source's whole current list) into the known brokers.

        ``tiers`` and ``weights`` map broker keys (``BrokerAddress.key``) of ``update`` to a
        priority tier (0 is best) and a relative weight (> 0), e.g. from DNS SRV records.
        ``pushed`` says a broker sent the list (the connection ignores such lists under
        ``updateURIsSupported=false``); a list the user configured (a file, DNS) is not pushed.
        """

    def request_rebalance(self, *, source: str) -> None:
        """A broker asked its clients to rebalance (ActiveMQ's ``rebalanceConnection``)."""

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        """Source ``source`` failed (``failures`` in a row) and retries in ``retry_in`` seconds
        (None: never); ``error`` holds no password. A connection tells its listeners."""

    def add_listener(self, listener: Listener) -> None:
        """Receive the data connection's events (a plain sink has none to give)."""

    def remove_listener(self, listener: Listener) -> None:
        """Stop receiving them; a listener never added is ignored."""

    def current_broker(self) -> BrokerAddress | None:
        """The broker the data connection is on (with its credentials), None between brokers."""

    @property
    def follows_connection(self) -> bool:
        """True when a data connection stands behind the sink, whose broker a source may
        follow (:meth:`current_broker`, ``Connected`` events); False for a plain sink."""

    @property
    def options(self) -> FailoverOptions:
        """The data connection's options (TLS settings for a source's own connections)."""

    @property
    def client_id(self) -> str:
        """The data connection's client id (a prefix for a source's own client ids)."""


@runtime_checkable
class TopologySource(Protocol):
    """Pushes broker lists to a sink from its own thread until stopped."""

    name: str
    """Shown as the ``source`` of every update (and so in ``TopologyChanged`` events)."""

    def start(self, sink: TopologySink) -> None:
        """Begin watching and push lists to ``sink``; returns at once (work runs on a thread)."""

    def stop(self) -> None:
        """Stop watching and join the source's threads. Idempotent; never raises."""


class TopologyHub:
    """One connection's topology sources and the rules for what they push (any thread)."""

    __slots__ = (
        "_emit",
        "_lock",
        "_new_rebalancer",
        "_now",
        "_options",
        "_planner",
        "_pool",
        "_throttle",
        "_truncated",
        "_wake",
        "changed",
        "sink",
        "sources",
    )

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
        sources: Sequence[TopologySource],
        listeners: ListenerSet,
        current: Callable[[], BrokerAddress | None],
        client_id: str,
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
        self.sink = ConnectionSink(self, listeners, current, client_id)
        """What the sources are given: the connection's side of :class:`TopologySink`."""
        self.changed = LazyEvent()
        """Set when the pool changed (and when the connection closes): the dialer's delay
        waits on it, so a broker that joins during a back-off is tried at once."""

    @property
    def options(self) -> FailoverOptions:
        return self._options

    def start(self) -> None:
        for source in self.sources:
            source.start(self.sink)

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

    def source_failed(self, source: str, error: str, failures: int, retry_in: float | None) -> None:
        # The source logged it (rate-limited); the application hears every failure as an event.
        self._emit(TopologySourceFailed(source, error, failures, retry_in))

    def request_rebalance(self, source: str) -> None:
        if not self._options.reconnect_supported:
            _log.debug("reconnectSupported=false: ignored the rebalance request of %s", source)
            return
        with self._lock:
            if self._planner.rebalancer is None:
                _log.info("%s asked for rebalancing: placing this client by rendezvous", source)
                self._planner.rebalancer = self._new_rebalancer()
        self._wake.set()


class ConnectionSink:
    """A connection's side of :class:`TopologySink`: what its topology sources see of it.

    Sources get this rather than the connection, so they reach exactly what the protocol
    declares (the pool only through :meth:`update_brokers` and its merge rules).
    """

    __slots__ = ("_client_id", "_current", "_hub", "_listeners")

    follows_connection = True

    def __init__(
        self,
        hub: TopologyHub,
        listeners: ListenerSet,
        current: Callable[[], BrokerAddress | None],
        client_id: str,
    ) -> None:
        self._hub = hub
        self._listeners = listeners
        self._current = current
        self._client_id = client_id

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        self._hub.update(
            update, source=source, action=action, tiers=tiers, weights=weights, pushed=pushed
        )

    def request_rebalance(self, *, source: str) -> None:
        self._hub.request_rebalance(source)

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        self._hub.source_failed(source, error, failures, retry_in)

    def add_listener(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def current_broker(self) -> BrokerAddress | None:
        return self._current()

    @property
    def options(self) -> FailoverOptions:
        return self._hub.options

    @property
    def client_id(self) -> str:
        return self._client_id

    def __repr__(self) -> str:
        return f"<ConnectionSink client_id={self._client_id!r}>"


class UriSourceFactory(Protocol):
    """Builds the (unstarted) sources a URI asks for: ``updateURIsURL``, ``discovery:(...)``,
    ``topology=...``. :func:`failover_client.topology.uri_sources` is the library's."""

    def __call__(
        self,
        members: Sequence[BrokerAddress],
        options: FailoverOptions,
        agents: Sequence[DiscoveryAgent],
        *,
        login: str | None,
        passcode: str | None,
        clock: Clock,
    ) -> Sequence[TopologySource]: ...


def uri_sources(
    factory: UriSourceFactory | None,
    members: Sequence[BrokerAddress],
    options: FailoverOptions,
    agents: Sequence[DiscoveryAgent],
    *,
    login: str | None,
    passcode: str | None,
    clock: Clock,
) -> tuple[TopologySource, ...]:
    """The sources the URI asks for, built by ``factory`` (none asked for: no call)."""
    if not (options.update_uris_url or agents or options.topology):
        return ()
    if factory is None:
        raise ConfigurationError(
            "the URI asks for topology sources (updateURIsURL, discovery: or topology=), but "
            "this connection was given no topology_factory; use failover_client."
            "FailoverConnection, which builds them with failover_client.topology.uri_sources"
        )
    built = factory(members, options, agents, login=login, passcode=passcode, clock=clock)
    return tuple(built)


DEFAULT_INITIAL_WAIT = 10.0
"""Seconds an Artemis client waits for the first broadcast (``discoveryInitialWaitTimeout``)."""


def first_list_wait(agents: Sequence[DiscoveryAgent]) -> float:
    """Seconds a first connect with no broker yet waits for a discovered list: the longest
    ``discoveryInitialWaitTimeout`` (or ``initialWaitTimeout``, ms) of the Artemis ``udp://``
    agents, 10 s when unset, as the Artemis client waits for the first broadcast; 0 without
    such an agent (the dialer then waits one connect timeout). The sources checked the values.
    """
    waits = [0.0]
    for agent in agents:
        if agent.scheme != "udp":
            continue
        text = agent.param("discoveryInitialWaitTimeout") or agent.param("initialWaitTimeout")
        waits.append(int(text) / 1000.0 if text and text.isdigit() else DEFAULT_INITIAL_WAIT)
    return max(waits)
