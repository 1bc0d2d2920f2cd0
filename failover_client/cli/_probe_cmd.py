"""``failover-client probe URI``: which members answer the protocol handshake, and how fast.

Each member is tried on its own (not through the failover loop) through the adapter of its
protocol: TCP connect plus the protocol handshake, timed. For STOMP the broker's CONNECTED frame
says its product (``server``), the chosen version and heart-beats. ``--peers`` also asks an
ActiveMQ Classic broker which network bridges it has, through the network-bridge advisory topic
(JSON needs xstream and jettison on the broker's class path; without them the broker drops the
connection, reported as such).

For AMQP 1.0 the broker's open frame carries its connection properties (``_probe_amqp`` makes
them printable): product and version become ``server``, and every property is listed. The
brokers a broker names on the connection (a ``failover-server-list`` in the open, or the target
of an ``amqp:connection:redirect``) are shown as the adapter parsed them for the engine.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from failover_client import ConfigurationError, ConnectionFailure
from failover_client.adapter import (
    AdvertisedBrokers,
    Cancel,
    Connector,
    Received,
    Session,
    SubscriptionSpec,
)
from failover_client.uri import BrokerAddress, FailoverURI

from ._common import add_connection_arguments, credentials, parse_target, seconds
from ._env import Environment
from ._exit import ExitCode
from ._output import Table, render_tables
from ._probe_amqp import AMQP_VERSION, open_properties, server_text

__all__ = [
    "ADVISORY_TOPIC",
    "AdvertisedBroker",
    "Peer",
    "ProbeResult",
    "add_parser",
    "parse_advisory",
    "run",
]

ADVISORY_TOPIC = "/topic/ActiveMQ.Advisory.NetworkBridge"

PROBED = ("stomp", "amqp")
"""The protocols a member can be probed with (each through its adapter)."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "probe",
        help="check which members answer the protocol handshake, how fast, and what they say",
        description="Try every member of the URI on its own: TCP connect plus protocol "
        "handshake (STOMP CONNECTED, AMQP open), timed in ms, with what the broker tells a "
        "client about itself (AMQP: the open frame's properties and the brokers of its "
        "failover-server-list). Exit code 0 when every member answered, 5 when some did, 3 "
        "when none did.",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=seconds,
        help="handshake deadline in seconds; members are probed at the same time, so the "
        "command ends within it (plus --peers-wait) (default: the URI's connectTimeout)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="ActiveMQ Classic: list each broker's network-bridge peers (advisory topic)",
    )
    parser.add_argument(
        "--peers-wait",
        type=seconds,
        default=1.0,
        help="seconds to listen for bridge advisories per member (default 1)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class Peer:
    """A network bridge a broker reported: the peer's name and advertised URL."""

    name: str
    url: str
    started: bool


@dataclass(frozen=True)
class AdvertisedBroker:
    """A broker that a broker named on the connection, and how (``amqp-open``...)."""

    broker: str
    source: str


@dataclass(frozen=True)
class ProbeResult:
    """What one member answered (``error`` empty when the handshake succeeded).

    ``extra`` holds an AMQP broker's open-frame properties as text; ``advertised`` the brokers
    it named (its ``failover-server-list``, or where a redirect sent the probe).
    """

    member: str
    protocol: str
    answered: bool
    ms: float | None = None
    version: str = ""
    server: str = ""
    heartbeat: str = ""
    error: str = ""
    peers: tuple[Peer, ...] = ()
    peers_error: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
    advertised: tuple[AdvertisedBroker, ...] = ()


def parse_advisory(body: bytes, headers: Mapping[str, str]) -> Peer | None:
    """The peer named by one network-bridge advisory (JSON), or None if it names none."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    info = _find_broker_info(document)
    if info is None:
        return None
    name = str(info.get("brokerName", ""))
    url = str(info.get("brokerURL", ""))
    if not name and not url:
        return None
    return Peer(name, url, headers.get("started", "true") != "false")


def _find_broker_info(document: object) -> Mapping[str, Any] | None:
    if isinstance(document, dict):
        if "brokerName" in document or "brokerURL" in document:
            return document
        for value in document.values():
            found = _find_broker_info(value)
            if found is not None:
                return found
    return None


def latest_peers(peers: list[Peer]) -> tuple[Peer, ...]:
    """The last word on each peer (a stop after a start means it is gone), sorted by name."""
    latest: dict[str, Peer] = {}
    for peer in peers:
        latest[peer.name or peer.url] = peer
    return tuple(sorted(latest.values(), key=lambda p: (p.name, p.url)))


class _Collector:
    """Session listener: keeps advisories and advertised brokers, notices the session dying."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[Received] = []
        self.advertised: list[AdvertisedBroker] = []
        self.lost: BaseException | None = None
        self.lost_event = threading.Event()

    def on_message(self, session: Session, message: Received) -> None:
        with self.lock:
            self.messages.append(message)

    def on_lost(self, session: Session, cause: BaseException) -> None:
        with self.lock:
            self.lost = cause
        self.lost_event.set()

    def on_brokers(self, session: Session, advertised: AdvertisedBrokers) -> None:
        # Called during the handshake (the open's server list, a redirect) and after it.
        found = [AdvertisedBroker(str(b), advertised.source) for b in advertised.brokers]
        with self.lock:
            self.advertised.extend(found)

    def advertised_brokers(self) -> tuple[AdvertisedBroker, ...]:
        with self.lock:
            return tuple(self.advertised)


class _Connectors:
    """One connector per protocol, made when a member first needs it (each is an extra)."""

    def __init__(self, target: FailoverURI, args: argparse.Namespace, env: Environment) -> None:
        self._target = target
        self._args = args
        self._env = env
        self._made: dict[str, Connector] = {}

    def get(self, protocol: str) -> Connector:
        if self._env.connector is not None:
            return self._env.connector
        if protocol not in self._made:
            self._made[protocol] = self._make(protocol)
        return self._made[protocol]

    def _make(self, protocol: str) -> Connector:
        env = self._env
        options = self._target.options
        login, passcode = credentials(self._args, env)
        try:
            if protocol == "amqp":
                from failover_client.amqp import AmqpConnector  # noqa: PLC0415 - optional extra

                return AmqpConnector(options, login=login, passcode=passcode, clock=env.clock)
            from failover_client.stomp import StompConnector  # noqa: PLC0415 - optional extra

            return StompConnector(options, login=login, passcode=passcode, clock=env.clock)
        except ImportError as exc:
            raise ConfigurationError(
                f"the {protocol} adapter cannot be loaded ({exc.name or exc} is missing): "
                f"pip install 'failover-client[{protocol}]'"
            ) from exc


def _connected_headers(session: Session) -> Mapping[str, str]:
    # The handshake's headers (server, heart-beat) are not part of the adapter interface: the
    # STOMP session offers them as ``connected_headers``; a session without them shows none.
    headers = getattr(session, "connected_headers", None)
    return headers if isinstance(headers, Mapping) else {}


def _remote_properties(session: Session) -> Mapping[object, object]:
    # Like the STOMP headers: the AMQP session offers its broker's open-frame properties as
    # ``remote_properties``; a session without them shows none.
    properties = getattr(session, "remote_properties", None)
    return properties if isinstance(properties, Mapping) else {}


def probe_member(
    member: BrokerAddress,
    connector: Connector | None,
    env: Environment,
    *,
    timeout: float,
    peers_wait: float | None,
) -> ProbeResult:
    """Handshake with one member, time it, and optionally listen for bridge advisories.

    ``connector`` is the adapter for the member's protocol; None for a protocol without one
    (the result says the member cannot be probed).
    """
    if connector is None or member.protocol not in PROBED:
        reason = (
            "OpenWire members cannot be probed (no OpenWire client)"
            if member.protocol == "openwire"
            else f"{member.protocol} members cannot be probed"
        )
        return ProbeResult(str(member), member.protocol, answered=False, error=reason)
    collector = _Collector()
    began = env.clock.monotonic()
    try:
        session = connector.connect(member, timeout=timeout, listener=collector, cancel=Cancel())
    except ConnectionFailure as exc:
        return ProbeResult(
            str(member),
            member.protocol,
            answered=False,
            error=f"{type(exc).__name__}: {exc}",
            advertised=collector.advertised_brokers(),
        )
    ms = (env.clock.monotonic() - began) * 1000.0
    try:
        if member.protocol == "amqp":
            properties = open_properties(_remote_properties(session))
            return ProbeResult(
                str(member),
                member.protocol,
                answered=True,
                ms=round(ms, 1),
                version=AMQP_VERSION,
                server=server_text(properties),
                extra=properties,
                advertised=collector.advertised_brokers(),
            )
        headers = _connected_headers(session)
        peers: tuple[Peer, ...] = ()
        peers_error = ""
        if peers_wait is not None:
            peers, peers_error = _listen_for_peers(session, collector, env, peers_wait)
        return ProbeResult(
            str(member),
            member.protocol,
            answered=True,
            ms=round(ms, 1),
            version=str(getattr(session, "version", headers.get("version", ""))),
            server=headers.get("server", ""),
            heartbeat=headers.get("heart-beat", ""),
            peers=peers,
            peers_error=peers_error,
        )
    finally:
        session.close()


def _listen_for_peers(
    session: Session, collector: _Collector, env: Environment, wait: float
) -> tuple[tuple[Peer, ...], str]:
    spec = SubscriptionSpec(
        id="failover-client-probe-peers",
        destination=ADVISORY_TOPIC,
        headers=(("transformation", "jms-advisory-json"),),
    )
    try:
        session.subscribe(spec, None)
    except ConnectionFailure as exc:
        return (), f"advisory subscription failed: {exc}"
    # Existing bridges are replayed on subscribe; stop early only if the broker drops us.
    env.clock.wait(collector.lost_event, wait)
    with collector.lock:
        messages = list(collector.messages)
        lost = collector.lost
    peers = [p for p in (parse_advisory(m.body, m.headers) for m in messages) if p is not None]
    error = ""
    if lost is not None:
        error = (
            "the broker dropped the connection on the advisory subscription (JSON "
            f"advisories need xstream and jettison on its class path): {lost}"
        )
    return latest_peers(peers), error


_MAX_PARALLEL = 32
"""Members probed at the same time at most (a pushed list can be long)."""


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    target = parse_target(args.uri)
    connectors = _Connectors(target, args, env)
    timeout = args.timeout if args.timeout is not None else target.options.connect_timeout
    # Made here, once per protocol: a missing extra is reported before any member is tried.
    chosen = {p: connectors.get(p) for p in {m.protocol for m in target.members} if p in PROBED}

    def probe_one(member: BrokerAddress) -> ProbeResult:
        return probe_member(
            member,
            chosen.get(member.protocol),
            env,
            timeout=timeout,
            # Bridge advisories are an ActiveMQ STOMP feature; AMQP brokers name theirs in
            # the open frame.
            peers_wait=args.peers_wait if args.peers and member.protocol == "stomp" else None,
        )

    # All members at once, so the command ends within one --timeout (plus --peers-wait),
    # not one per member; each connect is bounded by ``timeout``, so the pool's exit ends.
    workers = max(1, min(len(target.members), _MAX_PARALLEL))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="failover-probe") as pool:
        results = list(pool.map(probe_one, target.members))
    if args.json:
        document = {"uri": str(target), "members": [_result_json(r) for r in results]}
        env.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        render_tables(result_tables(results), env.stdout, styled=env.rich_output)
    return probe_exit_code(results)


