"""Test doubles shipped with the library, so applications can test their own failover handling.

* :class:`FakeClock`: virtual time (``autojump=True``: it moves to the earliest deadline once
  every registered thread, each connection's reconnect loop, waits; :class:`ClockStalled` when
  a test would hang on a clock nobody moves); :class:`FakeConnector` /
  :class:`FakeSession`: a scripted broker group that keeps the adapter contract;
  :class:`EventRecorder`: records events.
* :mod:`failover_client.testing.contract`: the contract suite every adapter passes (imports
  pytest; import it from test code only).
* :mod:`failover_client.testing.brokers`: real brokers (ActiveMQ Classic, RabbitMQ, Artemis)
  started, killed, hung and restarted for your own tests, and an opt-in pytest plugin.

A subscription's handler runs on a worker thread registered with the connection's clock, so
on a :class:`FakeClock` virtual time waits for a running handler: a handler that blocks in a
test should block through the clock (``clock.wait(event, None)``), or the test moves time.

The helpers that wait for a background thread (``wait_for_*``) use *real* timeouts only as a
safety net against a hung test; they return as soon as the condition holds.
"""

from __future__ import annotations

from failover_client.testing._clock import ClockStalled, FakeClock
from failover_client.testing._connector import Behaviour, FakeConnector
from failover_client.testing._recorder import EventRecorder
from failover_client.testing._session import FakeSession, SentMessage

__all__ = [
    "Behaviour",
    "ClockStalled",
    "EventRecorder",
    "FakeClock",
    "FakeConnector",
    "FakeSession",
    "SentMessage",
]
