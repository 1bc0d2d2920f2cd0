"""The known brokers and what the connection has learned about each one.

A broker is a *seed* (a member of the user's URI: never removed by a pushed update) or
*discovered* (pushed by a topology source, with the source's name and the time it arrived). Each
has a priority tier (0 is best), a count of consecutive failed connects, a quarantine deadline and
its last error. A broker that keeps failing is quarantined for a growing time (1, 2, 4... seconds
up to a cap) so a fail-over does not waste its connect timeout on a broker that just refused.
Quarantine orders rather than excludes: quarantined brokers are tried after every live one has
failed (forced resurrection, soonest release first), because a pass over the whole list is what
the reconnect schedule promises.

Every method is a pure state change under a lock: it takes ``now`` from the caller, performs no
I/O and returns what changed, so the connection decides what to do with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from failover_client._errors import ConfigurationError
from failover_client._events import TopologyChanged, TopologyTruncated
from failover_client._hosts import HostError, check_host
from failover_client.uri import BrokerAddress, FailoverOptions, ServerListAction

__all__ = ["AddressMap", "BrokerPool", "BrokerState", "PoolView", "TopologyDelta"]

AddressMap = Callable[[BrokerAddress], BrokerAddress | None]
"""Turns an advertised (often internal) address into a reachable one; None drops the entry."""

_MAX_REASONS = 16
"""Left-out entries a delta lists at most (the rest only counts): its log line stays short."""

_TLS_SCHEME = {"stomp": "stomp+ssl", "amqp": "amqps", "openwire": "ssl"}
_PROTOCOLS: dict[frozenset[str], frozenset[str]] = {}
"""One frozenset (216 bytes) per distinct set of protocols, shared by every pool."""


@dataclass(frozen=True, slots=True)
class BrokerState:
    """One known broker. ``last_error`` is the error's type and message (never a password)."""

    address: BrokerAddress
    seed: bool
    source: str = "uri"
    tier: int = 0
    discovered_at: float | None = None
    weight: float = 1.0
    """Relative share of the clients it should get (a DNS SRV weight); 1 unless a source says."""
    vouchers: frozenset[str] = frozenset()
    """The topology sources whose latest list names it; a discovered broker that loses the last
    one leaves the pool (seeds stay whatever the sources say)."""
    failures: int = 0
    quarantined_until: float | None = None
    last_error: str | None = None

    def __post_init__(self) -> None:
        if self.tier < 0:
            raise ConfigurationError(f"broker {self.address} has negative tier {self.tier}")
        if self.failures < 0:
            raise ConfigurationError(f"broker {self.address} has negative failure count")
        if not self.weight > 0:
            raise ConfigurationError(f"broker {self.address} has weight {self.weight}, not > 0")

    @property
    def key(self) -> str:
        return self.address.key

    def live(self, now: float) -> bool:
        """Not quarantined at ``now``."""
        return self.quarantined_until is None or now >= self.quarantined_until

    def age(self, now: float) -> float | None:
        """Seconds since a topology source announced it; None for seeds."""
        return None if self.discovered_at is None else now - self.discovered_at

    def describe(self) -> str:
        parts = [
            self.key,
            "seed" if self.seed else f"discovered({self.source})",
            f"tier={self.tier}",
        ]
        if self.weight != 1.0:
            parts.append(f"weight={self.weight:g}")
        if self.failures:
            parts.append(f"failures={self.failures}")
        if self.quarantined_until is not None:
            parts.append(f"quarantined_until={self.quarantined_until:g}")
        if self.last_error:
            parts.append(f"last_error={self.last_error!r}")
        return " ".join(parts)


