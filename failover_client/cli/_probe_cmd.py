"""``failover-client probe URI``: which members answer the protocol handshake, and how fast.

Each member is tried on its own (not through the failover loop): TCP connect plus the protocol
handshake, timed. For STOMP the broker's CONNECTED frame says its product (``server``), the
chosen version and heart-beats. ``--peers`` also asks an ActiveMQ Classic broker which network
bridges it has, through the network-bridge advisory topic (JSON needs xstream and jettison on
the broker's class path; without them the broker drops the connection, reported as such).
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Mapping
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

__all__ = ["ADVISORY_TOPIC", "Peer", "ProbeResult", "add_parser", "parse_advisory", "run"]

ADVISORY_TOPIC = "/topic/ActiveMQ.Advisory.NetworkBridge"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "probe",
        help="check which members answer the protocol handshake, how fast, and what they say",
        description="Try every member of the URI on its own: TCP connect plus protocol "
        "handshake (STOMP CONNECTED), timed in ms, with what the broker tells a client about "
        "itself. Exit code 0 when every member answered, 5 when some did, 3 when none did.",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=seconds,
        help="handshake deadline per member in seconds (default: the URI's connectTimeout)",
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
class ProbeResult:
    """What one member answered (``error`` empty when the handshake succeeded)."""

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
    """Session listener: keeps advisories and notices the session dying."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[Received] = []
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
        """Not reported: only AMQP brokers advertise lists, and the probe speaks STOMP only."""


def _connector(target: FailoverURI, args: argparse.Namespace, env: Environment) -> Connector:
    if env.connector is not None:
        return env.connector
    login, passcode = credentials(args, env)
    try:
        from failover_client.stomp import StompConnector  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ConfigurationError(
            "the stomp adapter is not installed: pip install 'failover-client[stomp]'"
        ) from exc
    return StompConnector(target.options, login=login, passcode=passcode, clock=env.clock)


def _connected_headers(session: Session) -> Mapping[str, str]:
    # The handshake's headers (server, heart-beat) are not part of the adapter interface: the
    # STOMP session offers them as ``connected_headers``; a session without them shows none.
    headers = getattr(session, "connected_headers", None)
    return headers if isinstance(headers, Mapping) else {}


def probe_member(
    member: BrokerAddress,
    connector: Connector,
    env: Environment,
    *,
    timeout: float,
    peers_wait: float | None,
) -> ProbeResult:
    """Handshake with one member, time it, and optionally listen for bridge advisories."""
    if member.protocol != "stomp":
        reason = (
            "AMQP probing is not supported yet"
            if member.protocol == "amqp"
            else "OpenWire members cannot be probed (no OpenWire client)"
        )
        return ProbeResult(str(member), member.protocol, answered=False, error=reason)
    collector = _Collector()
    began = env.clock.monotonic()
    try:
        session = connector.connect(member, timeout=timeout, listener=collector, cancel=Cancel())
    except ConnectionFailure as exc:
        return ProbeResult(
            str(member), member.protocol, answered=False, error=f"{type(exc).__name__}: {exc}"
        )
    ms = (env.clock.monotonic() - began) * 1000.0
    try:
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


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    target = parse_target(args.uri)
    connector = _connector(target, args, env)
    timeout = args.timeout if args.timeout is not None else target.options.connect_timeout
    results = [
        probe_member(
            member,
            connector,
            env,
            timeout=timeout,
            peers_wait=args.peers_wait if args.peers else None,
        )
        for member in target.members
    ]
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
    """The ``probe`` tables: one row per member, then each broker's bridge peers."""
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
