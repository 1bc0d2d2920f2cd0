"""What each demo client connects with: its failover URI, and why each option is there.

Without priority tiers the producer prefers broker A (``priorityBackup``), the consumer lists
the brokers the other way round (so messages cross the network bridges and the two fail over
at different times), and the fleet rebalances over every broker (``rebalance=true``). The
producer and the consumer ignore the brokers' requests to rebalance
(``reconnectSupported=false``), which ActiveMQ's push sends to every client. With
tiers (the ``tiers`` scenario) every client prefers the local brokers and balances inside
them: ``priorityBackup=true&priorityURIs=<locals>&rebalance=true``.
"""

from __future__ import annotations

from ._harness import DemoBrokers
from ._scenario import Scenario

__all__ = ["AMQP_CLIENT_OPTIONS", "CLIENT_OPTIONS", "client_uris", "failover_uri", "tier_of"]

# Fast detection for a demo on loopback: 1 s heart-beats find a hung broker in about 2-3 s,
# a 1 s handshake deadline keeps a hung broker from holding up a reconnect, and the back-off
# stops at 1 s so a returning broker is noticed quickly (and a quarantine lasts 1 s at most).
_OPTIONS = "randomize=false&maxReconnectDelay=1000&connectTimeout=1000"
CLIENT_OPTIONS = f"{_OPTIONS}&heartbeat=1000"

AMQP_CLIENT_OPTIONS = f"{_OPTIONS}&heartbeat=2000"
"""Over AMQP the heart-beat is the idle timeout the client announces, and RabbitMQ's AMQP 1.0
plugin does not keep an idle connection busy often enough for 1 s: an idle consumer was
declared hung every 2 s. With 2 s none was, and a hung node is still found within 4 s."""


def failover_uri(brokers: DemoBrokers, order: list[str], extra: str = "") -> str:
    """``failover:(...)`` over the brokers ``order`` names, with the demo's options."""
    protocol = brokers.protocol
    members = ",".join(brokers.broker(n).uri(protocol) for n in order)
    options = AMQP_CLIENT_OPTIONS if protocol == "amqp" else CLIENT_OPTIONS
    return f"failover:({members})?{options}{extra}"


def client_uris(brokers: DemoBrokers, scenario: Scenario) -> tuple[str, str, str]:
    """The producer's, the consumer's and the fleet's failover URIs."""
    known = brokers.labels[: scenario.brokers]
    if scenario.priority:
        locals_ = ",".join(brokers.broker(n).uri(brokers.protocol) for n in scenario.priority)
        tiers = f"&priorityBackup=true&priorityURIs={locals_}&rebalance=true"
        everyone = failover_uri(brokers, known, tiers)
        return everyone, everyone, everyone
    # The brokers' own push (rebalanceClusterClients) also asks every client to rebalance; the
    # producer and the consumer keep their own order instead (reconnectSupported=false), so
    # the story stays "A preferred, the consumer at the other end", and the fleet rebalances.
    keep = "&reconnectSupported=false"
    producer = failover_uri(brokers, known, f"&priorityBackup=true{keep}")
    consumer = failover_uri(brokers, list(reversed(known)), keep)
    return producer, consumer, failover_uri(brokers, known, "&rebalance=true")


def tier_of(scenario: Scenario, name: str) -> str:
    """``local`` or ``remote`` in a scenario with priority tiers; empty without."""
    if not scenario.priority:
        return ""
    return "local" if name in scenario.priority else "remote"
