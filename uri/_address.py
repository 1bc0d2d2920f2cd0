"""One broker address (a member of a failover URI)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ._redact import MASK, Pairs, is_secret_key

__all__ = ["DEFAULT_PORTS", "SCHEMES", "BrokerAddress", "Protocol", "broker_key"]

Protocol = Literal["stomp", "amqp", "openwire"]

# scheme -> (wire protocol, TLS?)
SCHEMES: dict[str, tuple[Protocol, bool]] = {
    "tcp": ("openwire", False),
    "nio": ("openwire", False),
    "ssl": ("openwire", True),
    "nio+ssl": ("openwire", True),
    "stomp": ("stomp", False),
    "stomp+nio": ("stomp", False),
    "stomp+ssl": ("stomp", True),
    "stomp+nio+ssl": ("stomp", True),
    "amqp": ("amqp", False),
    "amqps": ("amqp", True),
    "amqp+ssl": ("amqp", True),
    "amqp+nio": ("amqp", False),
}

DEFAULT_PORTS: dict[Protocol, tuple[int, int]] = {
    # protocol -> (plain port, TLS port), the brokers' shipped defaults
    "openwire": (61616, 61617),
    "stomp": (61613, 61612),
    "amqp": (5672, 5671),
}


@dataclass(frozen=True)
class BrokerAddress:
    """A broker member: scheme, host, port, optional credentials and the member's own options.

    ``host`` holds IPv6 literals without brackets. The password never appears in ``str()`` or
    ``repr()``. ``params`` are the member's own query options after ``nested.*`` / shared defaults
    were applied, as (name, value) pairs in a stable order, secret values shown as ``***``
    (:meth:`secret_param` and ``params.reveal()`` give them in clear).
    """

    scheme: str
    host: str
    port: int
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    params: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.params, Pairs):
            object.__setattr__(self, "params", Pairs(self.params))

    @property
    def protocol(self) -> Protocol:
        return SCHEMES[self.scheme][0]

    @property
    def tls(self) -> bool:
        return SCHEMES[self.scheme][1]

    @property
    def key(self) -> str:
        """``host:port`` identity used by the pool, priority lists and pushed updates.

        DNS names compare without case and IPv6 literals in their compressed form, as the
        resolver sees them: ``Broker1`` and ``broker1`` are one broker, or a priority list that
        names it in another case silently matches nothing.
        """
        return broker_key(self.host, self.port)

    @property
    def authority(self) -> str:
        """``host:port`` as written (IPv6 in brackets), for formatting the address back."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def param(self, name: str, default: str | None = None) -> str | None:
        for k, v in self.params:
            if k == name:
                return v
        return default

    def secret_param(self, name: str, default: str | None = None) -> str | None:
        """The clear value of secret param ``name`` (e.g. ``trustStorePassword``); never log it."""
        return Pairs(self.params).secret(name, default)

    @property
    def secret_params(self) -> tuple[str, ...]:
        """Names of the member's params whose values are secrets (never printed)."""
        return tuple(k for k, _ in self.params if is_secret_key(k))

    def __str__(self) -> str:
        """The member as a URI, password and secret params redacted."""
        userinfo = ""
        if self.user is not None:
            userinfo = self.user + (f":{MASK}" if self.password is not None else "") + "@"
        query = "&".join(f"{k}={MASK if is_secret_key(k) else v}" for k, v in self.params)
        return f"{self.scheme}://{userinfo}{self.authority}" + (f"?{query}" if query else "")

    def __repr__(self) -> str:
        # The generated repr would print secret params (e.g. ``keyStorePassword``) verbatim.
        return f"BrokerAddress({str(self)!r})"


@lru_cache(maxsize=1024)
def broker_key(host: str, port: int) -> str:
    """The ``host:port`` key of a broker, as :attr:`BrokerAddress.key` spells it.

    For keys a user writes by hand (``tiers={"Broker1:61613": 0}``), so they match the pool's.
    """
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return f"{_host_key(host)}:{port}"


def _host_key(host: str) -> str:
    if ":" not in host:
        return host.lower()
    literal, sep, zone = host.partition("%")
    try:
        literal = ipaddress.IPv6Address(literal).compressed
    except ValueError:
        literal = literal.lower()  # built by hand, not parsed: still one spelling per address
    return f"[{literal}{sep}{zone}]"
