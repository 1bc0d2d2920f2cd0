"""The ``dns`` topology source: brokers named by DNS records, re-resolved when their TTL ends.

Two modes:

- **SRV** (the default): ``_stomp._tcp.example.com`` lists ``priority weight port target``
  records. Each target becomes a broker on the record's port; the SRV priority becomes the
  broker's tier (the lowest priority value in the answer is tier 0, the next distinct value
  tier 1, ...) and the SRV weight its relative weight (RFC 2782).
- **A/AAAA** (``srv=False``): every address of a host name becomes a broker on one given port,
  all in tier 0 with weight 1.

Every push is the whole current list with action ``replace``, so a target that leaves DNS leaves
the pool (seeds from the connection's URI stay; the sink decides). The sink hears a list only
when the brokers, their tiers or their weights changed.

Failures never empty the pool: a timeout, SERVFAIL, refusal, NXDOMAIN, an answer with no
records, or one whose every record is unusable keeps the last good list. NXDOMAIN counts as a
failure even after a good answer, because a zone being reloaded or a lagging secondary server
answers it for a moment; a name deleted on purpose is better handled by pointing its records
elsewhere than by a client that drops every broker on one answer. So this source never pushes
an empty list. In A/AAAA mode both queries must succeed (a name with addresses of one family
answers NODATA for the other, which is fine). The first failure of a streak is logged as a
warning, the rest at debug level, the recovery once; retries start at ``min_interval`` and
double up to ``max_interval``. A bad record is logged once and skipped.

An SRV weight of 0 becomes :data:`ZERO_WEIGHT` (the sink takes weights > 0 only).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError, DnsLookupError
from failover_client._hosts import HostError, check_host
from failover_client._throttle import LogThrottle
from failover_client.uri import SCHEMES, BrokerAddress

from ._backoff import Backoff
from ._base import SourceThread, TopologySink, check_sink, report_failure

__all__ = ["ZERO_WEIGHT", "DnsAnswer", "DnsLookupError", "DnsResolve", "DnsSource"]

_log = logging.getLogger("failover_client.topology")

ZERO_WEIGHT = 0.01
"""The weight given to an SRV record of weight 0. RFC 2782 gives such a target "a very small
chance of being selected" beside targets of positive weight; the sink needs weights > 0."""

# A name to query: any non-blank labels of at most 63 characters, an optional final dot.
_QUERY_NAME = re.compile(r"[^.\s]{1,63}(?:\.[^.\s]{1,63})*\.?")


@dataclass(frozen=True)
class DnsAnswer:
    """The records of one query and the shortest TTL on the way to them.

    ``records`` are in presentation format, as a zone file writes them: ``"10 60 61613
    b1.example.com."`` for SRV, ``"192.0.2.1"`` for A, ``"2001:db8::1"`` for AAAA. No records
    means the name exists without records of that type (NODATA); ``ttl`` is then unused.
    """

    records: tuple[str, ...]
    ttl: int = 0


DnsResolve = Callable[[str, str], DnsAnswer]
"""``resolve(name, rdtype)`` with rdtype ``"SRV"``, ``"A"`` or ``"AAAA"``: one query, answered
or raising :class:`DnsLookupError`. The default goes through dnspython; tests pass their own."""


@dataclass(frozen=True)
class _View:
    """What one resolution says: the brokers in a stable order, with tiers and weights by key."""

    brokers: tuple[BrokerAddress, ...]
    tiers: dict[str, int] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)


