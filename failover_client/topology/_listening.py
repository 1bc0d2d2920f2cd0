"""The loop both dynamic-discovery sources share: read announcements, age them, push the list.

A :class:`ListeningSource` owns one thread that reads datagrams from a :class:`Datagrams`
(a joined multicast group; in unit tests a queue on the fake clock), lets the protocol's
subclass decode each one into its :class:`HeardTable`, drops announcers not heard for the
protocol's timeout, and pushes the whole live list to its sink (``replace``) whenever the
list changed. A packet that does not decode is logged (rate-limited) and skipped: anyone on
the network can send to a multicast group, so a bad packet never ends the source. A group
that cannot be joined is a failure (``TopologySourceFailed``), retried with the back-off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError
from failover_client._hosts import HostError, check_host
from failover_client._throttle import LogThrottle
from failover_client.uri import SCHEMES, BrokerAddress

from ._backoff import Backoff
from ._base import SourceThread, TopologySink, check_sink, report_failure
from ._datagram import Datagrams

__all__ = ["DecodeError", "ListeningSource", "SchemeRewrite", "advertised_address"]

_log = logging.getLogger("failover_client.topology")

IDLE_WAKE = 60.0
"""Longest a read waits (s) when nobody is known (stop() wakes it at once anyway)."""


SchemeRewrite = Mapping[str, tuple[str, int | None]]
"""Advertised scheme -> (this connection's scheme, port; None keeps the advertised port)."""


class DecodeError(ValueError):
    """A datagram that is not an announcement of the source's protocol (text says why)."""


def advertised_address(
    scheme: str, host: str | None, port: int | None, scheme_map: SchemeRewrite
) -> BrokerAddress:
    """An advertised ``scheme://host:port`` as a broker of this connection, through the map.

    Only host, port and scheme are kept (never options nor credentials). Which entries the
    connection takes (its protocol, reachable hosts, no TLS downgrade, the address map, the
    cap) is the pool's merge, the same for every source. DecodeError when there is no address.
    """
    scheme = scheme.lower()
    try:
        checked = check_host(host, "advertised host")
    except HostError as exc:
        raise DecodeError(str(exc)) from None
    if port is None or not 0 < port < 65536:
        raise DecodeError(f"advertised {scheme}://{checked} has no valid port ({port!r})")
    if scheme in scheme_map:
        scheme, mapped = scheme_map[scheme]
        port = port if mapped is None else mapped
    if scheme not in SCHEMES:
        raise DecodeError(f"advertised scheme {scheme!r} is not one this client knows")
    return BrokerAddress(scheme, checked, port)


class ListeningSource:
    """Base of the multicast and UDP-group sources (subclasses decode one protocol)."""

    name: str

    def __init__(
        self,
        name: str,
        open_datagrams: Callable[[], Datagrams],
        *,
        clock: Clock | None,
        retry: tuple[float, float] = (1.0, 30.0),
    ) -> None:
        self.name = name
        self._open = open_datagrams
        self._clock: Clock = clock or SystemClock()
        self._worker = SourceThread(name)
        self._stop = self._worker.stopping
        self._backoff = Backoff(*retry, owner=name)
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)
        self._datagrams: Datagrams | None = None
        self._pushed: tuple[BrokerAddress, ...] = ()

    # --- what a protocol supplies ------------------------------------------------------------

    def take(self, packet: bytes, now: float) -> bool:
        """Decode ``packet`` into the table; True when the announced set changed."""
        raise NotImplementedError

    def expire(self, now: float) -> bool:
        """Drop announcers not heard for too long; True when any was dropped."""
        raise NotImplementedError

    def next_expiry(self) -> float | None:
        """When the next announcer expires unless heard again (None: nobody is known)."""
        raise NotImplementedError

    def brokers(self) -> Sequence[BrokerAddress]:
        """The live announcers as this connection's brokers."""
        raise NotImplementedError

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, sink: TopologySink) -> None:
        """Join the group and listen on a daemon thread; returns at once."""
        check_sink(sink, self)
        self._worker.start(lambda: self._run(sink), self)

    def stop(self) -> None:
        """Leave the group and join the thread. Idempotent; a read in progress ends at once."""
        self._stop.set()
        datagrams = self._datagrams
        if datagrams is not None:
            datagrams.close()
        self._worker.stop()

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            datagrams = self._join(sink)
            if datagrams is None:
                continue  # _join waited its back-off (or stop() came)
            try:
                self._listen(datagrams, sink)
            except OSError as exc:  # the socket broke (an interface went away): join again
                self._failed(sink, "the group's socket failed", exc)
            finally:
                datagrams.close()

    def _failed(self, sink: TopologySink, what: str, exc: OSError) -> None:
        """Report ``exc`` and wait the back-off (ends early on stop())."""
        delay = self._backoff.failed()
        self._throttle.log(logging.WARNING, what, "%s: %s: %s", self.name, what, exc)
        report_failure(sink, self.name, exc, self._backoff.failures, delay)
        self._clock.wait(self._stop, delay)  # ends by the delay or stop()

    def _join(self, sink: TopologySink) -> Datagrams | None:
        try:
            datagrams = self._open()
        except ConfigurationError as exc:
            # An interface that does not exist will not appear by waiting: say so, stop.
            _log.error("%s: %s", self.name, exc)
            self._backoff.failed()
            report_failure(sink, self.name, exc, self._backoff.failures, None)
            self._stop.set()
            return None
        except OSError as exc:
            self._failed(sink, "cannot join the group", exc)
            return None
        self._backoff.succeeded()
        self._datagrams = datagrams
        if self._stop.is_set():  # stop() ran before the socket was published
            datagrams.close()
            return None
        return datagrams

    def _listen(self, datagrams: Datagrams, sink: TopologySink) -> None:
        while not self._stop.is_set():
            now = self._clock.monotonic()
            expiry = self.next_expiry()
            wait = IDLE_WAKE if expiry is None else max(expiry - now, 0.0)
            packet = datagrams.receive(wait)  # ends by the wait, a packet or stop()
            now = self._clock.monotonic()
            changed = False
            if packet is not None:
                try:
                    changed = self.take(packet, now)
                except DecodeError as exc:
                    self._throttle.log(
                        logging.WARNING, "packet", "%s: skipped a packet: %s", self.name, exc
                    )
            changed = self.expire(now) or changed
            if changed:
                self._push(sink)

    def _push(self, sink: TopologySink) -> None:
        # Two announcers of one address (a broker announcing two connectors that map to the
        # same port) are one broker.
        brokers = tuple(dict.fromkeys(self.brokers()))
        if brokers == self._pushed:
            return
        self._pushed = brokers
        try:
            sink.update_brokers(brokers, source=self.name, action="replace")
        except Exception:  # noqa: BLE001 - a sink's bug must not end the listening thread
            _log.exception("%s: the sink failed to take the list", self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._worker.state})"
