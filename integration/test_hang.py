"""hang() = SIGSTOP: a connected client hears nothing and is not disconnected; resume() ends it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import stomp

from failover_client.testing.brokers import Cluster, stomp_connected, tcp_accepts

pytestmark = pytest.mark.integration

# How long "nothing arrives" is watched for. Not a performance bound: on a healthy loopback
# broker a receipt takes milliseconds, so silence for this long means the broker is stopped.
SILENCE = 1.5


class Recorder(stomp.ConnectionListener):  # type: ignore[misc]  # untyped base class
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.bodies: list[bytes] = []
        self.disconnects = 0

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.bodies.append(frame.body)
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            self.disconnects += 1
            self.cond.notify_all()

    def wait(self, receipt: str, body: bytes, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(
                lambda: receipt in self.receipts and body in self.bodies, timeout
            )


def test_hang_silences_a_connected_client_without_disconnect(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    broker = activemq_cluster[0]
    ep = broker.endpoint("stomp")
    recorder = Recorder()
    conn = stomp.Connection12([(ep.host, ep.port)], heartbeats=(0, 0), auto_decode=False)
    conn.set_listener("recorder", recorder)
    conn.connect(wait=True)
    try:
        conn.subscribe(unique_queue, id="1", ack="auto")
        conn.send(unique_queue, "before", receipt="r-before")
        assert recorder.wait("r-before", b"before", timeout=10)

        broker.hang()

        conn.send(unique_queue, "during", receipt="r-during")  # lands in the socket buffer
        assert not recorder.wait("r-during", b"during", timeout=SILENCE)
        assert recorder.disconnects == 0
        assert conn.is_connected()
        # A new client still completes TCP (the kernel's backlog) but gets no STOMP answer.
        assert tcp_accepts(ep.host, ep.port)
        assert not stomp_connected(ep.host, ep.port, timeout=SILENCE)

        broker.resume()

        assert recorder.wait("r-during", b"during", timeout=10)
        assert recorder.disconnects == 0
        assert broker.is_up()
    finally:
        if broker.hung:
            broker.resume()  # else DISCONNECT would wait on a stopped broker
        conn.disconnect()
