"""Acknowledgements written just before close() reach the broker.

``close()`` stops waiting for the DISCONNECT receipt once the broker has been silent for
``BYE_SILENCE`` (0.25 s): a hung broker must not hold the application's close. These tests
put the broker behind a proxy that holds every chunk for longer than that, so close() gives up
on the receipt every time, and check that the ACKs written before it were not lost with it:
nothing acknowledged comes back to the next consumer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from failover_client import BrokerAddress, FailoverOptions
from failover_client.adapter import Cancel, SubscriptionSpec
from failover_client.stomp import StompConnector
from failover_client.stomp._teardown import BYE_SILENCE
from failover_client.testing.brokers import FaultProxy
from failover_client.testing.contract import ContractListener
from integration.test_failover_common import SAFETY, durable_queue

if TYPE_CHECKING:
    from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration

MESSAGES = 200
LATENCY = 2 * BYE_SILENCE
"""Each way: the receipt comes 4 x BYE_SILENCE after DISCONNECT, long after close() left."""


@pytest.fixture
def proxy(activemq_cluster: Cluster) -> Iterator[FaultProxy]:
    p = FaultProxy(activemq_cluster[0].endpoint("stomp"), rng=random.Random(5))
    yield p
    p.close()


@pytest.mark.parametrize("ack", ["client-individual", "client"])
def test_acks_written_before_close_are_not_lost_with_the_receipt(
    activemq_cluster: Cluster, proxy: FaultProxy, ack: str
) -> None:
    broker = activemq_cluster[0]
    queue = durable_queue(activemq_cluster)
    broker.send(queue, [f"m-{n}".encode() for n in range(MESSAGES)])
    login, passcode = broker.credentials or (None, None)
    connector = StompConnector(
        FailoverOptions(), login=login, passcode=passcode, heartbeat=(0, 0), close_timeout=5.0
    )
    listener = ContractListener()
    session = connector.connect(
        BrokerAddress("stomp", proxy.host, proxy.port),
        timeout=SAFETY,
        listener=listener,
        cancel=Cancel(),
    )
    spec = SubscriptionSpec("s", queue, ack=ack, prefetch=MESSAGES)  # type: ignore[arg-type]
    session.subscribe(spec, listener.confirmation(0))
    assert listener.wait_for(lambda: len(listener.messages) == MESSAGES, SAFETY)
    proxy.latency(LATENCY)
    handled = listener.messages[: MESSAGES // 2]
    if ack == "client":
        session.ack(handled[-1])
    else:
        for message in handled:
            session.ack(message)
    started = time.monotonic()
    session.close()
    # Printed, not asserted: close() left before the receipt could come back.
    print(f"close() took {time.monotonic() - started:.3f} s with {LATENCY:g} s each way")
    proxy.latency(0.0)
    # The unacknowledged half, and only it, is still there for the next consumer.
    left = broker.drain(queue, expect=MESSAGES // 2, idle=1.0)
    assert sorted(m.body for m in left) == sorted(
        m.body for m in listener.messages[MESSAGES // 2 :]
    )
