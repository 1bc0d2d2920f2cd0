"""``examples/spark_stream.py`` run as a user runs it, while the brokers of both sides die.

The job reads a queue with the failover source and writes another with the failover sink,
both over the same two ActiveMQ brokers. Every input message starts on the first broker; the
first broker is SIGKILLed mid-stream (source and sink move to the second), comes back with
its store, and the second one is SIGKILLed (both move back, and the source takes the rest).
Every input message must come out, and every copy of an output message must carry one id.
"""

from __future__ import annotations

import collections
import signal
from pathlib import Path

import pytest

from failover_client import MESSAGE_ID_HEADER
from failover_client.testing.brokers import Cluster
from failover_client.testing.spark import spark_environment
from integration.test_examples import Program

pytestmark = pytest.mark.integration

MESSAGES = 3_000
WAIT = 240.0
"""Bounds each wait on the job: a Spark job starts a JVM and plans its first micro-batch
before it prints a line (well over 30 s on a loaded machine), and stops one on Ctrl-C."""


def batches_in(program: Program) -> int:
    return sum(int(m.group(1)) for m in program.matching(r"^batch \d+: (\d+) message"))


def test_spark_example_moves_every_message_through_kills_on_both_sides(
    activemq_cluster: Cluster, unique_queue: str, tmp_path: Path
) -> None:
    first, second = activemq_cluster[0], activemq_cluster[1]
    first.send(unique_queue, [f"order-{n}" for n in range(MESSAGES)])
    output = f"{unique_queue}.shouted"
    uri = f"failover:({first.uri()},{second.uri()})?randomize=false"
    env = {
        **spark_environment(),
        # What a test of a Spark job sets: loopback, no web UI.
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false pyspark-shell",
    }
    job = Program(
        "spark_stream.py",
        "--uri", uri,
        "--source", unique_queue,
        "--sink", output,
        "--checkpoint", f"{tmp_path}/checkpoint",
        "--batch", "500",
        env=env,
    )  # fmt: skip
    try:
        job.wait_for_line(r"^batch \d+: \d+ message", timeout=WAIT)
        first.kill()  # source and sink move to the second broker
        activemq_cluster.heal()  # the first returns with what it stored
        second.kill()  # both move back; the source takes the rest
        with job.cond:
            job.cond.wait_for(lambda: batches_in(job) >= MESSAGES or "<eof>" in job.lines, WAIT)
        assert batches_in(job) >= MESSAGES, job.report()
        job.process.send_signal(signal.SIGINT)  # Ctrl-C
        assert job.finish(WAIT) == 0, job.report()
    finally:
        job.stop()
    assert job.matching("^interrupted"), job.report()
    assert job.matching("^done$"), job.report()

    activemq_cluster.heal()
    found = []
    for broker in activemq_cluster:
        found += broker.drain(output, timeout=120, idle=2.0)
    ids: dict[str, set[str]] = collections.defaultdict(set)
    for message in found:
        ids[message.text].add(message.headers[MESSAGE_ID_HEADER])
    assert set(ids) == {f"ORDER-{n}" for n in range(MESSAGES)}
    # Every copy of an output message carries its input's id: one id per body, none shared.
    assert all(len(copies) == 1 for copies in ids.values())
    assert len({next(iter(copies)) for copies in ids.values()}) == MESSAGES
