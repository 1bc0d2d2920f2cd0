"""Hosts that peers advertise: one set of rules for every path a pushed broker takes.

At the bottom of the layers, so the AMQP adapter (which may not import the engine), the
topology sources and the pool's merge all check hosts with this one function.

Brokers arrive from untrusted places (an advisory's ``brokerURL``, an SRV target, an AMQP
``failover-server-list``, a file, a URL). Each used to be checked by its own rules; now
:func:`check_host` is the one rule every source and the pool's merge apply:

* a text of 1-253 characters (an IPv6 literal may stand in brackets);
* no ``@``: what stands before one may be credentials, so it is neither a host nor shown;
* an IP literal that a client can reach: not the unspecified address (where a broker
  *listens*, ``0.0.0.0`` / ``::``) and not a multicast group; an IPv6 literal may carry a zone
  (``fe80::1%eth0``);
* otherwise a DNS name: dot-separated labels of 1-63 letters, digits, ``-`` and ``_`` (ActiveMQ
  hosts sometimes carry one), not starting with ``-``, with an optional final dot.

:func:`shown_list` bounds how much of a long list a log line or an error message shows, so a
push of 10,000 brokers costs one short line, not 400 KB.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

__all__ = ["HostError", "check_host", "kind", "shown_list", "shown_value"]

MAX_HOST = 253
"""The longest DNS name."""

_LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,62}", re.ASCII)
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
_SAFE = re.compile(r"[A-Za-z0-9._:%*@\[\]-]*", re.ASCII)
_SHOWN = 40


class HostError(ValueError):
    """A host that cannot be used; its text is safe to log (shortened, user info masked)."""


def check_host(value: object, what: str = "host") -> str:
    """``value`` as a host to connect to (brackets and a final dot removed), or HostError.

    ``what`` names the value in the message (``brokerURL host``, ``network-host``...).
    """
    if value is None:
        raise HostError(f"no {what}")
    if not isinstance(value, str):
        raise HostError(f"{what} is not a string but {kind(value)}")
    if not value:
        raise HostError(f"{what} is empty")
    if len(value) > MAX_HOST + 2:  # room for the brackets of an IPv6 literal
        raise HostError(f"{what} is too long ({len(value)} characters)")
    if "@" in value:
        raise HostError(f"{what} {shown_value(value)} holds an '@' (user info is not a host)")
    literal = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    if ":" in literal:
        return _ipv6(literal, value, what)
    try:
        ip = ipaddress.IPv4Address(literal)
    except ValueError:
        name = literal[:-1] if literal.endswith(".") else literal
        if len(name) > MAX_HOST or not all(_LABEL.fullmatch(p) for p in name.split(".")):
            raise HostError(f"{what} {shown_value(value)} is not a host name") from None
        return name
    _reachable(ip, value, what)
    return literal


def _ipv6(literal: str, value: str, what: str) -> str:
    address, percent, zone = literal.partition("%")
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        raise HostError(f"{what} {shown_value(value)} is not an IPv6 address") from None
    if percent and not _ZONE.fullmatch(zone):
        raise HostError(f"{what} {shown_value(value)} has a bad IPv6 zone")
    _reachable(ip, value, what)
    return literal


def _reachable(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, value: str, what: str) -> None:
    # An unspecified address is where a broker listens, never where a client can reach it.
    if ip.is_unspecified:
        raise HostError(f"{what} {value} is the wildcard address, not a broker")
    if ip.is_multicast:
        raise HostError(f"{what} {value} is a multicast group, not a broker")


def kind(value: object) -> str:
    """A value's type, for a log line: never the value itself (``an int``, ``nothing``)."""
    if value is None:
        return "nothing"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def shown_value(value: object) -> str:
    """A bad value for a log line: user info masked, cut at the first character that cannot
    be part of a host (a query may follow), at most 40 characters."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return kind(value)
    if isinstance(value, int):
        # A huge int costs time to print (and Python refuses past 4300 digits).
        return str(value) if -(10**9) < value < 10**9 else "a very large number"
    text = value
    if "@" in text:
        text = "***@" + text.rpartition("@")[2]
    safe = _SAFE.match(text)
    cut = min(safe.end() + 1 if safe else 0, _SHOWN)
    return repr(text[:cut]) + ("..." if len(text) > cut else "")


def shown_list(items: Iterable[object], limit: int = 8, *, sep: str = ", ") -> str:
    """``a, b, c and 9,997 more``: at most ``limit`` items of a list, and how many were left."""
    shown: list[str] = []
    rest = 0
    for item in items:
        if len(shown) < limit:
            shown.append(str(item))
        else:
            rest += 1
    text = sep.join(shown)
    return f"{text} and {rest:,} more" if rest else text
