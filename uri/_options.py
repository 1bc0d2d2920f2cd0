"""The canonical options object every URI dialect maps onto.

ActiveMQ Classic, Artemis and Qpid JMS spell the same ideas differently and give them different
defaults and meanings (a Classic "attempt" is a pass over the whole list; an Artemis
``reconnectAttempts`` counts single tries of one broker). The parser translates each spelling into
this one value, so the engine reads one vocabulary. Times are seconds (floats); "unlimited" is -1.

The value is frozen and validated on construction; copy it with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Literal

from failover_client._errors import OptionError

__all__ = [
    "AttemptUnit",
    "ConfirmMode",
    "Dedup",
    "Dialect",
    "FailoverOptions",
    "SchemeMapEntries",
    "ServerListAction",
]

AttemptUnit = Literal["pass", "broker"]
"""What one reconnect attempt counts: a pass over the broker list, or one try of one broker."""

Dialect = Literal["classic", "artemis", "qpid"]
"""Whose semantics the options follow (reconnect delays and limits differ per system)."""

ServerListAction = Literal["replace", "add", "ignore"]
ConfirmMode = Literal["auto", "receipt", "transaction"]
"""How confirmed sends are confirmed: one receipt each, or group commit in transactions."""
"""How a broker-pushed server list merges into the known brokers (seeds are never removed)."""
Dedup = Literal["auto", "off"]
"""Whether sends carry Artemis's duplicate-detection header ``_AMQ_DUPL_ID`` (``auto``)."""
SchemeMapEntries = tuple[tuple[str, str, int | None], ...]
"""``(from scheme, to scheme, port or None)`` entries of ``topology.schemeMap``: how a broker URL
of another protocol (an advertised OpenWire ``tcp://``) becomes one of the connection's."""

_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


_CHOICES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attempt_unit", ("pass", "broker")),
    ("dialect", ("classic", "artemis", "qpid")),
    ("server_list_action", ("replace", "add", "ignore")),
    ("confirm_mode", ("auto", "receipt", "transaction")),
    ("dedup", ("auto", "off")),
)
"""Fields that take one of a few words (the Literal types above, checked at run time)."""


def _positive_or_unlimited(name: str, value: int) -> None:
    if value < -1:
        raise OptionError(f"{name} must be -1 (unlimited) or >= 0, got {value}", option=name)


def _non_negative(name: str, value: float) -> None:
    if value < 0:
        raise OptionError(f"{name} must be >= 0, got {value}", option=name)


def _positive(name: str, value: float, spelling: str | None) -> None:
    if not value > 0:  # also refuses NaN
        raise OptionError(f"{spelling or name} must be > 0, got {value}", option=name)


