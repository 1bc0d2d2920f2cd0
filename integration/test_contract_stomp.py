"""The STOMP adapter passes the adapter contract suite on real ActiveMQ and RabbitMQ brokers.

A broker is held (SIGSTOP) so sends stay unconfirmed, and killed (SIGKILL) under a live
session; the shared clusters are healed before the next test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from failover_client import BrokerAddress, FailoverOptions
from failover_client.adapter import Session, SubscriptionSpec
from failover_client.stomp import StompConnector
from failover_client.testing.contract import AdapterContract, ContractTarget

if TYPE_CHECKING:
    from failover_client.testing.brokers import Broker, Cluster

pytestmark = pytest.mark.integration

# RabbitMQ declares a /queue/x on first use; it must be durable and shared, or it vanishes with
# the connection that declared it.
RABBITMQ_QUEUE = {"durable": "true", "auto-delete": "false", "exclusive": "false"}


def stomp_target(
    broker: Broker,
    destination: str,
    headers: dict[str, str],
    refused: SubscriptionSpec | None = None,
) -> ContractTarget:
    endpoint = broker.endpoint("stomp")
    params = (("vhost", broker.vhost),) if broker.vhost else ()
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
        # No heart-beats: a held broker must not be declared hung before the test kills it.
        connector=StompConnector(
            FailoverOptions(), login=login, passcode=passcode, heartbeat=(0, 0), close_timeout=0.5
        ),
        address=BrokerAddress(endpoint.scheme, endpoint.host, endpoint.port, params=params),
        destination=destination,
        kill_broker=lambda session: broker.kill(),
        hold_confirmations=held,
        publish=lambda dest, body: broker.send(dest, [body]),
        send_headers=headers,
        subscription_headers=tuple(headers.items()),
        refused_subscription=refused,
    )


class TestStompOnActiveMQ(AdapterContract):
    @pytest.fixture
    def contract_target(self, activemq_cluster: Cluster, unique_queue: str) -> ContractTarget:
        # ActiveMQ answers a bad selector with an ERROR naming the SUBSCRIBE's receipt.
        bad_selector = SubscriptionSpec(
            "contract-refused", unique_queue, headers=(("selector", "this is not valid ((("),)
        )
        return stomp_target(activemq_cluster[0], unique_queue, {}, bad_selector)


# RabbitMQ names no frame in its ERRORs (an unknown exchange, say): it refuses no subscription
# by name, and the engine's poison quarantine finds the frame instead (integration/test_poison).
class TestStompOnRabbitMQ(AdapterContract):
    @pytest.fixture
    def contract_target(self, rabbitmq_cluster: Cluster, unique_queue: str) -> ContractTarget:
        return stomp_target(rabbitmq_cluster[0], unique_queue, dict(RABBITMQ_QUEUE))
