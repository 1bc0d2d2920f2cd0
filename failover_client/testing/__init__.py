"""Test doubles shipped with the library, so applications can test their own failover handling.

* :class:`FakeClock`: virtual time; :class:`FakeConnector` / :class:`FakeSession`: a scripted
  broker group that keeps the adapter contract; :class:`EventRecorder`: records events.
* :mod:`failover_client.testing.contract`: the contract suite every adapter passes.
* :mod:`failover_client.testing.brokers`: real brokers (ActiveMQ Classic, RabbitMQ, Artemis)
  started, killed, hung and restarted for your own tests, and an opt-in pytest plugin.
"""

from __future__ import annotations

from failover_client.testing._fakes import (
    Behaviour,
    EventRecorder,
    FakeClock,
    FakeConnector,
    FakeSession,
    SentMessage,
)

__all__ = [
    "Behaviour",
    "EventRecorder",
    "FakeClock",
    "FakeConnector",
    "FakeSession",
    "SentMessage",
]