def _dnspython_resolve(
    resolver_address: str | None, resolver_port: int, timeout: float
) -> DnsResolve:
    """A :data:`DnsResolve` through dnspython: the given server, else the system's configuration.

    Raises :class:`ConfigurationError` when dnspython is missing or the system has no resolver
    configuration.
    """
    try:
        import dns.exception  # noqa: PLC0415 - dnspython is the optional "dns" extra
        import dns.resolver  # noqa: PLC0415
    except ImportError as exc:
        raise ConfigurationError(
            "the dns topology source needs dnspython: pip install 'failover-client[dns]'"
        ) from exc
    if resolver_address is None:
        try:
            resolver = dns.resolver.Resolver()
        except dns.exception.DNSException as exc:
            raise ConfigurationError(
                f"dns topology source: no system resolver configuration ({exc}); "
                "pass resolver_address"
            ) from exc
    else:
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [resolver_address]
        resolver.port = resolver_port
    resolver.timeout = timeout
    resolver.lifetime = timeout

    def resolve(name: str, rdtype: str) -> DnsAnswer:
        try:
            answer = resolver.resolve(
                name, rdtype, search=False, raise_on_no_answer=False, lifetime=timeout
            )
        except dns.resolver.NXDOMAIN as exc:
            raise DnsLookupError("NXDOMAIN", f"{name} does not exist") from exc
        except dns.exception.Timeout as exc:
            raise DnsLookupError("timeout", f"no answer within {timeout:g}s") from exc
        except dns.resolver.NoNameservers as exc:
            # SERVFAIL, REFUSED or an unreachable server: dnspython folds them into one error.
            raise DnsLookupError("SERVFAIL", str(exc)) from exc
        except dns.exception.DNSException as exc:
            raise DnsLookupError(type(exc).__name__, str(exc)) from exc
        if answer.rrset is None:
            return DnsAnswer(())
        records = tuple(rdata.to_text() for rdata in answer.rrset)
        return DnsAnswer(records, int(answer.chaining_result.minimum_ttl))

    return resolve


def _positive(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"dns topology source: {what} must be a number > 0, got {value!r}")
    return float(value)


