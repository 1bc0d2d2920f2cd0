"""Consumers that move on a real ActiveMQ network of brokers strand nothing (issue: moves).

A producer on the third broker at 2,000 msg/s; (a) a consumer with priority backup whose home
broker is SIGKILLed and restarted, (b) consumers rebalanced by a broker that joins. Once the
moves settled and the producer stopped, every broker is drained with a plain STOMP consumer:
nothing may be left there and no id may be lost.
"""

from __future__ import annotations

import pytest

from benchmarks._consume_moves import run_join, run_priority_return
from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration


def test_a_priority_return_leaves_nothing_on_the_backup_broker(activemq_network: Cluster) -> None:
    outcome = run_priority_return(activemq_network, drain=True, rate=2000, seconds=8.0)
    print(outcome.line())
    assert outcome.sent == 16000
    assert outcome.lost == 0
    assert outcome.moves == 1
    assert outcome.drains  # the backup broker was drained on the way home
    assert outcome.left_total == 0, outcome.left


def test_consumers_rebalanced_by_a_join_leave_nothing_behind(activemq_network: Cluster) -> None:
    outcome = run_join(activemq_network, drain=True, rate=2000, seconds=8.0, consumers=4)
    print(outcome.line())
    assert outcome.sent == 16000
    assert outcome.moves == 2  # the consumers on b1, whose home the joining broker is
    assert outcome.lost == 0
    assert outcome.left_total == 0, outcome.left
