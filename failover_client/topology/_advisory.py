"""The ``advisory`` topology source: an ActiveMQ Classic network of brokers, learned over STOMP.

ActiveMQ Classic tells a STOMP client nothing about its cluster, but every broker publishes a
message on ``/topic/ActiveMQ.Advisory.NetworkBridge`` whenever one of its network bridges starts
or stops, and replays the bridges that are up to a new subscriber. With the header
``transformation:jms-advisory-json`` the body is JSON: ``{"BrokerInfo": {"brokerName": ...,
"brokerURL": ...}}`` names the peer, and the header ``started`` (``true`` / ``false``) says which.

The source keeps its own :class:`~failover_client.FailoverConnection` over the same members,
subscribed to that topic, so it fails over with the cluster. The network it reports is the
broker that connection is on plus every peer with a started bridge, pushed as one list with
action ``replace`` whenever it changes. It feeds that list to its own connection too, so the
watcher can move to a learned broker when every seed is gone.

After each (re)connection the source waits ``settle`` seconds for the replay before it pushes,
so a new broker's bridges arrive as one list rather than one broker at a time (with ``replace``,
a half-replayed list would drop brokers from the sink for a moment). A broker that replays
nothing in that time has no bridges. A malformed or hostile advisory (bad JSON, missing fields,
an absurd host or port, a huge body) is logged with the reason and skipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from failover_client import Connected, Event, FailoverConnection, GaveUp, Message
from failover_client._clock import Clock, SystemClock
from failover_client._errors import AdvisoryError, ConfigurationError, FailoverClientError
from failover_client._hosts import HostError, check_host, shown_list
from failover_client._throttle import LogThrottle
from failover_client.adapter import Connector
from failover_client.uri import SCHEMES, BrokerAddress, FailoverOptions, FailoverURI, parse

from ._backoff import Backoff
from ._base import SourceThread, TopologySink, check_sink, report_failure

__all__ = [
    "ADVISORY_TOPIC",
    "MAX_ADVISORY_BODY",
    "AdvisoryError",
    "AdvisorySource",
    "Bridge",
    "SchemeMap",
    "map_broker_url",
    "parse_advisory",
]

_log = logging.getLogger("failover_client.topology")

ADVISORY_TOPIC = "/topic/ActiveMQ.Advisory.NetworkBridge"
MAX_ADVISORY_BODY = 64 * 1024
"""A real advisory is about 1 KiB; anything far larger is not one, and is not parsed."""

_SUBSCRIPTION_ID = "failover-client-advisory"
SchemeMap = Mapping[str, tuple[str, int | None]] | Callable[[str, str, int], BrokerAddress | None]
"""How an advertised ``brokerURL`` becomes a broker of the data connection's protocol.