def _port(what: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ConfigurationError(f"dns topology source: {what} must be 1-65535, got {value!r}")
    return value


class DnsSource:
    """Resolves ``name`` now and whenever the answer's TTL ends, and pushes changes.

    :param name: the DNS name: an SRV name such as ``_stomp._tcp.example.com``, or with
        ``srv=False`` a host name with A and/or AAAA records.
    :param scheme: the scheme of every broker (``stomp``, ``stomp+ssl``, ``amqp``, ...).
    :param port: the brokers' port with ``srv=False`` (required there); SRV records carry their
        own ports, so it is refused with ``srv=True``.
    :param srv: query SRV records (True) or A and AAAA records (False).
    :param resolver_address: the IP address of the DNS server to ask; None uses the system's
        resolver configuration.
    :param resolver_port: that server's port.
    :param clock: waits go through it (a fake clock in tests).
    :param min_interval: the shortest wait between resolutions (seconds), also the first retry
        after a failure; retries then double up to ``max_interval``.
    :param max_interval: the longest wait between resolutions, whatever the TTL.
    :param timeout: seconds one query may take, retransmissions included.
    :param source: the ``source`` of every update; ``dns:<name>`` by default, so two DNS sources
        on one connection each replace only their own brokers.
    :param resolve: answers queries; the default asks DNS through dnspython. A function given
        here (tests, a custom resolver) needs no dnspython.

    The resolutions run on a daemon thread from :meth:`start`. :meth:`stop` wakes a waiting
    thread at once; a query already sent ends within ``timeout``.
    """

    def __init__(
        self,
        name: str,
        *,
        scheme: str = "stomp",
        port: int | None = None,
        srv: bool = True,
        resolver_address: str | None = None,
        resolver_port: int = 53,
        clock: Clock | None = None,
        min_interval: float = 1.0,
        max_interval: float = 300.0,
        timeout: float = 2.0,
        source: str | None = None,
        resolve: DnsResolve | None = None,
    ) -> None:
        if not isinstance(name, str) or not _QUERY_NAME.fullmatch(name) or len(name) > 254:
            raise ConfigurationError(
                f"dns topology source: name must be a DNS name such as _stomp._tcp.example.com, "
                f"got {name!r}"
            )
        if scheme not in SCHEMES:
            raise ConfigurationError(
                f"dns topology source: unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}"
            )
        if srv and port is not None:
            raise ConfigurationError(
                "dns topology source: port is only for srv=False (SRV records carry their ports)"
            )
        if not srv and port is None:
            raise ConfigurationError("dns topology source: port is required with srv=False")
        if resolver_address is not None:
            try:
                ipaddress.ip_address(resolver_address)
            except ValueError:
                raise ConfigurationError(
                    "dns topology source: resolver_address must be an IP address, "
                    f"got {resolver_address!r}"
                ) from None
        if source is not None and (not isinstance(source, str) or not source):
            raise ConfigurationError(f"dns topology source: source must be a name, got {source!r}")
        self.query_name = name
        self.scheme = scheme
        self.port = None if port is None else _port("port", port)
        self.srv = srv
        self.min_interval = _positive("min_interval", min_interval)
        self.max_interval = _positive("max_interval", max_interval)
        if self.max_interval < self.min_interval:
            raise ConfigurationError(
                f"dns topology source: max_interval ({max_interval!r}) must be >= "
                f"min_interval ({min_interval!r})"
            )
        self.timeout = _positive("timeout", timeout)
        self.name = source if source is not None else f"dns:{name}"
        resolver_port = _port("resolver_port", resolver_port)
        self._resolve = resolve or _dnspython_resolve(resolver_address, resolver_port, self.timeout)
        self._clock: Clock = clock or SystemClock()
        self._worker = SourceThread(self.name)
        self._stop = self._worker.stopping
        self._lock = threading.Lock()
        self._last: _View | None = None
        self._backoff = Backoff(self.min_interval, self.max_interval, owner="dns topology source")
        # Bad records come back with every answer: each kind is warned about once a minute.
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)

    # --- life cycle ----------------------------------------------------------------------------

    def start(self, sink: TopologySink) -> None:
        """Resolve now and then by TTL, on a daemon thread."""
        check_sink(sink, self)
        self._worker.start(lambda: self._run(sink), self)

    def stop(self) -> None:
        """Stop resolving and join the thread. Idempotent."""
        self._worker.stop()

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            delay = self._refresh(sink)
            if self._clock.wait(self._stop, delay):
                return

    # --- one resolution ------------------------------------------------------------------------

    def _refresh(self, sink: TopologySink) -> float:
        """Resolve once, push a changed list; returns the seconds until the next resolution."""
        try:
            view, ttl = self._resolve_view()
        except Exception as exc:  # noqa: BLE001 - a resolver's bug must not end the thread either
            return self._failed(sink, exc)
        if failures := self._backoff.succeeded():
            _log.info(
                "%s: %s resolves again after %d failures", self.name, self.query_name, failures
            )
        if view != self._last:
            with self._lock:
                self._last = view
            self._push(sink, view)
        return min(max(float(ttl), self.min_interval), self.max_interval)

    def _failed(self, sink: TopologySink, exc: Exception) -> float:
        """Keep the last list; log the first failure of a streak, tell the sink of each; the
        next retry's delay."""
        retry = self._backoff.failed()
        first = self._backoff.failures == 1
        _log.log(
            logging.WARNING if first else logging.DEBUG,
            "%s: %s did not resolve, keeping the last list (%d brokers); retry in %gs: %s",
            self.name,
            self.query_name,
            0 if self._last is None else len(self._last.brokers),
            retry,
            exc,
            # A lookup error says all there is; anything else is a bug worth its traceback.
            exc_info=first and not isinstance(exc, DnsLookupError),
        )
        report_failure(sink, self.name, exc, self._backoff.failures, retry)
        return retry

    def _push(self, sink: TopologySink, view: _View) -> None:
        try:
            sink.update_brokers(
                view.brokers,
                source=self.name,
                action="replace",
                tiers=dict(view.tiers),
                weights=dict(view.weights),
            )
        except Exception:  # noqa: BLE001 - a sink's bug must not end the resolving thread
            _log.exception(
                "%s: the sink failed to take the list for %s", self.name, self.query_name
            )

    def _resolve_view(self) -> tuple[_View, int]:
        """The brokers DNS names now and the TTL to keep them; DnsLookupError if there are none."""
        if self.srv:
            answer = self._resolve(self.query_name, "SRV")
            view = self._srv_view(answer.records)
            ttl = answer.ttl
        else:
            answers = [self._resolve(self.query_name, rdtype) for rdtype in ("A", "AAAA")]
            view = self._address_view(answers)
            ttl = min((a.ttl for a in answers if a.records), default=0)
        if not view.brokers:
            raise DnsLookupError("no usable records", f"{self.query_name} names no broker")
        return view, ttl

    def _srv_view(self, records: Iterable[str]) -> _View:
        parsed: list[tuple[int, int, str, int]] = []
        for text in records:
            entry = self._parse_srv(text)
            if entry is not None:
                parsed.append(entry)
        # Best first (lowest priority, then highest weight); a target listed twice keeps its best.
        parsed.sort(key=lambda e: (e[0], -e[1], e[2], e[3]))
        chosen: dict[str, tuple[int, int, BrokerAddress]] = {}
        for priority, weight, host, port in parsed:
            address = BrokerAddress(self.scheme, host, port)
            chosen.setdefault(address.key, (priority, weight, address))
        ranks = {p: rank for rank, p in enumerate(sorted({p for p, _, _ in chosen.values()}))}
        return _View(
            tuple(address for _, _, address in chosen.values()),
            {key: ranks[p] for key, (p, _, _) in chosen.items()},
            {key: float(w) if w else ZERO_WEIGHT for key, (_, w, _) in chosen.items()},
        )

    def _parse_srv(self, text: str) -> tuple[int, int, str, int] | None:
        fields = text.split()
        if len(fields) == 4 and all(f.isdigit() for f in fields[:3]):
            priority, weight, port = (int(f) for f in fields[:3])
            host = fields[3].rstrip(".").lower()
            if host == "":
                self._skip(text, "target '.' means the service is not offered there")
            elif max(priority, weight) > 65535 or not 0 < port < 65536:
                self._skip(text, "a number out of range")
            else:
                try:
                    return priority, weight, check_host(host, "the target"), port
                except HostError as exc:
                    self._skip(text, str(exc))
        else:
            self._skip(text, "not 'priority weight port target'")
        return None

    def _address_view(self, answers: Iterable[DnsAnswer]) -> _View:
        assert self.port is not None  # the constructor requires it with srv=False
        addresses: dict[str, BrokerAddress] = {}
        for text in (record for answer in answers for record in answer.records):
            try:
                ip = ipaddress.ip_address(check_host(text.strip(), "the address"))
            except ValueError as exc:  # HostError is one
                self._skip(text, str(exc) if isinstance(exc, HostError) else "not an IP address")
                continue
            address = BrokerAddress(self.scheme, ip.compressed, self.port)
            addresses.setdefault(address.key, address)
        ordered = sorted(
            addresses.values(),
            key=lambda a: (ipaddress.ip_address(a.host).version, ipaddress.ip_address(a.host)),
        )
        return _View(
            tuple(ordered),
            {a.key: 0 for a in ordered},
            {a.key: 1.0 for a in ordered},
        )

    def _skip(self, text: str, why: str) -> None:
        self._throttle.log(
            logging.WARNING,
            why,
            "%s: skipped record %r of %s: %s",
            self.name,
            text[:120],
            self.query_name,
            why,
        )

    def __repr__(self) -> str:
        state = self._worker.state
        with self._lock:
            brokers = 0 if self._last is None else len(self._last.brokers)
        mode = "SRV" if self.srv else f"A/AAAA port={self.port}"
        return f"DnsSource({self.query_name!r}, {mode}, brokers={brokers}, {state})"
