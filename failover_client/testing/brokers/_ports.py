"""Loopback ports for brokers, taken from a fixed block below the ephemeral range.

Why not ``bind(0)``: such ports come from the ephemeral range (32768-60999 on Linux), so a port
freed by a killed broker can be handed to some client as its *source* port before the broker is
restarted, and the restart then fails. Ports below 32768 are never picked by the kernel for
outgoing connections.

Why an offset by pid: two test runs on one machine (two checkouts, or pytest-xdist workers)
then start in different slices of the block and rarely even probe the same ports. A port that
something else already holds is skipped; the probe binds without ``SO_REUSEADDR`` so ports in
TIME_WAIT are skipped too.
"""

from __future__ import annotations

import os
import socket
import threading

__all__ = ["PortAllocator", "allocate_ports"]

BLOCK_START = 20000
BLOCK_END = 32000  # exclusive; stays below the default ip_local_port_range (32768)
SLICE = 200


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    """Hands out ports from [start, end) that this process has not handed out before."""

    def __init__(
        self,
        start: int = BLOCK_START,
        end: int = BLOCK_END,
        offset: int | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if not 1024 <= start < end <= 65536:
            raise ValueError(f"port block [{start}, {end}) is not a range of unprivileged ports")
        size = end - start
        slices = max(1, size // SLICE)
        first = offset if offset is not None else (os.getpid() % slices) * SLICE
        self._start = start
        self._size = size
        self._next = first % size
        self._host = host
        self._given: set[int] = set()
        self._lock = threading.Lock()

    def take(self, count: int) -> list[int]:
        """Return ``count`` distinct ports that were free when probed."""
        ports: list[int] = []
        with self._lock:
            for _ in range(self._size):
                if len(ports) == count:
                    return ports
                port = self._start + self._next
                self._next = (self._next + 1) % self._size
                if port not in self._given and _port_is_free(self._host, port):
                    self._given.add(port)
                    ports.append(port)
            if len(ports) == count:
                return ports
        raise RuntimeError(
            f"no {count} free ports left in [{self._start}, {self._start + self._size})"
        )

    def __repr__(self) -> str:
        return f"PortAllocator(next={self._start + self._next}, given={len(self._given)})"


_default = PortAllocator()


def allocate_ports(count: int) -> list[int]:
    """Ports from the process-wide allocator (every broker of this process shares it)."""
    return _default.take(count)
