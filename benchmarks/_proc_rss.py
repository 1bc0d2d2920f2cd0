"""Memory of this process's descendants that talk to a given TCP port, read from /proc (Linux).

The Spark source's driver side runs in a Python worker Spark starts under its JVM (a
descendant of the benchmark's process); of those workers it is the one with a connection to
the broker: executors' tasks only read spool files. :func:`clients_of` finds it by the
socket inodes in ``/proc/<pid>/fd`` and the remote ports in ``/proc/net/tcp``;
:func:`memory` reads its resident set now and at its peak (``VmRSS``, ``VmHWM``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["clients_of", "descendants", "memory"]

_PROC = Path("/proc")


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _inodes_to(port: int) -> set[str]:
    """Socket inodes of IPv4/IPv6 TCP connections whose remote port is ``port``."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if int(parts[2].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    return inodes


def clients_of(port: int, root: int | None = None) -> list[int]:
    """Descendants of ``root`` (default: this process) with a TCP connection to ``port``."""
    wanted = _inodes_to(port)
    found: list[int] = []
    for pid in descendants(os.getpid() if root is None else root):
        try:
            links = [os.readlink(fd) for fd in (_PROC / str(pid) / "fd").iterdir()]
        except OSError:
            continue  # ended, or not ours to read
        if any(link.startswith("socket:[") and link[8:-1] in wanted for link in links):
            found.append(pid)
    return found


def memory(pid: int) -> dict[str, int]:
    """``rss`` and ``peak_rss`` (bytes) of ``pid``; empty if it ended."""
    try:
        status = (_PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return {}
    values: dict[str, int] = {}
    for line in status:
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values["rss" if key == "VmRSS" else "peak_rss"] = int(rest.split()[0]) * 1024
    return values
