"""``failover-client probe / send / receive`` as a user runs them, against real brokers.

STOMP against ActiveMQ; AMQP 1.0 against RabbitMQ nodes, and against a scripted AMQP peer for
the ``failover-server-list`` that no broker here sends.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from failover_client.testing.brokers import (
    FAILOVER_SERVER_LIST,
    AmqpPeer,
    AmqpPeerConfig,
    Cluster,
    artemis_server_list,
)
from integration.test_failover_common import durable_queue, failover_uri, queue_name

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


# --- AMQP 1.0 ----------------------------------------------------------------------------------


def amqp_login(cluster: Cluster) -> tuple[list[str], dict[str, str]]:
    """``--login`` for the cluster's brokers, and the environment holding the passcode."""
    login, passcode = cluster[0].credentials or ("", "")
    return ["--login", login], {"FAILOVER_CLIENT_PASSCODE": passcode}


def test_probe_over_amqp_names_each_member_and_its_product(rabbitmq_cluster: Cluster) -> None:
    uri = rabbitmq_cluster.failover_uri("amqp")
    login, env = amqp_login(rabbitmq_cluster)
    done = cli("probe", "--json", uri, *login, env=env)
    assert done.returncode == 0, done.stderr
    members = json.loads(done.stdout)["members"]
    assert [m["member"] for m in members] == rabbitmq_cluster.members("amqp")
    for member in members:
        assert member["answered"] is True
        assert member["protocol"] == "amqp"
        assert member["version"] == "1.0"
        assert member["server"].startswith("RabbitMQ/")
        assert member["extra"]["product"] == "RabbitMQ"
        assert member["ms"] > 0
        assert member["advertised"] == []  # RabbitMQ sends no failover-server-list

    table = cli("probe", uri, *login, env=env)
    assert table.returncode == 0, table.stderr
    assert "open-frame properties:" in table.stdout
    for member in rabbitmq_cluster.members("amqp"):
        assert f"  {member}  product " in table.stdout
    assert env["FAILOVER_CLIENT_PASSCODE"] not in table.stdout + table.stderr


def test_probe_over_amqp_shows_the_brokers_of_a_failover_server_list() -> None:
    properties = {
        "product": "apache-activemq-artemis",
        "version": "2.31.2",
        FAILOVER_SERVER_LIST: artemis_server_list(("backup.example", 5673)),
    }
    with AmqpPeer(AmqpPeerConfig(properties=properties)) as peer:
        done = cli("probe", peer.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"  {peer.url}  yes" in "\n".join(lines)
    assert "apache-activemq-artemis/2.31.2" in done.stdout
    assert f"  {peer.url}  failover-server-list  (list of 1)" in lines
    assert f"  {peer.url}  amqp-open  amqp://backup.example:5673" in lines


def test_send_then_receive_round_trip_over_amqp(rabbitmq_cluster: Cluster) -> None:
    destination = f"/amq/queue/{queue_name(durable_queue(rabbitmq_cluster))}"
    uri = failover_uri(rabbitmq_cluster, {"randomize": False}, endpoint="amqp")
    login, env = amqp_login(rabbitmq_cluster)
    lines = [f"line {n}" for n in range(20)]
    sent = cli(
        "send", uri, destination, *login, "-H", "origin:cli-test",
        stdin="\n".join(lines) + "\n", env=env,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert "20 sent, 20 confirmed, 0 not confirmed" in sent.stderr

    got = cli(
        "receive", uri, destination, *login, "--count", "20", "--timeout", "30", "--json", env=env
    )
    assert got.returncode == 0, got.stderr
    messages = [json.loads(line) for line in got.stdout.splitlines()]
    assert [m["body"] for m in messages] == lines
    assert {m["headers"]["origin"] for m in messages} == {"cli-test"}
    assert all(m["headers"]["failover-message-id"] for m in messages)


def test_send_over_amqp_fails_over_when_the_first_node_is_dead(rabbitmq_cluster: Cluster) -> None:
    queue = queue_name(durable_queue(rabbitmq_cluster))
    rabbitmq_cluster[0].kill()
    uri = failover_uri(rabbitmq_cluster, {"randomize": False}, endpoint="amqp")
    login, env = amqp_login(rabbitmq_cluster)
    sent = cli("send", uri, f"/amq/queue/{queue}", *login, "--body", "x", "--count", "5", env=env)
    assert sent.returncode == 0, sent.stderr
    assert f"via {rabbitmq_cluster[1].uri('amqp')}" in sent.stderr
    drained = rabbitmq_cluster[1].drain(f"/queue/{queue}", expect=5, protocol="amqp")
    assert [m.text for m in drained] == ["x"] * 5


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", ["send", "receive"])
def test_no_broker_answering_ends_at_the_timeout_with_exit_3(command: str) -> None:
    # A failover URI retries for ever at start-up: only --timeout ends the wait.
    uri = f"failover:(stomp://127.0.0.1:{_closed_port()},stomp://127.0.0.1:{_closed_port()})"
    argv = [command, uri, "/queue/nowhere", "--timeout", "3"]
    if command == "send":
        argv += ["--body", "x"]
    done = cli(*argv)
    assert done.returncode == 3, done.stderr
    assert "no broker answered within connect(timeout=3)" in done.stderr
    assert "refused" in done.stderr.lower()
    # The start-up notice is on stderr while the command waits.
    assert "WARNING" in done.stderr


def test_passcode_on_the_command_line_is_refused_before_connecting() -> None:
    done = cli("send", "stomp://127.0.0.1:1", "/queue/x", "--passcode", "s3cret")
    assert done.returncode == 2
    assert "--passcode-env" in done.stderr
    assert "s3cret" not in done.stderr


def test_version() -> None:
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("failover-client ")
