"""The ``openwire`` topology source: ActiveMQ Classic's own cluster push, heard beside the data.

A broker with ``updateClusterClients`` (and ``rebalanceClusterClients``) tells its OpenWire
clients the brokers of its network in a ``ConnectionControl``: once when they connect, again
on every change (``updateClusterClientsOnRemove`` includes a broker that left). STOMP and
AMQP clients hear nothing, so this source keeps a small OpenWire control connection
(:class:`~failover_client.openwire.ControlChannel`) open beside the data connection and turns
each push into a broker list:

* every ``connectedBrokers`` entry (``?query`` stripped) is mapped to the data connection's
  protocol with :func:`map_broker_url` (``stomp://`` entries are used as they are, OpenWire
  ``tcp://`` / ``ssl://`` ones through ``scheme_map``); a bad entry is logged and skipped;
* the whole list is pushed with action ``replace`` and ``pushed=True`` (so a connection with
  ``updateURIsSupported=false`` ignores it); an empty ``connectedBrokers`` means the broker
  sends no cluster information, not that there are no brokers, and pushes nothing;
* ``rebalanceConnection`` then calls the sink's ``request_rebalance``.

Where the control connection goes. When a data connection stands behind the sink
(``follows_connection``: the sink a connection gives its sources), the source follows it: on
each ``Connected`` event it (re)opens the control channel to the OpenWire endpoint of the
broker the data connection is on (``openwire_port``: the same host and one port, a map from
the data broker's ``host:port`` to its OpenWire port, or a function), so the channel moves
with the data. Any other sink gets a channel through ``members``, tried in order.

The control channel never touches the data connection: it runs on this source's thread and
its own reader thread, with its own timeouts. A malformed or hostile frame, a refused login or
a vanished broker ends only the control channel, with a logged reason; it is opened again
after a back-off that doubles up to ``max_backoff`` (a broker without an OpenWire listener is
logged once, then retried quietly), or at once when the data connection moves.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from failover_client import Connected, Event
from failover_client._clock import Clock, SystemClock
from failover_client._errors import (
    AuthenticationFailed,
    ConfigurationError,
    ConnectCancelled,
    FailoverClientError,
    TLSFailure,
)
from failover_client._hosts import shown_list
from failover_client._throttle import LogThrottle
from failover_client.net._tls import build_ssl_context
from failover_client.openwire import ConnectionControl, ControlChannel
from failover_client.uri import SCHEMES, BrokerAddress, FailoverOptions, FailoverURI, parse

from ._advisory import AdvisoryError, SchemeMap, map_broker_url
from ._backoff import Backoff
from ._base import SourceThread, TopologySink, check_sink, report_failure

__all__ = ["OpenWirePort", "OpenWireSource", "parse_connected_brokers"]

_log = logging.getLogger("failover_client.topology")

OpenWirePort = int | Mapping[str, int] | Callable[[BrokerAddress], tuple[str, int] | None]
"""Where a data broker's OpenWire listener is: one port on the same host, a map from the data
broker's ``host:port`` key to the port, or a function returning ``(host, port)`` (None: the
broker has none)."""


def parse_connected_brokers(
    text: str, protocol: str, scheme_map: SchemeMap | None, limit: int = 256
) -> tuple[tuple[BrokerAddress, ...], list[str]]:
    """The first ``limit`` brokers of a ``connectedBrokers`` list, in order and once each, and
    why entries were skipped (``?query`` parts are dropped: they configure Java clients)."""
    brokers: dict[str, BrokerAddress] = {}
    skipped: list[str] = []
    entries = [e for e in (raw.strip() for raw in text.split(",")) if e]
    for index, entry in enumerate(entries):
        if len(brokers) >= limit:  # the pool takes no more: do not build what it drops
            skipped.append(f"{len(entries) - index} entries past topology.maxBrokers={limit}")
            break
        url = entry.split("?", 1)[0]
        # Entries that already speak the data protocol are used as they are; a function map is
        # for the others (a mapping decides itself, and may name the protocol's own scheme).
        native = SCHEMES.get(url.split(":", 1)[0].lower(), ("",))[0] == protocol
        chosen = None if native and callable(scheme_map) else scheme_map
        try:
            address = map_broker_url(url, protocol, chosen)
        except AdvisoryError as exc:
            skipped.append(f"{entry[:80]!r}: {exc}")
            continue
        brokers.setdefault(address.key, address)
    return tuple(brokers.values()), skipped


@dataclass(frozen=True)
class _Target:
    """An OpenWire endpoint and what its pushes are mapped for."""

    host: str
    port: int
    tls: bool
    protocol: str  # of the data connection: what the pushed brokers are mapped to
    login: str | None = None
    passcode: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ssl' if self.tls else 'tcp'}://{host}:{self.port}"


def _check_port(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ConfigurationError(f"openwire topology source: {what} {value!r} is not a port")


def _members(
    members: str | FailoverURI | Sequence[BrokerAddress] | None,
) -> tuple[BrokerAddress, ...]:
    if members is None:
        return ()
    if isinstance(members, str):
        members = parse(members)
    if isinstance(members, FailoverURI):
        return members.members
    return tuple(members)


class OpenWireSource:
    """ActiveMQ Classic's cluster push (``ConnectionControl``) over an OpenWire control channel.

    :param members: the brokers to open the control channel through when the sink is not a
        :class:`~failover_client.FailoverConnection` (OpenWire members are used as they are,
        others through ``openwire_port``); unused when following a connection.
    :param openwire_port: where a data broker's OpenWire listener is (:data:`OpenWirePort`).
    :param scheme_map: maps advertised OpenWire URLs to the data protocol (:data:`SchemeMap`).
    :param login: userName of the control connection (default: the broker address's own).
    :param passcode: its password; never shown.
    :param clock: back-off, keep-alive and inactivity timers.
    :param name: the ``source`` of every update.
    :param connect_timeout: seconds to connect and be accepted.
    :param max_inactivity: ``MaxInactivityDuration`` offered to the broker (seconds).
    :param tls: TLS of the control channel, used when the data broker is TLS (``ssl://``):
        options whose ``tls_*`` fields build the context, or a context. Default: the followed
        connection's options, else verified against the system's CAs.
    :param min_backoff: first wait (seconds) before reopening a failed control channel.
    :param max_backoff: longest wait; the back-off doubles up to it.
    """

    def __init__(
        self,
        members: str | FailoverURI | Sequence[BrokerAddress] | None = None,
        *,
        openwire_port: OpenWirePort = 61616,
        scheme_map: SchemeMap | None = None,
        login: str | None = None,
        passcode: str | None = None,
        clock: Clock | None = None,
        name: str = "openwire",
        connect_timeout: float = 2.0,
        max_inactivity: float = 30.0,
        tls: FailoverOptions | ssl.SSLContext | None = None,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"openwire topology source: name must be a name, got {name!r}")
        for what, value in (("connect_timeout", connect_timeout), ("min_backoff", min_backoff)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(f"openwire topology source: {what} must be > 0")
        if not max_backoff >= min_backoff or not max_inactivity >= 0:
            raise ConfigurationError(
                "openwire topology source: max_backoff must be >= min_backoff and "
                "max_inactivity >= 0"
            )
        if isinstance(openwire_port, Mapping):
            for key, port in openwire_port.items():
                _check_port(port, f"openwire_port[{key!r}]")
        elif not callable(openwire_port):
            _check_port(openwire_port, "openwire_port")
        self.name = name
        self._members = _members(members)
        self._port = openwire_port
        self._scheme_map = scheme_map
        self._login, self._passcode = login, passcode
        self._clock: Clock = clock or SystemClock()
        self._connect_timeout = float(connect_timeout)
        self._max_inactivity = float(max_inactivity)
        self._tls_option = tls
        self._tls_context = tls if isinstance(tls, ssl.SSLContext) else None
        self._backoff = Backoff(min_backoff, max_backoff, owner="openwire topology source")
        self._token = secrets.token_hex(4)  # keeps ids unique across processes
        self._opens = itertools.count(1)
        self._worker = SourceThread(name)
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)
        self._stop = self._worker.stopping
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # Guarded by _lock:
        self._sink: TopologySink | None = None
        self._following = False
        self._target: _Target | None = None
        self._moved = False
        self._channel: ControlChannel | None = None
        self._index = 0  # next member to try
        self._streak = 0  # control channels failed (or ended quickly) in a row
        self._refused: set[str] = set()  # targets already reported without a listener
        self._unmapped: set[str] = set()  # data brokers already reported without an endpoint
        self.opened = 0
        """Control channels opened so far."""
        self.controls = 0
        """ConnectionControl commands heard."""
        self.pushes = 0
        """Broker lists pushed to the sink."""
        self.rebalances = 0
        """Rebalance requests passed to the sink."""
        self.last_push: tuple[str, tuple[BrokerAddress, ...]] | None = None
        """The OpenWire endpoint that sent the latest list pushed, and the list."""
        self.last_error: BaseException | None = None
        """Why the last control channel failed or ended (its message holds no password)."""

    # --- life cycle ----------------------------------------------------------------------------

    def start(self, sink: TopologySink) -> None:
        """Follow ``sink`` (a FailoverConnection) or connect through the members; returns at once.

        Raises :class:`ConfigurationError` when there is nothing to connect to.
        """
        check_sink(sink, self)
        following = sink.follows_connection
        if not following and not self._members:
            raise ConfigurationError(
                "openwire topology source: no members, and the sink is not a connection to follow"
            )
        with self._lock:
            self._sink, self._following = sink, following
        self._worker.start(lambda: self._run(sink), self)
        if following:
            sink.add_listener(self._on_event)
            self._follow()  # connected before the listener was there

    def stop(self) -> None:
        """Close the control channel and join the threads. Idempotent; never raises."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            channel, sink, following = self._channel, self._sink, self._following
        if channel is not None:
            channel.close()
        if following and sink is not None:
            try:
                sink.remove_listener(self._on_event)
            except Exception:  # noqa: BLE001 - stop() must not raise; the sink's bug is logged
                _log.exception("%s: could not stop listening to %r", self.name, sink)
        self._worker.stop()

    def wait_until(self, predicate: Callable[[OpenWireSource], bool], timeout: float) -> bool:
        """Block (real time) until ``predicate(self)`` holds after a change; False at timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # --- following the data connection (its dispatch thread) -----------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, Connected):
            self._follow()

    def _follow(self) -> None:
        """Move the control channel to the broker the data connection is on now."""
        with self._lock:
            sink = self._sink
        current = None if sink is None else sink.current_broker()
        if current is None:
            return  # between brokers: the next Connected event says where
        target = self._endpoint(current)
        with self._lock:
            if target == self._target and self._channel is not None:
                return  # already there
            # A new broker, or the same one back while the channel waits to reopen: go now.
            self._target, self._moved, channel = target, True, self._channel
        if channel is not None:
            channel.close()  # the data moved: so does the control channel
        self._wake.set()

    def _endpoint(self, data: BrokerAddress) -> _Target | None:
        """The OpenWire endpoint of data broker ``data``; None (logged once) without one."""
        login = self._login if self._login is not None else data.user
        passcode = self._passcode if self._login is not None else data.password
        if data.protocol == "openwire":
            return _Target(data.host, data.port, data.tls, "stomp", login, passcode)
        port = self._port
        try:
            if isinstance(port, int):
                where: tuple[str, int] | None = (data.host, port)
            elif isinstance(port, Mapping):
                where = (data.host, port[data.key]) if data.key in port else None
            else:
                where = port(data)
        except Exception as exc:  # noqa: BLE001 - the user's function fails one broker only
            _log.warning("%s: openwire_port failed for %s: %r", self.name, data.key, exc)
            return None
        if where is None:
            with self._lock:
                first = data.key not in self._unmapped
                self._unmapped.add(data.key)
            if first:
                _log.warning("%s: no OpenWire endpoint known for %s", self.name, data.key)
            return None
        return _Target(where[0], where[1], data.tls, data.protocol, login, passcode)

    # --- the control channel (the source's thread) ---------------------------------------------

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            target = self._pick()
            if target is None:
                self._clock.wait(self._wake, None)
                continue
            opened_at = self._clock.monotonic()
            reason, opened = self._session(sink, target)
            if self._stop.is_set():
                return
            delay = self._after(target, reason, opened, self._clock.monotonic() - opened_at)
            with self._lock:
                moved, self._moved = self._moved, False
            if delay > 0 and not moved:
                self._clock.wait(self._wake, delay)

    def _pick(self) -> _Target | None:
        """Where to open the next control channel; None: nowhere (wait for a wake-up)."""
        with self._lock:
            if self._following:
                self._moved = False
                return self._target
            start = self._index
        # The next member, in order, that has an OpenWire endpoint (the others were logged).
        for step in range(len(self._members)):
            index = (start + step) % len(self._members)
            target = self._endpoint(self._members[index])
            if target is not None:
                with self._lock:
                    self._index = index
                return target
        return None

    def _session(self, sink: TopologySink, target: _Target) -> tuple[BaseException | None, bool]:
        """Open a control channel to ``target`` and serve it; (why it ended, whether it opened)."""
        number = next(self._opens)
        try:
            context = self._context() if target.tls else None
        except ConfigurationError as exc:
            return exc, False
        base = sink.client_id or "failover-client"
        channel = ControlChannel(
            target.host,
            target.port,
            clock=self._clock,
            on_control=lambda control: self._on_control(sink, target, control),
            connection_id=f"ID:failover-client-{self._token}-{number}:1",
            client_id=f"{base}:openwire-{self._token}-{number}",
            login=target.login,
            passcode=target.passcode,
            tls_context=context,
            connect_timeout=self._connect_timeout,
            max_inactivity=self._max_inactivity,
            failover_reconnect=self.opened > 0,
        )
        with self._lock:
            if self._stop.is_set() or (self._following and target != self._target):
                return None, False  # moved or stopping while this was being set up
            self._channel = channel
        try:
            negotiated = channel.open()
        except FailoverClientError as exc:
            return exc, False
        _log.info(
            "%s: control channel to %s open (OpenWire %d)", self.name, target, negotiated.version
        )
        with self._changed:
            self.opened += 1
            self._refused.discard(str(target))
            self._changed.notify_all()
        reason = channel.serve()
        with self._lock:
            self._channel = None
        return reason, True

    def _context(self) -> ssl.SSLContext:
        if self._tls_context is None:
            option = self._tls_option
            if not isinstance(option, FailoverOptions):
                with self._lock:
                    sink = self._sink
                option = FailoverOptions() if sink is None else sink.options
            self._tls_context = build_ssl_context(option)
        return self._tls_context

    def _after(
        self, target: _Target, reason: BaseException | None, opened: bool, lasted: float
    ) -> float:
        """Log why a control channel ended and return how long to wait before the next."""
        with self._lock:
            self._channel = None
            if opened and lasted >= self._backoff.longest:
                self._streak = 0  # it served for a good while: start the back-off over
            if isinstance(reason, ConnectCancelled) or reason is None:
                return 0.0  # closed on purpose (moved, stopped)
            self._streak += 1
            count = len(self._members) if not self._following else 1
            self._index = (self._index + 1) % max(count, 1)
            delay = self._backoff.delay(-(-self._streak // count))  # by passes over the members
            if self._streak % count:
                delay = 0.0  # members left to try in this pass
            if isinstance(reason, AuthenticationFailed | TLSFailure | ConfigurationError):
                delay = self._backoff.longest  # the same credentials or certificate will not do
            refused = isinstance(reason.__cause__, ConnectionRefusedError) and not opened
            quiet = refused and str(target) in self._refused
            if refused:
                self._refused.add(str(target))
            self.last_error = reason
            self._changed.notify_all()
            sink, streak = self._sink, self._streak
        if not opened and delay > 0 and sink is not None:
            # A whole pass failed, or a broker refused us: the application hears of it (a
            # channel that served and ended is not a failure of the source).
            report_failure(sink, self.name, reason, streak, delay)
        if quiet:
            _log.debug("%s: %s still refuses: %s", self.name, target, reason)
        elif isinstance(reason, AuthenticationFailed | TLSFailure | ConfigurationError):
            self._throttle.log(
                logging.ERROR,
                ("refused", str(target)),
                "%s: control channel to %s refused: %s",
                self.name,
                target,
                reason,
            )
        else:
            what = "ended" if opened else "failed"
            self._throttle.log(
                logging.WARNING,
                (what, str(target)),
                "%s: control channel to %s %s: %s (again in %gs)",
                self.name,
                target,
                what,
                reason,
                delay,
            )
        return delay

    # --- what the broker pushes (the channel's reader thread) ----------------------------------

    def _on_control(self, sink: TopologySink, target: _Target, control: ConnectionControl) -> None:
        with self._changed:
            self.controls += 1
            self._changed.notify_all()
        text = (control.connected_brokers or "").strip()
        if not text:
            _log.debug("%s: %s sends no cluster information", self.name, target)
            return
        limit = sink.options.topology_max_brokers
        view, skipped = parse_connected_brokers(text, target.protocol, self._scheme_map, limit)
        if skipped:
            self._throttle.log(
                logging.WARNING,
                "skipped",
                "%s: skipped %d of the brokers %s pushed: %s",
                self.name,
                len(skipped),
                target,
                shown_list(skipped, limit=3),
            )
        if not view:
            self._throttle.log(
                logging.WARNING, "unusable", "%s: %s pushed no usable broker", self.name, target
            )
            return
        self._throttle.log(
            logging.INFO, "pushes", "%s: %s pushes %s", self.name, target, shown_list(view)
        )
        try:
            sink.update_brokers(view, source=self.name, action="replace", pushed=True)
        except Exception:  # noqa: BLE001 - a sink's bug must not end the control channel
            _log.exception("%s: %r failed to take the pushed brokers", self.name, sink)
        asked = control.rebalance_connection
        if asked:
            try:
                sink.request_rebalance(source=self.name)
            except Exception:  # noqa: BLE001 - as above
                _log.exception("%s: %r failed to take the rebalance request", self.name, sink)
        with self._changed:
            self.pushes += 1
            self.rebalances += int(asked)
            self.last_push = (str(target), view)
            self._changed.notify_all()

    def __repr__(self) -> str:
        state = self._worker.state
        with self._lock:
            channel = self._channel
            target = self._target if self._following else None
            error = type(self.last_error).__name__ if self.last_error is not None else None
            mode = "following" if self._following else f"members={len(self._members)}"
        where = channel.broker if channel is not None else (str(target) if target else None)
        return (
            f"OpenWireSource({self.name!r}, {mode}, channel={where}, opened={self.opened}, "
            f"controls={self.controls}, pushes={self.pushes}, last_error={error}, {state})"
        )
