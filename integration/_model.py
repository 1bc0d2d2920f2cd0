"""Values that describe brokers and clusters: endpoints, connectors, TLS, cluster specs.

All frozen and hashable: a ``ClusterSpec`` is the key under which a pytest session reuses a
running cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BrokerKind",
    "ClusterSpec",
    "Connector",
    "Endpoint",
    "ReceivedMessage",
    "TlsOptions",
]


class BrokerKind(enum.StrEnum):
    ACTIVEMQ = "activemq"
    RABBITMQ = "rabbitmq"
    ARTEMIS = "artemis"


@dataclass(frozen=True)
class Endpoint:
    """One listening protocol endpoint of a broker, printed as a failover-URI member."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


@dataclass(frozen=True)
class Connector:
    """An extra ActiveMQ transport connector; the harness picks its port.

    ``scheme`` is the ActiveMQ transport scheme (``stomp``, ``stomp+nio``, ``tcp``, ``nio``,
    ``stomp+ssl``, ...); ``query`` is appended after ``?`` (e.g.
    ``"transport.hbGracePeriodMultiplier=2"``). ``name`` is the key in ``Broker.endpoints``.
    """

    name: str
    scheme: str
    query: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("+", "").isalnum():
            raise ValueError(f"connector name {self.name!r}: use letters, digits, '-' or '+'")
        if "://" in self.scheme or not self.scheme:
            raise ValueError(
                f"connector scheme {self.scheme!r}: give the scheme only, e.g. 'stomp'"
            )
        if self.query.startswith("?"):
            raise ValueError(f"connector query {self.query!r}: leave out the leading '?'")


@dataclass(frozen=True)
class TlsOptions:
    """Key material for a ``stomp+ssl`` connector on ActiveMQ (see ``integration.tls``).

    The key store holds the broker's key and certificate chain (PKCS12); a trust store is
    only needed when the broker must verify client certificates (``need_client_auth``).
    """

    keystore: Path
    keystore_password: str
    truststore: Path | None = None
    truststore_password: str | None = None
    need_client_auth: bool = False

    def __post_init__(self) -> None:
        if self.need_client_auth and self.truststore is None:
            raise ValueError("need_client_auth=True needs a truststore to check clients against")
        if (self.truststore is None) != (self.truststore_password is None):
            raise ValueError("give truststore and truststore_password together")

    def __repr__(self) -> str:
        # Passwords stay out of reprs (pytest prints fixture values in failure reports).
        return (
            f"TlsOptions(keystore={str(self.keystore)!r}, truststore="
            f"{str(self.truststore) if self.truststore else None!r}, "
            f"need_client_auth={self.need_client_auth})"
        )


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: ``size`` brokers of ``kind``.

    ``network`` (ActiveMQ only) joins them in a full mesh of static network connectors with
    ``updateClusterClients`` / ``rebalanceClusterClients`` / ``updateClusterClientsOnRemove``
    on the transport connectors; ``advertise`` says which connector carries those flags first
    and so which address peers advertise (``"stomp"`` or ``"tcp"`` for OpenWire).
    """

    kind: BrokerKind
    size: int = 3
    network: bool = False
    advertise: str = "stomp"
    tls: TlsOptions | None = None
    extra_connectors: tuple[Connector, ...] = ()
    label: str = ""
    jvm_options: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", BrokerKind(self.kind))
        if self.size < 1:
            raise ValueError(f"size={self.size}: a cluster needs at least one broker")
        if self.kind is not BrokerKind.ACTIVEMQ:
            for name, value in (
                ("network", self.network),
                ("tls", self.tls),
                ("extra_connectors", self.extra_connectors),
                ("jvm_options", self.jvm_options),
            ):
                if value:
                    raise ValueError(
                        f"{name} is only supported for ActiveMQ, not {self.kind.value}"
                    )
        if self.advertise not in ("stomp", "tcp"):
            raise ValueError(f"advertise={self.advertise!r}: choose 'stomp' or 'tcp'")
        names = [c.name for c in self.extra_connectors]
        taken = {"stomp", "tcp", "stomp+ssl"}
        clash = sorted(set(names) & taken) or sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise ValueError(f"extra connector names {clash} clash with other connectors")
        if not self.label:
            object.__setattr__(self, "label", self.kind.value + ("-net" if self.network else ""))


@dataclass(frozen=True)
class ReceivedMessage:
    """A message drained by the harness: its body and its headers / properties as text."""

    body: bytes
    headers: Mapping[str, str]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")
