"""``failover-client probe / send / receive`` as a user runs them, against real brokers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from failover_client.testing.brokers import Cluster

pytestmark = pytest.mark.integration

TIMEOUT = 60


def cli(
    *argv: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "failover_client.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_probe_reports_every_broker_and_the_bridge_peers(activemq_network: Cluster) -> None:
    uri = activemq_network.failover_uri("stomp")
    done = cli("probe", "--json", "--peers", uri)
    assert done.returncode == 0, done.stderr
    members = json.loads(done.stdout)["members"]
    assert [m["member"] for m in members] == activemq_network.members("stomp")
    for member in members:
        assert member["answered"] is True
        assert member["version"] == "1.2"
        assert member["server"].startswith("ActiveMQ")
        assert member["ms"] > 0
    # Every broker of the full mesh reports bridges to (at least one of) its peers.
    assert all(m["peers"] for m in members), members


def test_probe_exits_5_when_a_member_is_down(activemq_cluster: Cluster) -> None:
    activemq_cluster[1].kill()
    done = cli("probe", activemq_cluster.failover_uri("stomp"))
    assert done.returncode == 5, done.stdout + done.stderr
    assert "no" in done.stdout.splitlines()[3]


def test_send_then_receive_round_trip(activemq_cluster: Cluster, unique_queue: str) -> None:
    uri = activemq_cluster.failover_uri("stomp", {"randomize": False})
    lines = [f"line {n}" for n in range(20)]
    sent = cli("send", uri, unique_queue, "-H", "origin:cli-test", stdin="\n".join(lines) + "\n")
    assert sent.returncode == 0, sent.stderr
    assert "20 sent, 20 confirmed, 0 not confirmed" in sent.stderr

    got = cli("receive", uri, unique_queue, "--count", "20", "--timeout", "30", "--json")
    assert got.returncode == 0, got.stderr
    messages = [json.loads(line) for line in got.stdout.splitlines()]
    assert [m["body"] for m in messages] == lines
    assert {m["headers"]["origin"] for m in messages} == {"cli-test"}


def test_send_fails_over_when_the_first_broker_is_dead(
    activemq_cluster: Cluster, unique_queue: str
) -> None:
    activemq_cluster[0].kill()
    uri = activemq_cluster.failover_uri("stomp", {"randomize": False})
    sent = cli("send", uri, unique_queue, "--body", "x", "--count", "5")
    assert sent.returncode == 0, sent.stderr
    assert f"via {activemq_cluster[1].uri('stomp')}" in sent.stderr
    assert len(activemq_cluster[1].drain(unique_queue, expect=5)) == 5


def test_connection_failure_exits_3_without_echoing_the_passcode(unique_queue: str) -> None:
    # Nothing listens on these ports (below the harness's range): refused at once.
    uri = "failover:(stomp://127.0.0.1:19991,stomp://127.0.0.1:19992)?startupMaxReconnectAttempts=1"
    done = cli(
        "send",
        uri,
        unique_queue,
        "--body",
        "x",
        "--login",
        "app",
        env={"FAILOVER_CLIENT_PASSCODE": "pa55word"},
    )
    assert done.returncode == 3, done.stderr
    assert "AllBrokersFailed" in done.stderr
    assert "pa55word" not in done.stdout + done.stderr


def test_receive_times_out_with_exit_5(activemq_cluster: Cluster, unique_queue: str) -> None:
    done = cli(
        "receive",
        activemq_cluster.failover_uri("stomp"),
        unique_queue,
        "--count",
        "1",
        "--timeout",
        "1",
    )
    assert done.returncode == 5, done.stderr
    assert done.stdout == ""
