"""``python -m failover_client.demo``: one connection surviving a scripted broker disaster.

Starts brokers on loopback through the shipped harness (a network of ActiveMQ Classic brokers
for STOMP; with ``--protocol amqp``, independent RabbitMQ nodes speaking AMQP 1.0), runs a
producer and a consumer through :class:`~failover_client.FailoverConnection` and plays a
scenario: kill the producer's broker, hang the consumer's, resume it, bring the priority broker
back (the producer returns to it), add a fourth broker. A live view shows it; at the end a
summary proves that no confirmed message was lost, and a PNG timeline shows messages per second
per broker with every action marked. Needs the ``demo`` extra (and ``amqp`` for AMQP).
"""

from __future__ import annotations

from ._app import main
from ._run import DemoConfig, run_demo
from ._scenario import Scenario, Step, full_scenario, quick_scenario
from ._summary import Summary, summarize
from ._timeline import Timeline, build_timeline, plot_timeline

__all__ = [
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
]
