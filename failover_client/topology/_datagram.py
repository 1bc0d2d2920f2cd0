"""The one socket the discovery sources read: a member of an IPv4 multicast group, listen-only.

Kept thin on purpose: it joins a group, hands out one datagram at a time with a deadline, and
can be woken from another thread. Everything else (what a packet means, who is alive) is pure
code above it, tested with :class:`Datagrams` instances of its own (``receive`` / ``close``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import selectors
import socket
import struct
import sys
import threading
from typing import Protocol

from failover_client._errors import ConfigurationError

__all__ = ["MAX_DATAGRAM", "Datagrams", "MulticastSocket", "group_address"]

MAX_DATAGRAM = 65535
"""Largest UDP payload; a longer read is impossible, so nothing is ever cut."""


class Datagrams(Protocol):
    """Where a discovery source reads its packets from (a joined group, or a test's queue)."""

    def receive(self, timeout: float) -> bytes | None:
        """The next datagram, or None once ``timeout`` seconds passed or :meth:`close` woke it."""

    def close(self) -> None:
        """Leave the group and wake a :meth:`receive` in progress. Idempotent, any thread."""


def group_address(text: str, where: str) -> str:
    """``text`` as an IPv4 multicast address; ConfigurationError naming ``where`` if not."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        address = None
    if not isinstance(address, ipaddress.IPv4Address) or not address.is_multicast:
        raise ConfigurationError(
            f"{where}: {text!r} is not an IPv4 multicast group address (224.0.0.0-239.255.255.255)"
        )
    return str(address)


class MulticastSocket:
    """A UDP socket bound to ``port`` that joined ``group``; receives only.

    ``interface_address`` (an IPv4 address of this host) or ``interface_name`` (``eth0``) picks
    the interface the membership is on; neither: the one the routing table gives the group.
    The port is shared (``SO_REUSEADDR``/``SO_REUSEPORT``) with every other listener on this
    host, brokers included, as the Java agents share it.
    """

    def __init__(
        self,
        group: str,
        port: int,
        *,
        interface_address: str | None = None,
        interface_name: str | None = None,
    ) -> None:
        self._closed = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            # Bound to the group itself (Linux): datagrams of other groups on this port are
            # not ours. Elsewhere binding to a group address fails; the wildcard serves.
            self._sock.bind((group if sys.platform.startswith("linux") else "", port))
            self._sock.setsockopt(
                socket.IPPROTO_IP,
                socket.IP_ADD_MEMBERSHIP,
                _membership(group, interface_address, interface_name),
            )
            self._sock.setblocking(False)
        except BaseException:
            self._sock.close()
            raise
        # close() from another thread must end a receive at once: a socket pair wakes select.
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()

    def receive(self, timeout: float) -> bytes | None:
        """One datagram, or None after ``timeout`` seconds or once closed."""
        if self._closed.is_set():
            return None
        with self._lock:
            if self._closed.is_set():
                return None
            ready = self._selector.select(max(timeout, 0.0))  # ends by the timeout or close()
            if self._closed.is_set() or not any(key.fileobj is self._sock for key, _ in ready):
                return None
            try:
                return self._sock.recv(MAX_DATAGRAM)
            except BlockingIOError:
                return None  # select said readable, another reader (none here) took it

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")  # a full pair means a wake-up is already pending
        with self._lock:  # the receive in progress has returned
            self._selector.close()
            for sock in (self._sock, self._wake_r, self._wake_w):
                sock.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed.is_set() else "open"
        return f"MulticastSocket({state})"


_ANY = bytes(4)
"""INADDR_ANY in a membership request: the kernel picks the interface (not a bind)."""


def _membership(group: str, address: str | None, name: str | None) -> bytes:
    """``ip_mreq`` (by address) or ``ip_mreqn`` (by interface index) for IP_ADD_MEMBERSHIP."""
    if name is not None:
        try:
            index = socket.if_nametoindex(name)
        except OSError:
            raise ConfigurationError(
                f"network interface {name!r} does not exist on this host"
            ) from None
        return struct.pack("=4s4si", socket.inet_aton(group), _ANY, index)
    local = socket.inet_aton(address) if address else _ANY
    return struct.pack("=4s4s", socket.inet_aton(group), local)
