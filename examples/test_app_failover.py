"""Test your own application's failover against real brokers: kill the one it is on.

The broker fixtures ship with failover-client and are switched on per run (or per project,
with ``failover_brokers = true`` in the pytest ini section)::

    pip install 'failover-client[brokers]'
    pytest --failover-brokers examples/test_app_failover.py

``activemq_cluster`` is three ActiveMQ Classic brokers on loopback ports, started once per
session and healed before each test, so a test may leave a broker dead. ``unique_queue`` is a
queue name no other test uses.
"""

from __future__ import annotations

import threading

from failover_client import FailoverConnection
from failover_client.testing.brokers import Cluster

ORDERS = 200


class OrderService:
    """Stands in for the application under test: it sends each order through one connection."""

    def __init__(self, uri: str, destination: str) -> None:
        self.connection = FailoverConnection(uri)
        self.destination = destination
        self.confirmed: list[int] = []
        self.halfway = threading.Event()

    def place_orders(self, count: int) -> None:
        """Send ``count`` orders; each ``send`` returns once a broker has confirmed it."""
        for n in range(count):
            self.connection.send(self.destination, f"order {n}")
            self.confirmed.append(n)
            if n == count // 4:
                self.halfway.set()


def test_orders_are_confirmed_while_the_broker_dies(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    # Short reconnect delays; a fixed order so the first broker is the one in use.
    uri = activemq_cluster.failover_uri(options={"randomize": False, "initialReconnectDelay": 10})
    service = OrderService(uri, unique_queue)
    with service.connection:
        worker = threading.Thread(target=service.place_orders, args=(ORDERS,))
        worker.start()
        assert service.halfway.wait(timeout=30), "no order confirmed"
        victim = activemq_cluster.broker_at(service.connection.broker)
        victim.kill()  # SIGKILL: no goodbye to the client
        worker.join(timeout=60)
        assert not worker.is_alive(), "the sends did not finish after the kill"
        survivor = activemq_cluster.broker_at(service.connection.broker)
    assert survivor is not victim
    assert service.confirmed == list(range(ORDERS))
    # Every confirmed order is on a broker: the dead one kept its share on disk.
    victim.start()
    stored = {m.text for broker in activemq_cluster for m in broker.drain(unique_queue)}
    assert stored >= {f"order {n}" for n in range(ORDERS)}