@dataclass(frozen=True)
class FailoverOptions:
    """Every behaviour knob of a failover connection, in one vocabulary.

    ``sources`` maps a canonical field name to the spelling the user wrote (e.g.
    ``"max_reconnect_attempts": "reconnectAttempts"``) so errors and ``explain`` output can speak
    the user's language. Fields not in ``sources`` hold the dialect's default.
    """

    dialect: Dialect = "classic"
    """The system whose URI spelled these options; decides reconnect-schedule semantics."""

    # --- which broker to try, in which order -------------------------------------------------
    randomize: bool = True
    policy: str = ""
    """Registered policy name; empty means derived from ``randomize`` (shuffle / first-element)."""
    priority_backup: bool = False
    priority_uris: tuple[str, ...] = ()
    """``host:port`` keys of the preferred brokers; empty with priority_backup means the first."""
    client_id: str | None = None
    """Stable id used by the rendezvous-hash policy; None means a random id per connection."""

    # --- reconnect schedule --------------------------------------------------------------------
    initial_reconnect_delay: float = 0.01
    reconnect_delay: float = 0.01
    max_reconnect_delay: float = 30.0
    use_exponential_backoff: bool = True
    backoff_multiplier: float = 2.0
    reconnect_jitter: float = 0.5
    """Fraction (0..1) by which each reconnect delay is shortened at random, so many clients do
    not reconnect in lock-step (0: the dialect's delays exactly)."""
    max_reconnect_attempts: int = -1
    startup_max_reconnect_attempts: int = -1
    attempt_unit: AttemptUnit = "pass"
    warn_after_reconnect_attempts: int = 10
    reconnect_supported: bool = True

    # --- connection health ---------------------------------------------------------------------
    connect_timeout: float = 2.0
    """Deadline for TCP connect plus protocol handshake (STOMP CONNECTED / AMQP open)."""
    heartbeat: tuple[int, int] = (10_000, 10_000)
    """STOMP/AMQP heart-beat (send, receive) in milliseconds; 0 disables that direction."""
    max_frame_size: int = 104_857_600
    """Largest frame (header block and body, bytes) accepted from a broker: a peer that never
    ends a frame must not grow the client's memory without bound."""

    # --- sends ---------------------------------------------------------------------------------
    timeout: float | None = None
    """How long a send may block while disconnected or unconfirmed; None blocks forever."""
    failover_timeout: float | None = None
    """Artemis ``callFailoverTimeout``: seconds a send waits for a failover to finish while no
    broker is connected (``math.inf``: forever), counted from when it began to wait for it;
    ``timeout`` then bounds only its waits while connected. None: ``timeout`` bounds the whole
    call, connected or not (ActiveMQ Classic, Qpid JMS)."""
    dedup: Dedup = "auto"
    """``auto``: every send that may be replayed carries ``_AMQ_DUPL_ID`` (its message id) to
    a broker that may drop copies by it (Artemis, or one that names no product; not ActiveMQ
    Classic or RabbitMQ), so Artemis drops a replayed copy, and a broker without such detection
    is reported once at connect (``DuplicatesPossible``); ``off``: no such header."""
    confirm_window: int = 1024
    """Outstanding unconfirmed sends per connection before ``send`` waits (their bytes are
    bounded by ``max_cache_size`` as well)."""
    confirm_mode: ConfirmMode = "auto"
    """``receipt``: one receipt per send; ``transaction``: sends written together share one
    transaction, confirmed by its COMMIT's receipt (group commit); ``auto``: group commit where
    the broker is known to make it safe (ActiveMQ Classic 5.14+), receipts elsewhere."""
    track_messages: bool = False
    max_cache_size: int = 131_072
    """Bytes of unconfirmed message bodies per connection: the byte bound of the confirmation
    window, and of the tracked fire-and-forget sends kept for replay after failover."""

    # --- standby connections -------------------------------------------------------------------
    backup: bool = False
    backup_pool_size: int = 1

    # --- topology ------------------------------------------------------------------------------
    update_uris_supported: bool = True
    update_uris_url: str | None = field(default=None, repr=False)
    """May carry credentials in its userinfo, so it stays out of repr()."""
    rebalance_update_uris: bool = True
    server_list_action: ServerListAction = "replace"
    use_topology_for_load_balancing: bool = True
    ha: bool = False
    rebalance: bool = False
    """Keep this client on its rendezvous-hash home: the best live tier's broker its client id
    weighs highest (brokers joining or leaving move only the clients they must)."""
    rebalance_drain_window: float = 2.0
    """Seconds within which a move is spread (each client waits a random part of it)."""
    topology: tuple[str, ...] = ()
    """Names of topology sources the connection starts with settings taken from itself
    (``topology=openwire,advisory``); the source registry resolves them."""
    topology_openwire_port: int = 61616
    """The OpenWire port on the data broker's host, for the ``openwire`` source."""
    topology_scheme_map: SchemeMapEntries = ()
    """How broker URLs of another protocol become the connection's (:data:`SchemeMapEntries`)."""
    topology_max_brokers: int = 256
    """Brokers the pool holds at most, seeds included: pushed entries past it are dropped."""

    # --- consumption ---------------------------------------------------------------------------
    consumer_prefetch: int = 100
    """Messages a subscription holds in the client at most (delivered, not yet handled or
    acknowledged); each broker's own flow control keeps the rest on the broker."""
    consumer_prefetch_bytes: int = 0
    """Optional byte bound per subscription (0: none); Artemis's window is counted in bytes."""
    canary_interval: float = 0.0
    """Seconds between canary round trips on each session (0: no canary). Off by default: each
    session then sends and receives ``60 / canary_interval`` messages a minute, holds a
    temporary destination on its broker, and needs the permission to create and write it."""
    canary_misses: int = 2
    """Canary intervals without the canary back before the session counts as deaf."""
    drain_on_move: bool = True
    """Drain the broker a queue subscription leaves before closing its session there."""
    drain_on_start: bool = False
    """At start, drain every member but the first one connected, once each answers: what an
    earlier process of the application left there (killed before it drained them), e.g. a
    Spark source's driver restarted on a network of brokers. Off by default: on a network of
    brokers with live producers such a drain consumes live traffic until it is quiet."""
    drain_quiet: float = 1.0
    """A drained broker is done after this many seconds without a delivery."""
    drain_timeout: float = 30.0
    """A drain ends after this long whatever is left (reported with an event)."""

    # --- TLS (verification on by default) ------------------------------------------------------
    tls_verify: bool = True
    tls_verify_hostname: bool = True
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = field(default=None, repr=False)

    # --- provenance ----------------------------------------------------------------------------
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """(canonical field, source spelling) pairs; excluded from equality."""

    def __post_init__(self) -> None:
        for name in ("max_reconnect_attempts", "startup_max_reconnect_attempts"):
            _positive_or_unlimited(name, getattr(self, name))
        for name in (
            "initial_reconnect_delay",
            "reconnect_delay",
            "max_reconnect_delay",
            "connect_timeout",
        ):
            _non_negative(name, getattr(self, name))
        # A zero deadline fails every connect: the URI would parse into a client that never works.
        _positive("connect_timeout", self.connect_timeout, self.source_of("connect_timeout"))
        if self.backoff_multiplier < 1.0:
            raise OptionError(
                f"backoff_multiplier must be >= 1.0, got {self.backoff_multiplier}",
                option="backoff_multiplier",
            )
        if not 0.0 <= self.reconnect_jitter <= 1.0:
            raise OptionError(
                f"reconnect_jitter must be between 0 and 1, got {self.reconnect_jitter}",
                option="reconnect_jitter",
            )
        self._check_sends()
        self._check_consumer()
        if self.backup_pool_size < 0:
            raise OptionError("backup_pool_size must be >= 0", option="backup_pool_size")
        if self.max_frame_size < 1:
            raise OptionError(
                f"max_frame_size must be >= 1 byte, got {self.max_frame_size}",
                option="max_frame_size",
            )
        if any(h < 0 for h in self.heartbeat) or len(self.heartbeat) != 2:
            raise OptionError(
                "heartbeat must be two non-negative millisecond values", option="heartbeat"
            )
        self._check_topology()
        for name, allowed in _CHOICES:
            value = getattr(self, name)
            if value not in allowed:
                raise OptionError(
                    f"{name} must be one of {', '.join(allowed)}; got {value!r}", option=name
                )

    def _check_sends(self) -> None:
        for name in ("timeout", "failover_timeout"):
            value = getattr(self, name)
            if value is not None:
                _non_negative(name, value)
        if self.confirm_window < 1:
            raise OptionError("confirm_window must be >= 1", option="confirm_window")
        if self.max_cache_size < 0:
            raise OptionError("max_cache_size must be >= 0", option="max_cache_size")

    def _check_topology(self) -> None:
        for name in self.topology:
            if not isinstance(name, str) or not _SOURCE_NAME.fullmatch(name):
                raise OptionError(
                    f"topology must name sources such as openwire, got {name!r}", option="topology"
                )
        if len(set(self.topology)) != len(self.topology):
            raise OptionError("topology names a source twice", option="topology")
        port = self.topology_openwire_port
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise OptionError(
                f"topology_openwire_port must be 1-65535, got {port!r}",
                option="topology_openwire_port",
            )
        limit = self.topology_max_brokers
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise OptionError(
                f"topology_max_brokers must be >= 1, got {limit!r}", option="topology_max_brokers"
            )
        for entry in self.topology_scheme_map:
            if (
                not isinstance(entry, tuple)
                or len(entry) != 3
                or not all(isinstance(s, str) and s for s in entry[:2])
                or not (entry[2] is None or (type(entry[2]) is int and 0 < entry[2] < 65536))
            ):
                raise OptionError(
                    f"topology_scheme_map entries are (from, to, port or None), got {entry!r}",
                    option="topology_scheme_map",
                )

    def _check_consumer(self) -> None:
        for name in ("consumer_prefetch", "canary_misses"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(f"{name} must be an integer >= 1, got {value!r}", option=name)
        value = self.consumer_prefetch_bytes
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise OptionError(
                f"consumer_prefetch_bytes must be an integer >= 0, got {value!r}",
                option="consumer_prefetch_bytes",
            )
        for name in ("canary_interval", "drain_quiet", "drain_timeout"):
            _non_negative(name, getattr(self, name))

    def source_of(self, name: str) -> str | None:
        """The spelling the user wrote for canonical field ``name``, or None if defaulted."""
        return dict(self.sources).get(name)

    def replace(self, **changes: object) -> FailoverOptions:
        """A validated copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
