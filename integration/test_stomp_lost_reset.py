"""A lost session resets its connection: the broker frees it even while it reads nothing.

When the heart-beat watchdog gives up a broker that stopped reading (hung, or wedged: its
reader waiting for its own blocked write), the client's frames fill the broker's receive
buffer and the rest waits in the client's socket. A FIN queued behind those bytes never
reaches the broker, which keeps the connection, and refuses the reconnect's client id as
"already connected", until the kernel drops the orphaned socket (about 100 s). The session
ends a lost connection with RST instead, which the broker's kernel takes at once.

The broker here is stopped (SIGSTOP), so nothing but its kernel acts: right after the lost
session is closed, its end of the connection must be gone from the kernel's table, not
ESTABLISHED. The sockets are read from ``/proc`` (Linux).
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from failover_client import BrokerAddress, BrokerUnavailable, FailoverOptions
from failover_client.adapter import Cancel, Received
from failover_client.stomp import StompConnector

if TYPE_CHECKING:
    from failover_client.testing.brokers import Cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp"),
]

SAFETY = 15.0  # seconds; only against a hung test
ESTABLISHED = "01"
BODY = b"x" * 65536
SENDS = 32
"""2 MiB of SEND frames: far more than a stopped broker's receive buffer takes."""


class Lost:
    """A session listener that notes the loss."""

    def __init__(self) -> None:
        self.cause: BaseException | None = None
        self.event = threading.Event()

    def on_message(self, session: Any, message: Received) -> None:
        """Nothing is subscribed."""

    def on_lost(self, session: Any, cause: BaseException) -> None:
        self.cause = cause
        self.event.set()


def _tcp_table() -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every IPv4 TCP socket in the namespace."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        rows.append((int(local.split(":")[1], 16), int(remote.split(":")[1], 16), state, inode))
    return rows


def _own_socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _own_ports_to(port: int) -> set[int]:
    """Local ports of this process's connections to ``port``."""
    own = _own_socket_inodes()
    return {local for local, remote, _, inode in _tcp_table() if remote == port and inode in own}


def _broker_side(broker_port: int, client_port: int) -> list[str]:
    """States of the broker's end of the connection from ``client_port`` (none: gone)."""
    return [
        state
        for local, remote, state, _ in _tcp_table()
        if local == broker_port and remote == client_port
    ]


def test_a_lost_session_resets_a_connection_the_broker_stopped_reading(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    broker = activemq_cluster[0]
    endpoint = broker.endpoint("stomp")
    login, passcode = broker.credentials or (None, None)
    client_id = f"reset-{uuid.uuid4().hex[:8]}"
    connector = StompConnector(
        FailoverOptions(),
        login=login,
        passcode=passcode,
        heartbeat=(1000, 1000),
        client_id=client_id,
    )
    address = BrokerAddress("stomp", endpoint.host, endpoint.port)
    before = _own_ports_to(endpoint.port)
    listener = Lost()
    session = connector.connect(address, timeout=SAFETY, listener=listener, cancel=Cancel())
    (client_port,) = _own_ports_to(endpoint.port) - before
    assert _broker_side(endpoint.port, client_port) == [ESTABLISHED]
    broker.hang()
    try:
        sent = 0
        try:
            for _ in range(SENDS):
                session.send(unique_queue, BODY, {}, None)
                sent += 1
        except BrokerUnavailable:
            pass  # the watchdog gave the broker up while the writer's buffer was full
        assert listener.event.wait(SAFETY)
        assert "presumed hung" in str(listener.cause)
        session.close()  # joins the I/O thread, which closes the socket
        # The broker has not run since: only its kernel saw the RST. After a FIN it would
        # still be ESTABLISHED, the FIN stuck behind the bytes it has no room for.
        assert _broker_side(endpoint.port, client_port) == []
        print(f"\n{sent} sends of {len(BODY)} bytes written before the loss")
    finally:
        broker.resume()
    # Once it runs again, the broker drops the connection it was reset out of (its reader
    # sees the reset) and takes the client id again: a CONNECT that came first is refused
    # as "already connected", so a few are tried, as the reconnect loop would.
    refusals: list[str] = []
    pause = threading.Event()
    while True:
        try:
            second = connector.connect(address, timeout=SAFETY, listener=Lost(), cancel=Cancel())
        except BrokerUnavailable as exc:
            refusals.append(str(exc))
            if len(refusals) == 50:
                raise
            pause.wait(0.1)
            continue
        break
    print(f"{len(refusals)} reconnects refused before the broker freed the client id")
    assert all("already connected" in refusal for refusal in refusals)
    try:
        assert second.is_open
    finally:
        second.close()
