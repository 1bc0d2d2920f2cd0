"""Values that describe brokers and clusters: endpoints, connectors, TLS, cluster specs.

All frozen and hashable: a ``ClusterSpec`` is the key under which a pytest session reuses a
running cluster.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BrokerKind",
    "BrokerUser",
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
    """Key material for a TLS listener: ``stomp+ssl`` on ActiveMQ, ``amqps`` on RabbitMQ.

    The key store holds the broker's key and certificate chain (PKCS12); a trust store is
    only needed when the broker must verify client certificates (``need_client_auth``).
    """

    keystore: Path
    keystore_password: str
    truststore: Path | None = None
    truststore_password: str | None = None
    need_client_auth: bool = False
    certificate_pem: Path | None = None
    """The broker's certificate chain as PEM, for brokers that read PEM (RabbitMQ)."""
    key_pem: Path | None = None
    """The broker's private key as unencrypted PEM, beside ``certificate_pem``."""

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


# A STOMP CONNECT frame is not escaped (STOMP 1.2): a line break or NUL in a header value would
# end the header or the frame, so such a login could never be sent.
_FORBIDDEN_IN_LOGIN = ("\n", "\r", "\0")
_HEAP = re.compile(r"^[1-9][0-9]*[kKmMgG]$")


@dataclass(frozen=True)
class BrokerUser:
    """One account an ActiveMQ broker accepts (``simpleAuthenticationPlugin``).

    The password stays out of ``repr``: pytest prints specs in failure reports.
    """

    name: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("password", self.password)):
            if not isinstance(value, str):
                raise TypeError(f"user {self.name!r}: the {what} must be a string")
            if not value:
                raise ValueError(f"user {self.name!r}: the {what} is empty")
            if any(c in value for c in _FORBIDDEN_IN_LOGIN):
                raise ValueError(
                    f"user {self.name!r}: the {what} holds a line break or NUL, which a STOMP "
                    "CONNECT header cannot carry"
                )
            if value != value.strip():
                # Brokers differ in whether they trim header values; keep logins unambiguous.
                raise ValueError(f"user {self.name!r}: the {what} starts or ends with whitespace")


def _as_users(users: Iterable[object]) -> tuple[BrokerUser, ...]:
    """``users`` as BrokerUser values; (name, password) pairs are accepted and converted."""
    if isinstance(users, (str, bytes, BrokerUser)):
        raise TypeError("users: give a sequence of (name, password) pairs or BrokerUser values")
    out: list[BrokerUser] = []
    for entry in users:
        if isinstance(entry, BrokerUser):
            out.append(entry)
        elif isinstance(entry, tuple) and len(entry) == 2:
            out.append(BrokerUser(*entry))
        else:
            # The entry may hold a password: name only its type.
            raise TypeError(
                f"users: each entry must be a (name, password) pair or a BrokerUser, "
                f"not {type(entry).__name__}"
            )
    names = [u.name for u in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"users: {twice} appear more than once")
    return tuple(out)


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: ``size`` brokers of ``kind``.

    ``network`` (ActiveMQ only) joins them in a full mesh of static network connectors with
    ``updateClusterClients`` / ``rebalanceClusterClients`` / ``updateClusterClientsOnRemove``
    on the transport connectors; ``advertise`` says which connector carries those flags first
    and so which address peers advertise (``"stomp"`` or ``"tcp"`` for OpenWire).

    ``users`` (ActiveMQ only) switches authentication on: the brokers accept only these
    accounts (``(name, password)`` pairs or ``BrokerUser`` values; anonymous logins are
    refused), and the harness itself (readiness probe, ``Broker.send`` / ``drain``, network
    bridges) logs in as the first one, which ``Broker.credentials`` then holds. Empty (the
    default) means no authentication at all.

    ``shared_store`` (ActiveMQ only) makes the brokers a shared-storage master/slave group:
    one KahaDB directory for all, so the first to take its lock is the master and the others
    wait on the lock, their connectors stopped, until it dies (a
    :class:`~failover_client.testing.brokers.SharedStoreCluster`).

    ``heap`` (ActiveMQ only) is each broker's maximum Java heap, as ``-Xmx`` takes it
    (``"512m"``, ``"2g"``); None means ``$FAILOVER_ACTIVEMQ_HEAP``, else 1 GB, which held
    100,000 queued 128-byte messages where 256 MB ran out of memory. The heap grows only as
    the broker needs it (it starts at 64 MB).

    ``max_page_size`` (ActiveMQ only) sets every queue's ``maxPageSize``: how many stored
    messages the broker pages in per wake-up of the queue (None: the broker's 200).
    """

    kind: BrokerKind
    size: int = 3
    network: bool = False
    advertise: str = "stomp"
    tls: TlsOptions | None = None
    extra_connectors: tuple[Connector, ...] = ()
    label: str = ""
    jvm_options: tuple[str, ...] = field(default=())
    users: tuple[BrokerUser, ...] = ()
    shared_store: bool = False
    heap: str | None = None
    max_page_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", BrokerKind(self.kind))
        object.__setattr__(self, "users", _as_users(self.users))
        if self.size < 1:
            raise ValueError(f"size={self.size}: a cluster needs at least one broker")
        if self.users and self.kind is not BrokerKind.ACTIVEMQ:
            # RabbitMQ nodes already insist on a login (guest, loopback only) and Artemis
            # containers on theirs: tests of refused credentials use those as they are.
            raise ValueError(
                f"users is only supported for ActiveMQ, not {self.kind.value}; its brokers "
                "already require their own login (see Broker.credentials)"
            )
        if self.tls is not None and self.kind is BrokerKind.ARTEMIS:
            raise ValueError("tls is only supported for ActiveMQ and RabbitMQ, not artemis")
        if self.shared_store and (self.size < 2 or self.network):
            raise ValueError(
                "shared_store: a master/slave pair needs size >= 2 and no network of brokers"
            )
        if self.kind is not BrokerKind.ACTIVEMQ:
            for name, value in (
                ("shared_store", self.shared_store),
                ("network", self.network),
                ("extra_connectors", self.extra_connectors),
                ("jvm_options", self.jvm_options),
                ("heap", self.heap),
                ("max_page_size", self.max_page_size),
            ):
                if value:
                    raise ValueError(
                        f"{name} is only supported for ActiveMQ, not {self.kind.value}"
                    )
        if self.heap is not None and not _HEAP.match(self.heap):
            raise ValueError(f"heap={self.heap!r}: give a size as -Xmx takes it, e.g. '1g'")
        if self.max_page_size is not None and self.max_page_size < 1:
            raise ValueError(f"max_page_size={self.max_page_size}: a page holds at least 1")
        if self.advertise not in ("stomp", "tcp"):
            raise ValueError(f"advertise={self.advertise!r}: choose 'stomp' or 'tcp'")
        names = [c.name for c in self.extra_connectors]
        taken = {"stomp", "tcp", "stomp+ssl"}
        clash = sorted(set(names) & taken) or sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise ValueError(f"extra connector names {clash} clash with other connectors")
        if not self.label:
            label = self.kind.value + ("-net" if self.network else "")
            label += "-shared" if self.shared_store else ""
            label += f"-page{self.max_page_size}" if self.max_page_size else ""
            object.__setattr__(self, "label", label + ("-auth" if self.users else ""))


@dataclass(frozen=True)
class ReceivedMessage:
    """A message drained by the harness: its body and its headers / properties as text."""

    body: bytes
    headers: Mapping[str, str]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")