@dataclass(frozen=True)
class TopologyDelta:
    """What a merge changed."""

    added: tuple[BrokerAddress, ...] = ()
    removed: tuple[BrokerAddress, ...] = ()
    retiered: tuple[BrokerAddress, ...] = ()
    """Known brokers whose tier or weight the source changed."""
    released: tuple[BrokerAddress, ...] = ()
    """Quarantined brokers a source named again after it had dropped them: back in the plan."""
    foreign: tuple[BrokerAddress, ...] = ()
    """Entries left out because they speak another protocol than the connection."""
    rejected: tuple[str, ...] = ()
    """Why entries were left out whose host cannot be a broker's (:func:`check_host`)."""
    dropped: int = 0
    """New entries left out because the pool held ``max_brokers`` already."""
    limit: int = 0
    """The pool's ``max_brokers`` when it dropped entries (for the event that tells of it)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.retiered or self.released)

    def event(self, source: str) -> TopologyChanged | None:
        """The event that tells listeners of the change (None when no broker came or went)."""
        if not (self.added or self.removed):
            return None
        return TopologyChanged(
            tuple(str(a) for a in self.added), tuple(str(a) for a in self.removed), source
        )

    def truncated(self, source: str) -> TopologyTruncated | None:
        """The event that tells of entries dropped at the pool's cap (None when none were)."""
        if not self.dropped:
            return None
        return TopologyTruncated(source, self.dropped, self.limit)


