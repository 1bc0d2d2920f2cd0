"""Brokers an AMQP 1.0 broker names on the data connection, read as untrusted input.

Two shapes arrive:

* the ``failover-server-list`` connection property of the broker's open frame, a list of maps.
  Artemis sends ``{network-host, hostname, port, scheme}`` with an int port, naming the HA
  backup of the node the client is on; Qpid Dispatch and skupper routers send their listener's
  configured list with the port as a string, the scheme optional and no hostname;
* the info map of an ``amqp:connection:redirect`` error condition (Artemis connection routers
  send ``{network-host, port}``; scheme and hostname are optional).

Keys arrive as AMQP symbols or strings; a proton ``symbol`` is a ``str``, so both read alike.
An entry that cannot be used is logged (its index and what is wrong, with bad values shortened
and anything before an ``@`` masked) and skipped, so one bad entry does not hide the others.
At most :data:`MAX_ENTRIES` entries are read.

An entry names a broker and nothing more: the address built from it carries a scheme, a host and
a port, never credentials or options, whatever else the map holds (a broker must not change how
the client behaves; the pool gives discovered brokers the seeds' credentials). Without a scheme
an entry takes the current broker's. A plain ``amqp`` entry seen over TLS keeps its own scheme
and is logged: the pool's merge decides what to make of it (it keeps a broker it knows as TLS on
TLS, and upgrades plain entries when every seed uses TLS).

``hostname`` (the virtual host and TLS server name the broker wants) is checked like a host but
not kept: a :class:`~failover_client.uri.BrokerAddress` has no place for it and the pool drops
options, so a connection to an advertised broker names its network host.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from failover_client._hosts import HostError, check_host, kind, shown_value
from failover_client.uri import BrokerAddress

__all__ = ["MAX_ENTRIES", "parse_redirect", "parse_server_list"]

_log = logging.getLogger("failover_client.amqp")

MAX_ENTRIES = 64
"""Entries read from one ``failover-server-list``; the rest is logged and ignored."""

_NETWORK_HOST = "network-host"
_HOSTNAME = "hostname"
_PORT = "port"
_SCHEME = "scheme"
_SCHEMES = ("amqp", "amqps")

_MAX_PORT_TEXT = 5


class _Unusable(ValueError):
    """Why an entry cannot be used; its text is safe to log."""


def parse_server_list(value: object, *, current: BrokerAddress) -> tuple[BrokerAddress, ...]:
    """The brokers of a ``failover-server-list`` property, in the order the broker sent them.

    ``current`` is the broker whose open frame carried the list: entries without a scheme take
    its scheme. Unusable entries are logged and skipped; a value that is not a list yields ().
    """
    if not isinstance(value, list | tuple):
        _log.warning("failover-server-list ignored: not a list but %s", kind(value))
        return ()
    if len(value) > MAX_ENTRIES:
        _log.warning(
            "failover-server-list has %d entries: reading the first %d, ignoring the rest",
            len(value),
            MAX_ENTRIES,
        )
    brokers = []
    for index, entry in enumerate(value[:MAX_ENTRIES]):
        try:
            address = _address(entry, current)
        except _Unusable as exc:
            _log.warning("failover-server-list entry %d skipped: %s", index, exc)
            continue
        if current.tls and not address.tls:
            _log.warning(
                "failover-server-list entry %d names plain %s for %s while this connection uses"
                " TLS; the broker pool decides whether it stays plain",
                index,
                address.scheme,
                address.authority,
            )
        brokers.append(address)
    return tuple(brokers)


def parse_redirect(info: object, *, current: BrokerAddress) -> BrokerAddress | None:
    """Where an ``amqp:connection:redirect`` condition's ``info`` map sends the client.

    None (logged) when the map is missing or unusable. Without a scheme the redirect keeps
    ``current``'s.
    """
    try:
        address = _address(info, current)
    except _Unusable as exc:
        _log.warning("amqp:connection:redirect not followed: %s", exc)
        return None
    if current.tls and not address.tls:
        _log.warning(
            "amqp:connection:redirect names plain %s for %s while this connection uses TLS;"
            " the broker pool decides whether it stays plain",
            address.scheme,
            address.authority,
        )
    return address


def _address(entry: object, current: BrokerAddress) -> BrokerAddress:
    if not isinstance(entry, Mapping):
        raise _Unusable(f"not a map but {kind(entry)}")
    host = _host(entry.get(_NETWORK_HOST), _NETWORK_HOST)
    port = _port(entry.get(_PORT))
    scheme = _scheme(entry.get(_SCHEME), current)
    hostname = entry.get(_HOSTNAME)
    if hostname is not None and hostname != "":
        _host(hostname, _HOSTNAME)
    # Scheme, host and port only: nothing else of the entry or of ``current`` comes along.
    return BrokerAddress(scheme, host, port)


def _host(value: object, name: str) -> str:
    # The library's one rule for a pushed host (the pool's merge applies it too).
    try:
        return check_host(value, name)
    except HostError as exc:
        raise _Unusable(str(exc)) from None


def _port(value: object) -> int:
    if value is None:
        raise _Unusable("no port")
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Unusable(f"port is {kind(value)}, not a number")
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit() and len(value) <= _MAX_PORT_TEXT):
            raise _Unusable(f"port {shown_value(value)} is not a number")
        number = int(value)
    else:
        number = int(value)  # proton's ulong, uint, ushort... are ints
    if not 1 <= number <= 65535:
        raise _Unusable(f"port {shown_value(number)} is out of range 1-65535")
    return number


def _scheme(value: object, current: BrokerAddress) -> str:
    if value is None:
        return current.scheme
    if not isinstance(value, str):
        raise _Unusable(f"scheme is {kind(value)}, not a string")
    scheme = value.lower() if len(value) <= len("amqps") else value
    if scheme not in _SCHEMES:
        raise _Unusable(f"unknown scheme {shown_value(value)} (known: {', '.join(_SCHEMES)})")
    return str(scheme)
