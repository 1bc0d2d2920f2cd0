"""Who holds a listening port: the proof that a broker that answers is the one we started.

A protocol answer on a port proves only that *some* broker listens there. Ports come back into
use: a broker of this run is killed, its port is free for a moment, and the harness of another
run (a second checkout, a crashed session's leftovers restarted by hand) starts its broker on
it. Our restart then cannot bind, yet the stranger answers every probe, and a test would go on
talking to a broker it does not control. So a broker is ready only when every port it is meant
to listen on is held by its own process group.

On Linux the kernel lists each listening TCP socket with its inode in ``/proc/net/tcp`` and
``/proc/net/tcp6``, and ``/proc/<pid>/fd`` links name the socket inodes a process holds
(``socket:[12345]``). Where there is no ``/proc`` the answer is :attr:`PortState.UNKNOWN` and
callers fall back to the protocol probe alone.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROC", "Ownership", "PortState", "parse_listeners", "port_owner"]

PROC = Path("/proc")

_TCP_LISTEN = "0A"  # st column of /proc/net/tcp: TCP_LISTEN
_SOCKET_LINK = re.compile(r"socket:\[(\d+)\]")


class PortState(enum.Enum):
    FREE = "free"  # nothing listens on the port yet
    OURS = "ours"  # every listener on it belongs to the given processes
    FOREIGN = "foreign"  # some other process listens on it
    UNKNOWN = "unknown"  # this system has no /proc/net/tcp to ask


@dataclass(frozen=True)
class Ownership:
    """What :func:`port_owner` found; ``holder`` describes a foreign holder."""

    port: int
    state: PortState
    holder: str = ""


def parse_listeners(table: str) -> dict[int, set[int]]:
    """Port -> inodes of the listening sockets in one ``/proc/net/tcp{,6}`` table."""
    listeners: dict[int, set[int]] = {}
    for line in table.splitlines()[1:]:  # the first line names the columns
        fields = line.split()
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        port = int(fields[1].rsplit(":", 1)[1], 16)
        listeners.setdefault(port, set()).add(int(fields[9]))
    return listeners


def _listening_inodes(port: int, proc: Path) -> set[int] | None:
    """Inodes listening on ``port`` (any address), or None when the tables are missing."""
    found: set[int] = set()
    tables = 0
    for name in ("tcp", "tcp6"):
        try:
            table = (proc / "net" / name).read_text()
        except FileNotFoundError:
            continue  # a kernel without IPv6 has no tcp6
        except OSError:
            return None
        tables += 1
        found |= parse_listeners(table).get(port, set())
    return found if tables else None


def _socket_inodes(pid: int, proc: Path) -> set[int]:
    """Socket inodes held by ``pid`` (empty when it is gone or not ours to inspect)."""
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    inodes = set()
    for name in names:
        try:
            match = _SOCKET_LINK.fullmatch(os.readlink(fd_dir / name))
        except OSError:
            continue  # closed while we looked
        if match:
            inodes.add(int(match.group(1)))
    return inodes


def _describe(pid: int, proc: Path) -> str:
    """``pid 123 (java ... Main start)``: enough for a person to find the process."""
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        command = " ".join(a.decode(errors="replace") for a in argv if a)
    except OSError:
        command = ""
    if len(command) > 160:
        command = command[:157] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _holder_of(inodes: set[int], proc: Path) -> str:
    """Describe the process that holds one of ``inodes``, searching every process."""
    for entry in proc.iterdir():
        if entry.name.isdigit() and _socket_inodes(int(entry.name), proc) & inodes:
            return _describe(int(entry.name), proc)
    # Another user's process: its fd directory is not readable by us.
    return "a process this user cannot inspect (another user's?)"


def port_owner(port: int, pids: Iterable[int], proc: Path = PROC) -> Ownership:
    """Whether the listeners on ``port`` belong to ``pids`` (a broker's process group).

    Any listener that none of ``pids`` holds makes the port FOREIGN, even beside one of ours:
    a second listener (``SO_REUSEPORT``) would take a share of the connections meant for ours.
    """
    listening = _listening_inodes(port, proc)
    if listening is None:
        return Ownership(port, PortState.UNKNOWN)
    if not listening:
        return Ownership(port, PortState.FREE)
    ours: set[int] = set()
    for pid in pids:
        ours |= _socket_inodes(pid, proc)
    strangers = listening - ours
    if not strangers:
        return Ownership(port, PortState.OURS)
    return Ownership(port, PortState.FOREIGN, _holder_of(strangers, proc))
