"""``_AMQ_DUPL_ID`` per broker, through the AMQP adapter: on each write to a broker that may
drop copies by it (Artemis, or one that names no product), on none to ActiveMQ Classic or
RabbitMQ, and a replay written for the broker it lands on.

The brokers are :class:`AmqpPeer` s whose open frames carry the ``product`` each broker sends
(``apache-activemq-artemis``, ``ActiveMQ``, ``RabbitMQ``, or none): no Artemis runs here
without Docker, and the adapter reads nothing else of the broker to decide.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from failover_client import FailedOver, FailoverConnection
from failover_client.testing.brokers import AmqpPeer, AmqpPeerConfig
from integration.test_failover_common import SAFETY, Events

pytestmark = pytest.mark.integration

OPTIONS = "randomize=false&initialReconnectDelay=0&maxReconnectDelay=100"
ARTEMIS, CLASSIC, RABBITMQ = "apache-activemq-artemis", "ActiveMQ", "RabbitMQ"
STRANDED = 3


def _config(product: str | None, **fields: object) -> AmqpPeerConfig:
    properties = {} if product is None else {"product": product}
    return AmqpPeerConfig(properties=properties, **fields)  # type: ignore[arg-type]


@pytest.fixture
def peers() -> Iterator[tuple[AmqpPeer, AmqpPeer]]:
    first, second = AmqpPeer().start(), AmqpPeer().start()
    try:
        yield first, second
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("first_product", "second_product", "first_carries", "second_carries"),
    [
        (CLASSIC, ARTEMIS, False, True),
        (ARTEMIS, CLASSIC, True, False),
        (RABBITMQ, None, False, True),
    ],
)
def test_a_replay_carries_the_header_for_the_broker_it_lands_on(
    peers: tuple[AmqpPeer, AmqpPeer],
    first_product: str | None,
    second_product: str | None,
    first_carries: bool,
    second_carries: bool,
) -> None:
    first, second = peers
    first.config = _config(first_product, outcome="held")  # nothing confirmed on the first
    second.config = _config(second_product)
    events = Events()
    uri = f"failover:({first.url},{second.url})?{OPTIONS}"
    with FailoverConnection(uri, listeners=[events]) as conn:
        conn.connect()
        stranded = [conn.send_async("/queue/a", f"s-{i}", timeout=SAFETY) for i in range(STRANDED)]
        first.wait_received(STRANDED, SAFETY)
        first.close()  # the broker is gone: the connection replays on the second
        events.wait_for(FailedOver)
        for future in stranded:
            future.result(SAFETY)
        conn.send("/queue/a", "after", timeout=SAFETY)
    originals, copies = first.received, second.received
    assert [m.body for m in copies] == [*(m.body for m in originals), b"after"]
    for message in originals:
        assert ("_AMQ_DUPL_ID" in message.properties) is first_carries
    for message in copies:
        assert ("_AMQ_DUPL_ID" in message.properties) is second_carries
        if second_carries:
            assert message.properties["_AMQ_DUPL_ID"] == message.properties["failover-message-id"]
    # Every copy carries the original's failover-message-id, the consumer's key.
    ids = [m.properties["failover-message-id"] for m in originals]
    assert [m.properties["failover-message-id"] for m in copies[:STRANDED]] == ids
