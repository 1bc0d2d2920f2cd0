"""Acknowledgements confirmed by ``confirm_settled`` survive the process ending at once.

A consumer process takes every message of a queue, acknowledges each, asks the connection to
confirm the acknowledgements, and ends with ``os._exit`` (no close(), no DISCONNECT: what
Spark does to a data source's Python worker). Whatever the broker confirmed must be gone from
the queue: nothing is left for the next consumer.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from failover_client.testing.brokers import Cluster
from integration.test_failover_common import SAFETY, durable_queue, failover_uri, queue_name

pytestmark = pytest.mark.integration

MESSAGES = 3_000

CONSUMER = textwrap.dedent(
    """
    import os
    import sys

    from failover_client import FailoverConnection

    uri, destination, count, login, passcode = sys.argv[1:6]
    connection = FailoverConnection(uri, login=login or None, passcode=passcode or None)
    subscription = connection.subscribe(destination, ack="client-individual", prefetch=int(count))
    connection.connect(timeout=30)
    taken = []
    try:
        while len(taken) < int(count):
            message = subscription.receive(30)
            assert message is not None, f"only {len(taken)} messages came"
            taken.append(message)
        for message in taken:
            message.ack()
        outcome = connection.confirm_settled(taken, 30)
        print(outcome.confirmed, outcome.lost, outcome.unconfirmed, flush=True)
    except BaseException as exc:
        print(f"consumer failed: {exc!r}", file=sys.stderr, flush=True)
        os._exit(1)  # the connection's threads would keep a failed process alive
    os._exit(0)  # no close(): the process just ends, as Spark ends a source's worker
    """
)


@pytest.mark.parametrize(
    ("kind", "endpoint"),
    # ActiveMQ pages a queue in 200 messages per wake-up and a dispatched page wakes nothing:
    # a consumer holding all 3,000 unacknowledged relies on the session waking the queue
    # (failover_client.stomp._pagein; test_activemq_page_in).
    [("activemq", "stomp"), ("rabbitmq", "stomp"), ("rabbitmq", "amqp")],
)
def test_confirmed_acknowledgements_survive_an_immediate_exit(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, endpoint: str
) -> None:
    cluster: Cluster = request.getfixturevalue(f"{kind}_cluster")
    broker = cluster[0]
    queue = durable_queue(cluster)
    protocol = "amqp" if endpoint == "amqp" else "stomp"
    broker.send(queue, [f"m-{n}" for n in range(MESSAGES)], protocol=protocol)
    source = queue if kind == "activemq" else f"/amq/queue/{queue_name(queue)}"
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    login, passcode = broker.credentials or ("", "")
    uri = failover_uri(cluster, order=[0], endpoint=endpoint)
    done = subprocess.run(
        [sys.executable, str(script), uri, source, str(MESSAGES), login or "", passcode or ""],
        capture_output=True,
        text=True,
        timeout=SAFETY * 4,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(MESSAGES), "0", "0"], done.stderr[-3000:]
    # Every acknowledgement reached the broker before the process ended: none come back.
    left = broker.drain(queue, timeout=SAFETY, idle=1.0, protocol=protocol)
    assert len(left) == 0