def probe_exit_code(results: list[ProbeResult]) -> ExitCode:
    """0 when every member answered, 5 when some did, 3 when none did."""
    answered = sum(r.answered for r in results)
    if results and answered == len(results):
        return ExitCode.OK
    return ExitCode.INCOMPLETE if answered else ExitCode.CONNECTION


def _result_json(result: ProbeResult) -> dict[str, Any]:
    document = asdict(result)
    document["extra"] = dict(result.extra)
    return document


def result_tables(results: list[ProbeResult]) -> list[Table]:
    """The ``probe`` tables: one row per member, then what the brokers said beyond that.

    The AMQP open-frame properties, the brokers that brokers advertised, and each ActiveMQ
    broker's bridge peers, each table only when a member has something for it.
    """
    rows = tuple(
        (
            r.member,
            "yes" if r.answered else "no",
            f"{r.ms:.1f}" if r.ms is not None else "-",
            r.version or "-",
            r.server or "-",
            r.heartbeat or "-",
        )
        for r in results
    )
    tables = [
        Table(
            "members",
            ("member", "answered", "ms", "version", "server", "heart-beat"),
            rows,
            notes=tuple(r.error for r in results) if any(r.error for r in results) else (),
            note_title="error",
        )
    ]
    tables += _amqp_tables(results)
    peer_rows: list[tuple[str, ...]] = []
    peer_notes: list[str] = []
    for r in results:
        if r.peers_error:
            peer_rows.append((r.member, "-", "-", "-"))
            peer_notes.append(r.peers_error)
        for peer in r.peers:
            peer_rows.append((r.member, peer.name, peer.url, "up" if peer.started else "down"))
            peer_notes.append("")
    if peer_rows:
        tables.append(
            Table(
                "network-bridge peers",
                ("member", "peer", "advertised URL", "bridge"),
                tuple(peer_rows),
                notes=tuple(peer_notes) if any(peer_notes) else (),
                note_title="error",
            )
        )
    return tables


def _amqp_tables(results: list[ProbeResult]) -> list[Table]:
    tables = []
    properties = tuple((r.member, name, value) for r in results for name, value in r.extra.items())
    if properties:
        tables.append(Table("open-frame properties", ("member", "property", "value"), properties))
    advertised = tuple((r.member, a.source, a.broker) for r in results for a in r.advertised)
    if advertised:
        tables.append(
            Table("advertised brokers", ("member", "source", "advertised broker"), advertised)
        )
    return tables
