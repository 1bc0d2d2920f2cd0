"""The AMQP 1.0 adapter passes the adapter contract suite on real RabbitMQ nodes.

A node is held (SIGSTOP) so sends stay unconfirmed, and killed (SIGKILL) under a live session;
the shared cluster is healed before the next test. RabbitMQ's AMQP 1.0 plugin routes
``/amq/queue/<name>`` to an existing queue (an unknown one drops the message, and refuses a
subscription), so every test's queue is declared durable first.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from failover_client import BrokerAddress, FailoverOptions
from failover_client.adapter import Session, SubscriptionSpec
from failover_client.amqp import AmqpConnector
from failover_client.testing.contract import AdapterContract, ContractTarget
from integration.test_failover_common import durable_queue, queue_name

if TYPE_CHECKING:
    from failover_client.testing.brokers import Broker, Cluster

pytestmark = pytest.mark.integration


def amqp_target(broker: Broker, destination: str) -> ContractTarget:
    endpoint = broker.endpoint("amqp")
    login, passcode = broker.credentials or (None, None)

    @contextlib.contextmanager
    def held(session: Session) -> Iterator[None]:
        broker.hang()
        try:
            yield
        finally:
            if broker.hung:  # a kill ends the hang by itself
                broker.resume()

    return ContractTarget(
        # No idle timeout: a held broker must not be declared hung before the test kills it.
        connector=AmqpConnector(
            FailoverOptions(), login=login, passcode=passcode, heartbeat=(0, 0), close_timeout=0.5
        ),
        address=BrokerAddress(endpoint.scheme, endpoint.host, endpoint.port),
        destination=destination,
        kill_broker=lambda session: broker.kill(),
        hold_confirmations=held,
        publish=lambda dest, body: broker.send(
            f"/queue/{queue_name(dest)}", [body], protocol="amqp"
        ),
        # RabbitMQ refuses a source naming a queue that does not exist.
        refused_subscription=SubscriptionSpec(
            "contract-refused", f"/amq/queue/missing-{uuid.uuid4().hex[:12]}"
        ),
    )


class TestAmqpOnRabbitMQ(AdapterContract):
    @pytest.fixture
    def contract_target(self, rabbitmq_cluster: Cluster) -> ContractTarget:
        queue = queue_name(durable_queue(rabbitmq_cluster))
        return amqp_target(rabbitmq_cluster[0], f"/amq/queue/{queue}")
