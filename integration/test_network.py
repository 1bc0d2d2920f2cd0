"""An ActiveMQ network of brokers pushes membership through the network-bridge advisory."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from failover_client.testing.brokers import Cluster, ReceivedMessage

pytestmark = pytest.mark.integration

ADVISORY = "/topic/ActiveMQ.Advisory.NetworkBridge"
# A peer's bridge comes back on the reconnect schedule of the network connector (about 1 s
# here); this is how long the test waits for an advisory at most, not what it expects.
WAIT = 30.0


def _bridge_to(peer_name: str, started: bool) -> Callable[[ReceivedMessage], bool]:
    def matches(message: ReceivedMessage) -> bool:
        info = json.loads(message.body)["BrokerInfo"]
        return bool(
            info["brokerName"] == peer_name
            and message.headers["started"] == ("true" if started else "false")
        )

    return matches


def test_bridge_advisory_reports_a_peer_that_starts_and_stops(activemq_network: Cluster) -> None:
    watcher, peer, _ = activemq_network
    peer_name = peer.broker_name  # type: ignore[attr-defined]  # ActiveMQ brokers have it
    with watcher.stomp_client() as session:
        # The JSON transformation needs xstream + jettison on the broker's classpath.
        session.subscribe(ADVISORY, headers={"transformation": "jms-advisory-json"}, ack="auto")

        # Existing bridges are replayed to a new subscriber (or come up while we wait).
        up = session.wait_for_message(_bridge_to(peer_name, True), WAIT)
        assert json.loads(up.body)["BrokerInfo"]["brokerURL"] == peer.uri("stomp")

        seen = len(session.messages)
        peer.stop()
        session.wait_for_message(_bridge_to(peer_name, False), WAIT, after=seen)

        seen = len(session.messages)
        peer.start()
        again = session.wait_for_message(_bridge_to(peer_name, True), WAIT, after=seen)
        # Peers advertise the connector that carries the cluster flags first: STOMP here.
        assert json.loads(again.body)["BrokerInfo"]["brokerURL"] == peer.uri("stomp")
