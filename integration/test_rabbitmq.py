"""The harness's RabbitMQ pair answers STOMP and AMQP 1.0, and survives kill + restart."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import stomp
from proton import Message
from proton.utils import BlockingConnection

from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration


class _Inbox(stomp.ConnectionListener):  # type: ignore[misc]  # untyped base class
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.bodies: list[bytes] = []

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.bodies.append(frame.body)
            self.cond.notify_all()

    def wait_for_one(self, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: bool(self.bodies), timeout)


def test_each_node_answers_raw_stomp(rabbitmq_cluster: Cluster, unique_queue: str) -> None:
    for broker in rabbitmq_cluster:
        ep = broker.endpoint("stomp")
        inbox = _Inbox()
        conn = stomp.Connection12([(ep.host, ep.port)], auto_decode=False, vhost="/")
        conn.set_listener("inbox", inbox)
        conn.connect("guest", "guest", wait=True)
        try:
            # A subscriber first: then the queue exists before the SEND (see BROKERS.md).
            conn.subscribe(unique_queue, id="1", ack="auto")
            conn.send(unique_queue, f"hello {broker.name}", receipt="r1")
            assert inbox.wait_for_one(timeout=10)
            assert inbox.bodies == [f"hello {broker.name}".encode()]
        finally:
            conn.disconnect()


def test_each_node_answers_raw_amqp_1_0(rabbitmq_cluster: Cluster, unique_queue: str) -> None:
    name = unique_queue.removeprefix("/queue/")
    for broker in rabbitmq_cluster:
        broker.declare_queue(name)  # type: ignore[attr-defined]  # RabbitMQ brokers have it
        conn = BlockingConnection(
            broker.uri("amqp"), timeout=10, user="guest", password="guest", allowed_mechs="PLAIN"
        )
        try:
            assert conn.conn is not None
            assert conn.conn.remote_properties["product"] == "RabbitMQ"
            sender = conn.create_sender(f"/amq/queue/{name}")
            sender.send(Message(body=f"amqp {broker.name}", durable=True))  # waits for acceptance
            receiver = conn.create_receiver(f"/amq/queue/{name}")
            message = receiver.receive(timeout=10)
            receiver.accept()
            assert message.body == f"amqp {broker.name}"
        finally:
            conn.close()


def test_killed_node_keeps_durable_messages(rabbitmq_cluster: Cluster, unique_queue: str) -> None:
    victim, other = rabbitmq_cluster
    # One queue per protocol: RabbitMQ hands AMQP-published messages to STOMP as AMQP bytes.
    stomp_queue, amqp_queue = unique_queue, unique_queue + "-amqp"
    victim.send(stomp_queue, ["one", "two", "three"], persistent=True)
    victim.send(amqp_queue, ["a1", "a2"], protocol="amqp", persistent=True)
    # The queues were declared just now: make their definitions durable before the SIGKILL.
    victim.sync_definitions()  # type: ignore[attr-defined]

    victim.kill()
    assert not victim.running()
    assert other.is_up()
    victim.start()

    assert sorted(m.text for m in victim.drain(stomp_queue, expect=3)) == ["one", "three", "two"]
    amqp = victim.drain(amqp_queue, expect=2, protocol="amqp")
    assert sorted(m.text for m in amqp) == ["a1", "a2"]
