"""A discovery agent: where to learn the broker list instead of listing it (kept, not resolved)."""

from __future__ import annotations

from dataclasses import dataclass

from ._redact import Pairs, redact_value

__all__ = ["AGENT_SCHEMES", "JGROUPS_REFUSED", "DiscoveryAgent"]

AGENT_SCHEMES: dict[str, str] = {
    # scheme -> what it discovers through (resolution belongs to the topology sources)
    "multicast": "ActiveMQ Classic multicast discovery (multicast://default)",
    "zeroconf": "ActiveMQ Classic zeroconf discovery",
    "http": "ActiveMQ Classic HTTP discovery registry",
    "https": "ActiveMQ Classic HTTP discovery registry over TLS",
    "file": "a local file with one broker URI per line",
    "udp": "Artemis UDP discovery group (udp://group:port)",
    "dns": "DNS SRV / A records re-resolved at run time",
}

JGROUPS_REFUSED = (
    "jgroups:// is Artemis' JGroups discovery, which only a Java process can join (JGroups is a "
    "Java library with its own protocol stack, configured by an XML file); listen to the "
    "cluster's UDP broadcast group with udp://<group-address>:<group-port> (the broadcast-group "
    "of broker.xml), or list the brokers"
)
"""Why a ``jgroups://`` URI (Artemis' JGroups discovery) is refused when it is parsed."""


@dataclass(frozen=True)
class DiscoveryAgent:
    """One discovery agent URI such as ``multicast://default`` or ``udp://231.7.7.7:9876``.

    ``location`` is everything between ``scheme:`` and the query (e.g. ``//default`` or
    ``/etc/brokers.txt``), percent-decoded. ``params`` are the agent's own query pairs.
    """

    scheme: str
    location: str
    params: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.params, Pairs):
            object.__setattr__(self, "params", Pairs(self.params))

    @property
    def host(self) -> str | None:
        """The host of a ``scheme://host[:port]`` agent, else None."""
        authority = self._authority()
        if authority is None:
            return None
        if authority.startswith("["):
            return authority[1 : authority.find("]")]
        return authority.rpartition(":")[0] if ":" in authority else authority

    @property
    def port(self) -> int | None:
        """The port of a ``scheme://host:port`` agent, else None."""
        authority = self._authority()
        if authority is None:
            return None
        tail = authority[authority.find("]") + 1 :] if authority.startswith("[") else authority
        _, sep, port = tail.rpartition(":")
        return int(port) if sep and port.isdigit() else None

    def _authority(self) -> str | None:
        if not self.location.startswith("//"):
            return None
        return self.location[2:].split("/", 1)[0]

    def param(self, name: str, default: str | None = None) -> str | None:
        for k, v in self.params:
            if k == name:
                return v
        return default

    def __str__(self) -> str:
        """The agent as a URI, secret params redacted."""
        query = "&".join(f"{k}={v}" for k, v in self.params)  # Pairs: secrets read ***
        # An http:// registry's location may carry user:password@.
        location = redact_value("location", self.location)
        return f"{self.scheme}:{location}" + (f"?{query}" if query else "")

    def __repr__(self) -> str:
        return f"DiscoveryAgent({str(self)!r})"
