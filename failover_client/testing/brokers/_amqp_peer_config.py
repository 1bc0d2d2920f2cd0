"""What an :class:`~failover_client.testing.brokers.AmqpPeer` answers, and what it records.

Plain values, importable without proton: the peer turns them into AMQP when it sends them.
Map keys in connection properties and condition info go out as AMQP symbols (as Artemis and
the Qpid routers send them) unless ``symbol_keys=False`` asks for strings; any other value is
sent as proton encodes it, so a test can hand a broker's client arbitrary, hostile data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

__all__ = [
    "AMQP_REDIRECT",
    "FAILOVER_SERVER_LIST",
    "AmqpPeerConfig",
    "PeerCondition",
    "PeerMessage",
    "PeerOpen",
    "PeerOutcome",
    "artemis_server_list",
    "redirect_condition",
    "router_server_list",
]

FAILOVER_SERVER_LIST: Final = "failover-server-list"
AMQP_REDIRECT: Final = "amqp:connection:redirect"

PeerOutcome = Literal["accepted", "rejected", "released", "modified", "held"]
"""How the peer settles a message a client sends: ``held`` never settles (until
:meth:`AmqpPeer.settle_held`)."""

_OUTCOMES: tuple[str, ...] = get_args(PeerOutcome)


@dataclass(frozen=True)
class PeerCondition:
    """An AMQP error condition: its symbolic ``name``, a ``description`` and an ``info`` map."""

    name: str
    description: str | None = None
    info: Mapping[str, object] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an error condition needs a name, e.g. 'amqp:internal-error'")


def redirect_condition(
    host: str,
    port: int | str,
    *,
    scheme: str | None = None,
    hostname: str | None = None,
    description: str | None = "redirected",
) -> PeerCondition:
    """An ``amqp:connection:redirect`` condition whose info names ``host`` and ``port``.

    Artemis connection routers send ``{network-host, port}``; ``scheme`` and ``hostname`` are
    added only when given.
    """
    info: dict[str, object] = {"network-host": host, "port": port}
    if scheme is not None:
        info["scheme"] = scheme
    if hostname is not None:
        info["hostname"] = hostname
    return PeerCondition(AMQP_REDIRECT, description, info)


def artemis_server_list(*members: tuple[str, int], scheme: str = "amqp") -> list[dict[str, object]]:
    """A ``failover-server-list`` as Artemis sends it: {network-host, hostname, port, scheme}."""
    return [
        {"network-host": host, "hostname": host, "port": port, "scheme": scheme}
        for host, port in members
    ]


def router_server_list(
    *members: tuple[str, int], scheme: str | None = None
) -> list[dict[str, object]]:
    """A ``failover-server-list`` as a Qpid Dispatch / skupper router sends it.

    The port is a string, the scheme only there when given, and there is no hostname.
    """
    entries: list[dict[str, object]] = []
    for host, port in members:
        entry: dict[str, object] = {"network-host": host, "port": str(port)}
        if scheme is not None:
            entry["scheme"] = scheme
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class AmqpPeerConfig:
    """How an :class:`AmqpPeer` answers. Replace it on a running peer to change what comes next.

    :param properties: the connection properties of every open frame the peer sends, e.g.
        ``{FAILOVER_SERVER_LIST: artemis_server_list(("backup", 5672))}``.
    :param symbol_keys: send the keys of maps inside ``properties`` and of condition info as
        AMQP symbols (Artemis, routers); False sends them as strings.
    :param refuse: answer each open with an open and at once a close carrying this condition
        (an Artemis connection router refusing with :func:`redirect_condition`).
    :param outcome: how each message a client sends is settled.
    :param credentials: ``(user, password)``: SASL PLAIN with exactly these is the only way in.
        None: SASL ANONYMOUS and PLAIN with any credentials (and no SASL at all) get in.
    :param credit: link credit the peer grants each client sender, topped up as messages
        arrive.
    :param container_id: the container id of the peer's open frames.
    """

    properties: Mapping[str, object] = field(default_factory=dict)
    symbol_keys: bool = True
    refuse: PeerCondition | None = None
    outcome: PeerOutcome = "accepted"
    credentials: tuple[str, str] | None = None
    credit: int = 100
    container_id: str = "amqp-peer"

    def __post_init__(self) -> None:
        if self.outcome not in _OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(_OUTCOMES)}, not {self.outcome!r}")
        if self.credit < 1:
            raise ValueError(f"credit must be at least 1, not {self.credit}")
        if self.credentials is not None and not (
            len(self.credentials) == 2 and all(isinstance(c, str) for c in self.credentials)
        ):
            raise ValueError("credentials must be a (user, password) pair of strings")

    def __repr__(self) -> str:
        # The password stays out of test reports.
        user = None if self.credentials is None else self.credentials[0]
        return (
            f"AmqpPeerConfig(properties={list(self.properties)}, refuse={self.refuse!r},"
            f" outcome={self.outcome!r}, user={user!r}, credit={self.credit})"
        )


@dataclass(frozen=True)
class PeerOpen:
    """A client's open, as the peer saw it (``number`` counts connections from 0)."""

    number: int
    mechanism: str | None
    """The SASL mechanism the client chose; None when it skipped SASL."""
    user: str | None
    hostname: str | None
    """The ``hostname`` field of the client's open frame (the virtual host it asked for)."""
    container_id: str | None
    properties: Mapping[str, object]
    refused: bool


@dataclass(frozen=True)
class PeerMessage:
    """A message a client sent to the peer, with the outcome the peer gave it."""

    address: str | None
    body: object
    properties: Mapping[str, object]
    message_id: object
    durable: bool
    connection: int
    """The ``number`` of the :class:`PeerOpen` it arrived on."""
    outcome: PeerOutcome
