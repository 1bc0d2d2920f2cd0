"""A network namespace of its own for multicast tests: nothing reaches the host's interfaces.

Multicast discovery sends to a group on a real interface; a test must not announce brokers to
(or hear brokers of) the network the machine is on. :class:`NetworkNamespace` creates a fresh
namespace with ``ip netns add``, brings its loopback up and gives it one veth pair (``disc0``,
whose peer ``disc1`` sits in the same namespace, so nothing leaves it) with the addresses asked
for, and a multicast route (224.0.0.0/4) on ``disc0`` only. Brokers and clients then run inside
it through :meth:`argv` (``ip netns exec <name> ...``). A veth pair, not a dummy interface: the
dummy driver is a module some kernels (micro-VMs) lack, veth is everywhere namespaces are.

Creating a namespace needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); :func:`netns_missing` says
why it cannot be done here, for a test to skip with that reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence

__all__ = ["INTERFACE", "NetworkNamespace", "netns_missing"]

INTERFACE = "disc0"
"""The namespace's interface that carries the multicast route."""
_PEER = "disc1"
_TIMEOUT = 10.0  # seconds for one `ip` command; it answers in milliseconds


def _ip() -> str | None:
    return shutil.which("ip") or next(
        (p for p in ("/usr/sbin/ip", "/sbin/ip") if os.access(p, os.X_OK)), None
    )


def netns_missing() -> str | None:
    """Why a network namespace cannot be made here, or None when it can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "creating a network namespace needs root (ip netns add)"
    if _ip() is None:
        return "the ip command (iproute2) is not installed"
    return None


class NetworkNamespace:
    """A namespace with loopback and ``disc0`` (``addresses``, /24 each), multicast on ``disc0``.

    Use as a context manager; :meth:`close` deletes the namespace (processes started in it
    must have ended: the harness's brokers are stopped before).
    """

    def __init__(self, addresses: Sequence[str] = ("10.213.0.1",), prefix: str = "fc-disc") -> None:
        ip = _ip()
        reason = netns_missing()
        if reason is not None or ip is None:
            raise RuntimeError(reason or "no ip command")
        self._ip = ip
        self.name = f"{prefix}-{secrets.token_hex(4)}"
        self.addresses = tuple(addresses)
        self._created = False

    def _run(self, *args: str) -> None:
        result = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [self._ip, *args], capture_output=True, text=True, timeout=_TIMEOUT, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")

    def create(self) -> NetworkNamespace:
        """Make the namespace and its interfaces; RuntimeError (with ip's words) on failure."""
        self._run("netns", "add", self.name)
        self._created = True
        try:
            ns = ("-n", self.name)
            self._run(*ns, "link", "set", "lo", "up")
            self._run(*ns, "link", "add", INTERFACE, "type", "veth", "peer", "name", _PEER)
            for address in self.addresses:
                self._run(*ns, "addr", "add", f"{address}/24", "dev", INTERFACE)
            self._run(*ns, "link", "set", _PEER, "up")
            self._run(*ns, "link", "set", INTERFACE, "multicast", "on", "up")
            self._run(*ns, "route", "add", "224.0.0.0/4", "dev", INTERFACE)
        except BaseException:
            self.close()
            raise
        return self

    def argv(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside the namespace."""
        return [self._ip, "netns", "exec", self.name, *command]

    def close(self) -> None:
        """Delete the namespace (its interfaces go with it). Idempotent."""
        if self._created:
            self._created = False
            self._run("netns", "del", self.name)

    def __enter__(self) -> NetworkNamespace:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NetworkNamespace({self.name!r}, {list(self.addresses)})"