class BrokerPool:
    """The known brokers with their health state.

    ``tiers`` maps ``host:port`` keys to priority tiers (missing keys get ``default_tier``).
    ``quarantine_base`` and ``quarantine_max`` bound the growing quarantine after failures;
    ``address_map`` rewrites pushed entries (see :meth:`merge`). ``seeds`` may be empty only
    when ``discovered`` says a source will fill the pool (``failover:()?updateURIsURL=...``);
    the protocol is then the first pushed entry's. ``max_brokers`` bounds the pool, seeds
    included: a merge never adds a broker past it (a hostile push of 10,000 brokers would
    otherwise cost memory and a whole core of planning and dialing).
    """

    __slots__ = ("_address_map", "_base", "_default_tier", "_lock", "_max", "_max_brokers",
                 "_protocols", "_seeds", "_states", "_tiers")  # fmt: skip

    @classmethod
    def for_connection(
        cls,
        seeds: Sequence[BrokerAddress],
        options: FailoverOptions,
        *,
        tiers: Mapping[str, int],
        address_map: AddressMap | None,
        discovered: bool,
    ) -> BrokerPool:
        """The pool of a connection with these options."""
        return cls(
            seeds,
            discovered=discovered,
            tiers=tiers,
            # With priority backup, only the brokers the user named are preferred: a broker a
            # source learns (a peer in the remote data centre, too) is a backup, as in Java.
            default_tier=1 if options.priority_backup else 0,
            # A quarantine never outlasts the longest reconnect delay the user allowed.
            quarantine_base=min(1.0, options.max_reconnect_delay),
            quarantine_max=options.max_reconnect_delay,
            address_map=address_map,
            max_brokers=options.topology_max_brokers,
        )

    def __init__(
        self,
        seeds: Sequence[BrokerAddress],
        *,
        tiers: Mapping[str, int] | None = None,
        default_tier: int = 0,
        quarantine_base: float = 1.0,
        quarantine_max: float = 30.0,
        address_map: AddressMap | None = None,
        discovered: bool = False,
        max_brokers: int = 256,
    ) -> None:
        if not seeds and not discovered:
            raise ConfigurationError("a failover connection needs at least one broker")
        if quarantine_base < 0 or quarantine_max < quarantine_base:
            raise ConfigurationError(
                f"quarantine needs 0 <= base <= max, got base={quarantine_base} "
                f"max={quarantine_max}"
            )
        if isinstance(max_brokers, bool) or not isinstance(max_brokers, int) or max_brokers < 1:
            raise ConfigurationError(f"max_brokers must be >= 1, got {max_brokers!r}")
        self._max_brokers = max_brokers
        self._lock = threading.Lock()
        self._tiers = dict(tiers or {})
        self._default_tier = default_tier
        self._base = quarantine_base
        self._max = quarantine_max
        self._address_map = address_map
        self._seeds = tuple(seeds)
        protocols = frozenset(s.protocol for s in seeds)
        self._protocols = _PROTOCOLS.setdefault(protocols, protocols)
        """The protocol of the connection; empty until the first entry of a seedless pool."""
        self._states: dict[str, BrokerState] = {}
        for seed in seeds:
            # A broker listed twice is one broker; the first spelling wins.
            self._states.setdefault(
                seed.key, BrokerState(address=seed, seed=True, tier=self._tier_for(seed.key))
            )

    # --- reading ---------------------------------------------------------------------------

    def states(self) -> tuple[BrokerState, ...]:
        """Every known broker, seeds first in URI order, then discoveries in arrival order."""
        with self._lock:
            return tuple(self._states.values())

    def state(self, key: str) -> BrokerState:
        with self._lock:
            try:
                return self._states[key]
            except KeyError:
                raise KeyError(f"no broker {key!r} in the pool") from None

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._states

    def entry_for(self, advertised: BrokerAddress) -> BrokerAddress | None:
        """The known broker an advertised address names (after the address map), or None."""
        with self._lock:
            address = self._sanitize(advertised)
            known = None if address is None else self._states.get(address.key)
            return None if known is None else known.address

    def tier_of(self, address: BrokerAddress) -> int:
        with self._lock:
            known = self._states.get(address.key)
        return known.tier if known is not None else self._tier_for(address.key)

    def by_tier(self, now: float | None = None) -> list[list[BrokerAddress]]:
        """Brokers grouped by tier, best tier first; with ``now``, only the live ones."""
        with self._lock:
            states = list(self._states.values())
        if now is not None:
            states = [s for s in states if s.live(now)]
        tiers: dict[int, list[BrokerAddress]] = {}
        for state in states:
            tiers.setdefault(state.tier, []).append(state.address)
        return [tiers[t] for t in sorted(tiers)]

    def live_tiers(self, now: float) -> list[list[BrokerState]]:
        """The states of the live brokers grouped by tier, best tier first."""
        with self._lock:
            states = [s for s in self._states.values() if s.live(now)]
        tiers: dict[int, list[BrokerState]] = {}
        for state in states:
            tiers.setdefault(state.tier, []).append(state)
        return [tiers[t] for t in sorted(tiers)]

    def quarantined(self, now: float) -> list[BrokerAddress]:
        """Brokers quarantined at ``now``, the one released soonest first.

        The reconnect loop tries them after every live broker failed (forced resurrection): a pass
        still covers the whole list, as the reconnect schedule promises, but a broker that just
        refused or hung no longer costs a connect timeout before a live one is reached.
        """
        with self._lock:
            states = [s for s in self._states.values() if not s.live(now)]
        states.sort(key=lambda s: s.quarantined_until or 0.0)
        return [s.address for s in states]

    # --- health ----------------------------------------------------------------------------

    def record_failure(
        self, address: BrokerAddress, error: BaseException, now: float
    ) -> BrokerState:
        """Count a failed connect and quarantine the broker; returns its new state."""
        with self._lock:
            state = self._states.get(address.key)
            if state is None:
                # A broker removed by a merge while a connect to it was in flight.
                state = BrokerState(address=address, seed=False, tier=self._tier_for(address.key))
            failures = state.failures + 1
            # The exponent is capped: a broker probed for days fails thousands of times, and
            # 2 ** 1024 no longer converts to a float.
            quarantine = min(self._base * 2.0 ** min(failures - 1, 64), self._max)
            new = replace(
                state,
                failures=failures,
                quarantined_until=now + quarantine,
                last_error=f"{type(error).__name__}: {error}",
            )
            if address.key in self._states:
                self._states[address.key] = new
            return new

    def record_success(self, address: BrokerAddress) -> BrokerState:
        """A handshake succeeded: the failure count and quarantine reset."""
        with self._lock:
            state = self._states.get(address.key)
            if state is None:
                state = BrokerState(address=address, seed=False, tier=self._tier_for(address.key))
            new = replace(state, failures=0, quarantined_until=None)
            if address.key in self._states:
                self._states[address.key] = new
            return new

    # --- topology --------------------------------------------------------------------------

    def merge(
        self,
        update: Iterable[BrokerAddress],
        action: ServerListAction,
        *,
        source: str,
        now: float,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> TopologyDelta:
        """Merge a pushed broker list from ``source``; returns what was added and removed.

        ``replace`` makes ``update`` everything ``source`` vouches for (a discovered broker no
        source vouches for any more leaves the pool); ``add`` only adds; ``ignore`` changes
        nothing. Seeds are never removed, and keep the tier and weight the user gave them.
        ``tiers`` and ``weights`` (by broker key) set those of discovered brokers. A pushed
        entry is first passed through the address map, then loses its options and credentials
        (a topology source must not change client behaviour; credentials come from the seeds),
        and never downgrades TLS: a known TLS broker stays TLS, and when every seed uses TLS a
        plain entry is upgraded to its protocol's TLS scheme. An entry of another protocol than
        the connection's is left out (``foreign``); a pool without seeds takes the protocol of
        its first entry.
        """
        if action == "ignore":
            return TopologyDelta()
        tiers, weights = tiers or {}, weights or {}
        with self._lock:
            incoming, advertised_as, foreign, rejected, extra = self._incoming(update)
            # Before adding: brokers a replacing list no longer names make room for new ones.
            removed = self._withdraw(source, incoming) if action == "replace" else []
            added: list[BrokerAddress] = []
            retiered: list[BrokerAddress] = []
            released: list[BrokerAddress] = []
            dropped = 0
            for key, address in incoming.items():
                raw_key = advertised_as[key]
                known = self._states.get(key)
                if known is None:
                    if len(self._states) >= self._max_brokers:
                        dropped += 1
                        continue
                    self._states[key] = BrokerState(
                        address=address,
                        seed=False,
                        source=source,
                        tier=tiers.get(raw_key, self._tier_for(key)),
                        discovered_at=now,
                        weight=weights.get(raw_key, 1.0),
                        vouchers=frozenset((source,)),
                    )
                    added.append(address)
                    continue
                new = replace(known, vouchers=known.vouchers | {source})
                if source not in known.vouchers and known.quarantined_until is not None:
                    # The source had dropped it and names it again: it came back (a restarted
                    # broker's bridges are up). Its quarantine counted failures from before.
                    new = replace(new, failures=0, quarantined_until=None)
                    released.append(address)
                if not known.seed:
                    new = replace(
                        new,
                        tier=tiers.get(raw_key, known.tier),
                        weight=weights.get(raw_key, known.weight),
                    )
                    if (new.tier, new.weight) != (known.tier, known.weight):
                        retiered.append(address)
                self._states[key] = new
            return TopologyDelta(
                added=tuple(added),
                removed=tuple(removed),
                retiered=tuple(retiered),
                released=tuple(released),
                foreign=tuple(foreign),
                rejected=tuple(rejected),
                dropped=dropped + extra,
                limit=self._max_brokers if dropped + extra else 0,
            )

    def _withdraw(self, source: str, keep: Mapping[str, BrokerAddress]) -> list[BrokerAddress]:
        """``source`` no longer vouches for known brokers outside ``keep``; a discovered broker
        nobody vouches for leaves the pool. Returns those that left. Under the lock."""
        removed = []
        for key, state in list(self._states.items()):
            if key in keep or source not in state.vouchers:
                continue
            left = state.vouchers - {source}
            if state.seed or left:
                self._states[key] = replace(state, vouchers=left)
            else:
                del self._states[key]
                removed.append(state.address)
        return removed

    def _incoming(
        self, update: Iterable[BrokerAddress]
    ) -> tuple[dict[str, BrokerAddress], dict[str, str], list[BrokerAddress], list[str], int]:
        """The sanitized entries by key (at most ``max_brokers``), the advertised key of each
        (tiers and weights name that one), the entries of another protocol, why entries with
        an unusable host were left out, and how many entries came past ``max_brokers``. Under
        the lock. Those are only counted, never sanitized: a list of 10,000 costs a count, not
        10,000 addresses.
        """
        incoming: dict[str, BrokerAddress] = {}
        advertised_as: dict[str, str] = {}
        foreign: list[BrokerAddress] = []
        rejected: list[str] = []
        extra = 0
        for raw in update:
            if len(incoming) >= self._max_brokers:
                extra += 1
                continue
            try:
                check_host(raw.host, f"{raw.scheme} broker host")
            except HostError as exc:
                if len(rejected) < _MAX_REASONS:
                    rejected.append(str(exc))
                continue
            address = self._sanitize(raw)
            if address is None:
                continue
            if address.protocol not in self._protocols:
                if len(foreign) < _MAX_REASONS:
                    foreign.append(address)
            elif address.key not in incoming:
                incoming[address.key] = address
                advertised_as[address.key] = raw.key
        return incoming, advertised_as, foreign, rejected, extra

    def _sanitize(self, raw: BrokerAddress) -> BrokerAddress | None:
        address: BrokerAddress | None = raw
        if self._address_map is not None:
            address = self._address_map(raw)
        if address is None:
            return None
        if not self._protocols:
            protocols = frozenset((address.protocol,))  # the first entry decides
            self._protocols = _PROTOCOLS.setdefault(protocols, protocols)
        template = next((s for s in self._seeds if s.protocol == address.protocol), None)
        scheme = address.scheme
        known = self._states.get(address.key)
        if known is not None and known.address.tls and not address.tls:
            scheme = known.address.scheme
        elif not address.tls and self._seeds and all(s.tls for s in self._seeds):
            scheme = _TLS_SCHEME[address.protocol]
        # Credentials come from the seeds (or, without seeds, the connector's login).
        return BrokerAddress(
            scheme=scheme,
            host=address.host,
            port=address.port,
            user=None if template is None else template.user,
            password=None if template is None else template.password,
        )

    def _tier_for(self, key: str) -> int:
        return self._tiers.get(key, self._default_tier)

    def __repr__(self) -> str:
        with self._lock:
            body = ", ".join(s.describe() for s in self._states.values())
        return f"<BrokerPool [{body}]>"


class PoolView:
    """A live, read-only view of a :class:`BrokerPool`: what a connection shows of its pool.

    Reads see the pool as it is now; there is no way to change it through the view, so every
    change goes through the connection's merge rules (seeds kept, TLS never downgraded, the cap).
    """

    __slots__ = ("_pool",)

    def __init__(self, pool: BrokerPool) -> None:
        self._pool = pool

    def states(self) -> tuple[BrokerState, ...]:
        """Every known broker, seeds first in URI order, then discoveries in arrival order."""
        return self._pool.states()

    def state(self, key: str) -> BrokerState:
        """The broker ``key`` (``host:port``); KeyError if unknown."""
        return self._pool.state(key)

    def __contains__(self, key: object) -> bool:
        return key in self._pool

    def __len__(self) -> int:
        return len(self._pool.states())

    def entry_for(self, advertised: BrokerAddress) -> BrokerAddress | None:
        """The known broker an advertised address names (after the address map), or None."""
        return self._pool.entry_for(advertised)

    def tier_of(self, address: BrokerAddress) -> int:
        return self._pool.tier_of(address)

    def by_tier(self, now: float | None = None) -> list[list[BrokerAddress]]:
        """Brokers grouped by tier, best tier first; with ``now``, only the live ones."""
        return self._pool.by_tier(now)

    def live_tiers(self, now: float) -> list[list[BrokerState]]:
        return self._pool.live_tiers(now)

    def quarantined(self, now: float) -> list[BrokerAddress]:
        return self._pool.quarantined(now)

    def __repr__(self) -> str:
        return repr(self._pool)
