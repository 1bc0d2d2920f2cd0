"""``python -m failover_client.demo``: one connection surviving a scripted broker disaster.

Starts brokers on loopback through the shipped harness (a network of ActiveMQ Classic brokers
for STOMP; with ``--protocol amqp``, independent RabbitMQ nodes speaking AMQP 1.0), runs a
producer, a consumer and a fleet of idle clients (``rebalance=true``, stable client ids)
through :class:`~failover_client.FailoverConnection`, and plays a scenario:

* ``full`` / ``quick``: kill the producer's broker, hang the consumer's, resume it, bring the
  priority broker back (the producer returns to it), then a fourth broker joins. Every client
  learns of it from the brokers themselves through its own topology source (ActiveMQ's
  OpenWire cluster push, or the network-bridge advisories), and only the fleet clients whose
  rendezvous home it becomes (about a quarter) move to it. RabbitMQ pushes nothing, so over
  AMQP the clients read a broker-list file that the demo edits (a labelled fallback).
* ``tiers``: two local and two remote brokers; every client uses
  ``priorityBackup=true&priorityURIs=<locals>&rebalance=true``: balanced over the locals,
  all on the remotes while both locals are down, back to the first local that returns, and
  balanced again when the second does.

A live view shows the clients, the brokers and the fleet per broker; at the end a summary
proves that no confirmed message was lost and tells where the fleet was at each step and who
moved, and a PNG timeline shows messages per second per broker and the fleet per broker, with
every action marked. Needs the ``demo`` extra (and ``amqp`` for AMQP).
"""

from __future__ import annotations

from ._app import main
from ._run import DemoConfig, run_demo
from ._scenario import SCENARIOS, Scenario, Step, full_scenario, quick_scenario, tiers_scenario
from ._summary import Summary, summarize
from ._timeline import Timeline, build_timeline, plot_timeline

__all__ = [
    "SCENARIOS",
    "DemoConfig",
    "Scenario",
    "Step",
    "Summary",
    "Timeline",
    "build_timeline",
    "full_scenario",
    "main",
    "plot_timeline",
    "quick_scenario",
    "run_demo",
    "summarize",
    "tiers_scenario",
]
