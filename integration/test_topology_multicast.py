"""Dynamic discovery with real multicast, inside a network namespace this test creates.

Each test makes a namespace of its own (``ip netns add``, a veth pair with a multicast route on
it alone: nothing is sent on the host's interfaces) and runs the whole scenario in it, in a
child process under ``ip netns exec`` (see ``failover_client.testing.brokers._discovery_child``):

* ActiveMQ Classic 5.17 brokers announcing their OpenWire connector with
  ``discoveryUri="multicast://default"``, each on its own address with the standard ports, and a
  connection on ``discovery:(multicast://default)`` that starts before any broker: brokers join,
  one is SIGKILLed and comes back, one stops cleanly, the one in use is killed;
* the harness's Artemis peer (the bytes an Artemis 2.x broadcast group sends) advertising a real
  broker's STOMP port to a connection on ``udp://231.7.7.7:9876``.

Without root (no namespace can be made) the tests skip and say why.
"""

from __future__ import annotations

from typing import Any

import pytest

from failover_client.testing.brokers._activemq import activemq_missing
from failover_client.testing.brokers._discovery_child import run_in_namespace
from failover_client.testing.brokers._netns import netns_missing

ADDRESSES = ("10.213.0.11", "10.213.0.12", "10.213.0.13")


def _require() -> None:
    for reason in (netns_missing(), activemq_missing()):
        if reason is not None:
            pytest.skip(reason)


def _stomp(address: str) -> str:
    return f"stomp://{address}:61613"


def _changes(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(change, broker) for _, change, broker, _ in result["events"]]


def test_activemq_brokers_announced_by_multicast_join_die_and_come_back(tmp_path):
    _require()
    result = run_in_namespace(
        {"root": str(tmp_path), "uri": "discovery:(multicast://default)"}, ADDRESSES
    )
    a, b, c = (_stomp(x) for x in ADDRESSES)
    assert result["connect_error"] is None, result["log"]
    assert result["connected_to"] in (a, b, c)
    steps = {(s["what"], s["broker"]): s for s in result["steps"]}
    # Every announced OpenWire URL became the broker's STOMP address (tcp:61616 -> stomp:61613).
    for broker in (a, b, c):
        assert steps["start", broker]["changed"] is not None, (broker, result["log"])
    # SIGKILL: no dead announcement; dropped once ten keep-alive intervals passed in silence.
    assert steps["kill", b]["changed"] is not None
    assert steps["restart", b]["changed"] is not None
    # A clean stop announces dead.: dropped at once (before the silence could have).
    assert steps["stop", c]["changed"] is not None
    # The broker in use is killed: the connection sends on through one it discovered.
    in_use = result["steps"][-1]
    assert in_use["what"] == "kill"
    assert in_use["changed"] is not None
    assert result["failed_over_to"] in (a, b)
    assert result["failed_over_to"] != in_use["broker"]
    assert _changes(result)[:3] == [("added", a), ("added", b), ("added", c)]
    assert ("removed", b) in _changes(result)
    assert ("added", b) in _changes(result)[4:]
    assert result["pool"] == [result["failed_over_to"]]


def test_an_artemis_broadcast_group_leads_the_connection_to_its_brokers(tmp_path):
    _require()
    uri = "udp://231.7.7.7:9876?refreshTimeout=3000&initialWaitTimeout=30000&reconnectAttempts=-1"
    result = run_in_namespace({"root": str(tmp_path), "uri": uri, "mode": "artemis"}, ADDRESSES[:2])
    a, b = _stomp(ADDRESSES[0]), _stomp(ADDRESSES[1])
    assert result["connect_error"] is None, result["log"]
    # The all-protocols connector advertised as tcp:// is used as STOMP on its own port.
    assert result["connected_to"] == a
    assert _changes(result) == [("added", a), ("added", b), ("removed", b)]
    assert result["pool"] == [a]