A mapping from the advertised scheme to ``(scheme, port)`` (port None keeps the advertised
one): ``{"tcp": ("stomp", 61613)}``. Or a callable ``(scheme, host, port)`` returning the
address, or None to skip that peer. URLs whose scheme already speaks the members' protocol are
used as they are unless the map names their scheme."""


@dataclass(frozen=True)
class Bridge:
    """One network-bridge advisory: the peer (by name) and whether its bridge is up.

    ``address`` is where to reach the peer; None for a stopped bridge whose URL was not usable
    (a stop needs only the name).
    """

    peer: str
    address: BrokerAddress | None
    started: bool


def _host(host: str | None) -> str:
    if host is None:
        raise AdvisoryError("brokerURL has no host")
    try:
        return check_host(host, "brokerURL host")
    except HostError as exc:
        raise AdvisoryError(str(exc)) from None


def map_broker_url(url: str, protocol: str, scheme_map: SchemeMap | None) -> BrokerAddress:
    """The address of an advertised ``brokerURL`` for a ``protocol`` connection.

    Raises :class:`AdvisoryError` saying why there is none.
    """
    if len(url) > 1024:
        raise AdvisoryError("brokerURL is too long")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AdvisoryError(f"brokerURL {url[:80]!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    host = _host(parts.hostname)
    if port is None or port == 0:
        raise AdvisoryError(f"brokerURL {url[:80]!r} has no port")
    if callable(scheme_map):
        try:
            mapped = scheme_map(scheme, host, port)
        except Exception as exc:  # noqa: BLE001 - the user's map fails one advisory, not the watcher
            raise AdvisoryError(f"scheme_map failed on {url[:80]!r}: {exc!r}") from None
        if mapped is None:
            raise AdvisoryError(f"scheme_map skipped {url[:80]!r}")
        if not isinstance(mapped, BrokerAddress) or mapped.protocol != protocol:
            raise AdvisoryError(
                f"scheme_map gave {mapped!r} for {url[:80]!r}, not a {protocol} broker"
            )
        return mapped
    if scheme_map is not None and scheme in scheme_map:
        scheme, new_port = scheme_map[scheme]
        port = port if new_port is None else new_port
    if SCHEMES.get(scheme, ("",))[0] != protocol:
        raise AdvisoryError(
            f"brokerURL {url[:80]!r} does not speak {protocol} (map its scheme with scheme_map)"
        )
    return BrokerAddress(scheme, host, port)


def parse_advisory(
    body: bytes,
    headers: Mapping[str, str],
    *,
    protocol: str = "stomp",
    scheme_map: SchemeMap | None = None,
    max_body: int = MAX_ADVISORY_BODY,
) -> Bridge:
    """The bridge one JSON network-bridge advisory reports; :class:`AdvisoryError` if unusable."""
    if len(body) > max_body:
        raise AdvisoryError(f"body of {len(body)} bytes exceeds {max_body}")
    started = headers.get("started")
    if started not in ("true", "false"):
        raise AdvisoryError(f"header 'started' is {started!r}, not true or false")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise AdvisoryError(f"body is not JSON: {exc}") from None
    info = document.get("BrokerInfo") if isinstance(document, dict) else None
    if not isinstance(info, dict):
        raise AdvisoryError("body has no BrokerInfo object")
    name, url = info.get("brokerName"), info.get("brokerURL")
    if not isinstance(url, str) or not url:
        raise AdvisoryError("BrokerInfo has no brokerURL")
    if name is not None and (not isinstance(name, str) or len(name) > 256):
        raise AdvisoryError("BrokerInfo's brokerName is not a short string")
    peer = name or url
    try:
        address: BrokerAddress | None = map_broker_url(url, protocol, scheme_map)
    except AdvisoryError:
        if started == "true":
            raise
        address = None  # a stop is recognised by the peer's name alone
    return Bridge(peer, address, started == "true")


def _target(
    target: str | FailoverURI | Sequence[BrokerAddress], options: FailoverOptions | None
) -> tuple[tuple[BrokerAddress, ...], FailoverOptions]:
    if isinstance(target, str):
        target = parse(target)
    if isinstance(target, FailoverURI):
        members, parsed = target.members, target.options
    else:
        members, parsed = tuple(target), FailoverOptions()
    if not members:
        raise ConfigurationError("advisory topology source: no brokers to watch")
    protocols = {m.protocol for m in members}
    if protocols != {"stomp"}:
        raise ConfigurationError(
            f"advisory topology source: the members must be stomp brokers, got {sorted(protocols)}"
        )
    # The watcher must outlast any outage of the cluster, whatever the data connection allows;
    # it takes the connection's TLS settings and credentials, never its topology sources.
    chosen = (options or parsed).replace(
        max_reconnect_attempts=-1,
        startup_max_reconnect_attempts=-1,
        topology=(),
        update_uris_url=None,
    )
    return members, chosen


class AdvisorySource:
    """Watches an ActiveMQ Classic network of brokers through its bridge advisories.

    :param uri_or_members: the brokers to watch (a failover URI, a parsed one, or addresses);
        usually the data connection's own.
    :param login: login of the watching connection (members without credentials).
    :param passcode: its passcode; never shown.
    :param clock: time source of the watcher and of the ``settle`` wait.
    :param scheme_map: turns advertised ``brokerURL`` s into STOMP addresses (:data:`SchemeMap`);
        ``stomp://`` URLs need none, OpenWire ``tcp://`` ones do.
    :param name: the ``source`` of every update.
    :param options: options of the watching connection (default: the URI's), always with
        unlimited reconnect attempts.
    :param connector: opens the watcher's sessions (tests pass a fake one).
    :param settle: seconds to collect a broker's replayed bridges before pushing.
    :param max_body: advisories larger than this (bytes) are skipped.
    :param min_backoff: first wait (seconds) before a watcher that failed for good (TLS,
        credentials) is built again; the wait doubles up to ``max_backoff``.
    :param max_backoff: longest wait.

    A failure of the watcher is logged (rate-limited) and told to the sink
    (``TopologySourceFailed``), and the watcher is built again after the back-off.
    """

    def __init__(
        self,
        uri_or_members: str | FailoverURI | Sequence[BrokerAddress],
        *,
        login: str | None = None,
        passcode: str | None = None,
        clock: Clock | None = None,
        scheme_map: SchemeMap | None = None,
        name: str = "advisory",
        options: FailoverOptions | None = None,
        connector: Connector | None = None,
        settle: float = 1.0,
        max_body: int = MAX_ADVISORY_BODY,
        min_backoff: float = 1.0,
        max_backoff: float = 60.0,
    ) -> None:
        if isinstance(settle, bool) or not isinstance(settle, (int, float)) or not settle >= 0:
            raise ConfigurationError(
                f"advisory topology source: settle must be >= 0, got {settle!r}"
            )
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"advisory topology source: name must be a name, got {name!r}")
        if scheme_map is not None and not callable(scheme_map):
            for scheme, (mapped, _) in scheme_map.items():
                if SCHEMES.get(mapped, ("",))[0] != "stomp":
                    raise ConfigurationError(
                        f"advisory topology source: scheme_map sends {scheme!r} to {mapped!r}, "
                        "which is not a stomp scheme"
                    )
        members, chosen = _target(uri_or_members, options)
        self.name = name
        self.settle = float(settle)
        self.max_body = max_body
        self._scheme_map = scheme_map
        self._clock: Clock = clock or SystemClock()
        self._watcher_settings = (members, chosen, connector, login, passcode)
        self._max_peers = chosen.topology_max_brokers
        self._backoff = Backoff(min_backoff, max_backoff, owner="advisory topology source")
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)
        self._conn = self._new_connection()
        self._gave_up: BaseException | None = None  # why the watcher stopped for good
        self._lock = threading.Lock()
        self._heard_changed = threading.Condition(self._lock)
        self.heard = 0
        """Advisories handled so far, skipped ones included (guarded by the lock)."""
        self.skipped = 0
        """Advisories skipped as malformed or unusable."""
        self._worker = SourceThread(self.name)
        self._stop = self._worker.stopping
        self._wake = threading.Event()
        # Guarded by _lock: where the watcher is, and what its broker said.
        self._broker: BrokerAddress | None = None
        self._peers: dict[str, BrokerAddress] = {}
        self._session: object = None  # the session the peers were heard on
        self._connects = 0  # sessions the watcher was connected on
        self._sessions = 0  # of those, the ones that replayed something (or were given up on)
        self._settle_until = 0.0
        self._last: tuple[BrokerAddress, ...] | None = None

    # --- life cycle ----------------------------------------------------------------------------

    def start(self, sink: TopologySink) -> None:
        """Connect the watcher and push the network as it changes, on a daemon thread."""
        check_sink(sink, self)
        self._worker.start(lambda: self._run(sink), self)

    def stop(self) -> None:
        """Close the watcher and join the thread. Idempotent; never raises."""
        self._stop.set()
        self._wake.set()
        self._close_watcher()
        self._worker.stop()
        with self._lock:  # what it learned is not needed any more: return the memory
            self._peers.clear()
            self._last = None

    def _new_connection(self) -> FailoverConnection:
        """A new watching connection (the first, or one after the last stopped for good)."""
        members, options, connector, login, passcode = self._watcher_settings
        return FailoverConnection(
            members,
            options=options,
            connector=connector,
            clock=self._clock,
            login=login,
            passcode=passcode,
            listeners=[self._on_event],
        )

    def _close_watcher(self) -> None:
        with self._lock:
            conn = self._conn
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - stop() must not raise; the close's bug is logged
            _log.exception("%s: closing the advisory connection failed", self.name)

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            error = self._watch(sink)
            if error is None or self._stop.is_set():
                return
            # The watcher stopped for good (TLS, credentials): say so, wait, build a new one.
            retry = self._backoff.failed()
            self._throttle.log(
                logging.ERROR,
                "failed",
                "%s: the advisory connection failed (again in %gs): %s",
                self.name,
                retry,
                error,
            )
            report_failure(sink, self.name, error, self._backoff.failures, retry)
            self._close_watcher()
            if self._clock.wait(self._stop, retry):
                return
            with self._lock:
                self._conn, self._gave_up = self._new_connection(), None

    def _watch(self, sink: TopologySink) -> BaseException | None:
        """Connect the watcher and push what it hears until stopped (None) or until it stopped
        for good (the error)."""
        headers = {"transformation": "jms-advisory-json"}
        with self._lock:
            conn = self._conn
        try:
            conn.subscribe(ADVISORY_TOPIC, self._on_message, id=_SUBSCRIPTION_ID, headers=headers)
            conn.connect()
        except FailoverClientError as exc:
            return exc
        while True:
            self._wake.clear()
            with self._lock:
                gave_up = self._gave_up
            if self._stop.is_set() or gave_up is not None:
                return gave_up
            view, delay = self._due()
            if view is not None and view != self._last:
                self._last = view
                self._push(sink, view)
            self._clock.wait(self._wake, delay)

    # --- what the watcher hears (its connection's dispatch thread) ----------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, GaveUp):
            with self._lock:
                self._gave_up = event.error
            self._wake.set()
            return
        if not isinstance(event, Connected):
            return
        self._backoff.succeeded()
        # The event names the broker as text; the pool holds its address.
        found = [s.address for s in self._conn.pool.states() if str(s.address) == event.broker]
        if not found:
            _log.warning("%s: connected to %s, which is not in the pool", self.name, event.broker)
            return
        address = found[0]
        with self._lock:
            # Only the address: the watcher's credentials and options are not the sink's.
            self._broker = BrokerAddress(address.scheme, address.host, address.port)
            self._connects += 1
            self._settle_until = max(self._settle_until, self._clock.monotonic() + self.settle)
            self._heard_changed.notify_all()
        self._wake.set()

    def _on_message(self, message: Message) -> None:
        origin = message.headers.get("originBrokerName", "?")[:256]
        with self._lock:
            if message.session is not self._session:
                # A new session replays its broker's bridges: the old broker's say nothing.
                # Its Connected event may come before or after this message, never two later.
                self._session = message.session
                self._sessions = min(self._sessions + 1, self._connects + 1)
                self._peers.clear()
                self._settle_until = max(self._settle_until, self._clock.monotonic() + self.settle)
        try:
            bridge = parse_advisory(
                message.body,
                message.headers,
                scheme_map=self._scheme_map,
                max_body=self.max_body,
            )
        except AdvisoryError as exc:
            self._throttle.log(
                logging.WARNING,
                "skipped",
                "%s: skipped an advisory from %r: %s",
                self.name,
                origin,
                exc,
            )
            bridge = None
        with self._lock:
            if bridge is None:
                self.skipped += 1
            elif bridge.started and bridge.address is not None:
                if bridge.peer in self._peers or len(self._peers) < self._max_peers:
                    self._peers[bridge.peer] = bridge.address
                else:  # a flood of peers: the pool would drop them, so do not keep them
                    self.skipped += 1
                    bridge = None
            else:
                self._peers.pop(bridge.peer, None)
            self.heard += 1
            self._heard_changed.notify_all()
        if bridge is None:
            return
        _log.debug(
            "%s: %r reports bridge to %r %s",
            self.name,
            origin,
            bridge.peer,
            "started" if bridge.started else "stopped",
        )
        self._wake.set()

    def wait_heard(self, count: int, timeout: float | None = None) -> bool:
        """Block (real time) until ``count`` advisories were handled; False after ``timeout``."""
        with self._heard_changed:
            return self._heard_changed.wait_for(lambda: self.heard >= count, timeout)

    def wait_connected(self, count: int, timeout: float | None = None) -> bool:
        """Block (real time) until the watcher was connected ``count`` times; False after
        ``timeout``. A session's advisories may be handled before its Connected event, which
        restarts the settle window, so a test that moves the clock waits for both."""
        with self._heard_changed:
            return self._heard_changed.wait_for(lambda: self._connects >= count, timeout)

    # --- the list ------------------------------------------------------------------------------

    def _due(self) -> tuple[tuple[BrokerAddress, ...] | None, float | None]:
        """The network to push now (None while unknown or settling) and how long to wait."""
        with self._lock:
            if self._broker is None:
                return None, None
            now = self._clock.monotonic()
            if now < self._settle_until:
                return None, self._settle_until - now
            if self._sessions < self._connects:
                # The broker the watcher moved to replayed no bridge while settling: it has none.
                self._peers.clear()
                self._sessions = self._connects
            view = {self._broker.key: self._broker}
            for peer in sorted(self._peers.values(), key=lambda a: a.key):
                view.setdefault(peer.key, peer)
            return tuple(view.values()), None

    def _push(self, sink: TopologySink, view: tuple[BrokerAddress, ...]) -> None:
        self._throttle.log(
            logging.INFO, "network", "%s: network of brokers: %s", self.name, shown_list(view)
        )
        # The watcher follows the network too, or it could not fail over past its seeds.
        with self._lock:
            conn = self._conn
        for target in (conn, sink):
            try:
                target.update_brokers(view, source=self.name, action="replace", pushed=True)
            except Exception:  # noqa: BLE001 - a sink's bug must not end the watching thread
                _log.exception("%s: %r failed to take the network", self.name, target)

    def __repr__(self) -> str:
        state = self._worker.state
        with self._lock:
            broker = None if self._broker is None else self._broker.key
            return (
                f"AdvisorySource({self.name!r}, broker={broker}, peers={len(self._peers)}, "
                f"heard={self.heard}, skipped={self.skipped}, {state})"
            )
