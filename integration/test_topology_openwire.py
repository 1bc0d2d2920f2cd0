"""The ``openwire`` topology source against real ActiveMQ networks of brokers (full mesh of 3).

A STOMP :class:`FailoverConnection` hears ActiveMQ's own cluster push (``updateClusterClients``
/ ``rebalanceClusterClients`` / ``updateClusterClientsOnRemove`` on the connectors) through an
OpenWire control channel beside it. Two networks are shared by the module (the harness pool
reuses a running cluster for an equal spec and heals it before each test): one whose brokers
advertise their OpenWire ``tcp://`` address (mapped back to STOMP by port) and one that
advertises ``stomp://``; logins run against the auth pair of ``test_activemq_auth``.

The pool-update latencies (a broker stopped or started -> ``TopologyChanged`` on the client)
are printed (``-s``), never asserted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from failover_client.uri import BrokerAddress, parse

from failover_client import (
    AuthenticationFailed,
    FailedOver,
    FailoverConnection,
    TopologyChanged,
)
from failover_client.testing.brokers import Broker, BrokerKind, Cluster
from failover_client.topology import OpenWireSource
from integration.test_activemq_auth import APP, OPS, WRONG
from integration.test_failover_common import Events, LeakCheck

pytestmark = pytest.mark.integration

# A bridge comes back on the network connector's own reconnect back-off (seconds, more after a
# restart); this bounds a wait for a push, it is not what the test expects.
WAIT = 60.0
# The data connection stays where the test put it: the brokers' rebalance requests (sent with
# every push here) are ignored, except in the test of the rebalance request itself.
PINNED = "randomize=false&reconnectSupported=false&initialReconnectDelay=10&maxReconnectDelay=500"


@pytest.fixture(params=["tcp", "stomp"])
def network(request: pytest.FixtureRequest, broker_cluster: Callable[..., Cluster]) -> Cluster:
    """A full mesh of 3 that advertises OpenWire (``tcp``) or STOMP addresses."""
    return broker_cluster(BrokerKind.ACTIVEMQ, 3, network=True, advertise=request.param)


@pytest.fixture
def tcp_network(broker_cluster: Callable[..., Cluster]) -> Cluster:
    return broker_cluster(BrokerKind.ACTIVEMQ, 3, network=True, advertise="tcp")


def key(broker: Broker) -> str:
    return parse(broker.uri("stomp")).members[0].key


def source_for(cluster: Cluster, **kwargs: Any) -> OpenWireSource:
    """A source that knows the harness's ports: STOMP key -> OpenWire port, and back."""
    ports = {key(b): b.endpoint("tcp").port for b in cluster}
    stomp = {b.endpoint("tcp").port: b.endpoint("stomp") for b in cluster}

    def to_stomp(scheme: str, host: str, port: int) -> BrokerAddress | None:
        ep = stomp.get(port)
        return BrokerAddress("stomp", ep.host, ep.port) if ep is not None else None

    return OpenWireSource(openwire_port=ports, scheme_map=to_stomp, **kwargs)


def pool_keys(conn: FailoverConnection) -> set[str]:
    return {s.address.key for s in conn.pool.states()}


def wait_for_pool(events: Events, conn: FailoverConnection, wanted: set[str], after: int) -> float:
    """The time of the TopologyChanged after which the pool is ``wanted`` (waits for it)."""
    event = events.wait_for(
        TopologyChanged, lambda e: pool_keys(conn) == wanted, after=after, timeout=WAIT
    )
    return events.time_of(event)


def test_a_connection_learns_the_whole_network(network: Cluster) -> None:
    first = network[0]
    everyone = {key(b) for b in network}
    leaks = LeakCheck()
    events = Events()
    source = source_for(network)
    conn = FailoverConnection(
        f"failover:({first.uri('stomp')})?{PINNED}", listeners=[events], topology=[source]
    )
    began = time.monotonic()
    try:
        conn.connect()
        learned = wait_for_pool(events, conn, everyone, 0)
        print(
            f"\n[advertise={network.spec.advertise}] connect -> whole network in the pool: "
            f"{learned - began:.3f}s"
        )
        # The push may be heard before open() has returned on the source's thread.
        assert source.wait_until(lambda s: s.opened == 1, WAIT)
        assert source.last_error is None
        changes = events.of(TopologyChanged)
        assert {c.source for c in changes} == {"openwire"}
        assert conn.pool.state(key(first)).seed
    finally:
        conn.close()
    assert "stopped" in repr(source)
    leaks.assert_clean()


def test_a_stopped_broker_leaves_the_pool_and_comes_back_when_restarted(network: Cluster) -> None:
    first, _, leaving = network
    everyone = {key(b) for b in network}
    events = Events()
    conn = FailoverConnection(
        f"failover:({first.uri('stomp')})?{PINNED}",
        listeners=[events],
        topology=[source_for(network)],
    )
    try:
        conn.connect()
        wait_for_pool(events, conn, everyone, 0)

        mark = events.mark()
        stopping = time.monotonic()
        leaving.stop()
        stopped = time.monotonic()
        gone = wait_for_pool(events, conn, everyone - {key(leaving)}, mark)
        print(
            f"\n[advertise={network.spec.advertise}] broker stop -> removed from the pool: "
            f"{gone - stopping:.3f}s from the stop call ({gone - stopped:.3f}s after it returned)"
        )

        mark = events.mark()
        starting = time.monotonic()
        leaving.start()
        started = time.monotonic()
        back = wait_for_pool(events, conn, everyone, mark)
        print(
            f"broker start -> added again: {back - starting:.3f}s from the start call "
            f"({back - started:.3f}s after the broker was ready)"
        )
        assert conn.broker is not None
        assert parse(conn.broker).members[0].key == key(first)  # the data never moved
    finally:
        conn.close()


def test_the_control_channel_follows_the_data_connection_after_a_sigkill(
    tcp_network: Cluster, unique_queue: str
) -> None:
    first = tcp_network[0]
    everyone = {key(b) for b in tcp_network}
    events = Events()
    source = source_for(tcp_network)
    conn = FailoverConnection(
        f"failover:({first.uri('stomp')})?{PINNED}", listeners=[events], topology=[source]
    )
    try:
        conn.connect()
        wait_for_pool(events, conn, everyone, 0)
        assert source.wait_until(lambda s: s.opened == 1, WAIT)
        assert f"channel=tcp://127.0.0.1:{first.endpoint('tcp').port}" in repr(source)

        mark = events.mark()
        killed = time.monotonic()
        first.kill()
        moved = events.wait_for(FailedOver, after=mark, timeout=WAIT)
        survivor = tcp_network.broker_at(moved.to_broker)
        assert survivor is not first
        # The control channel reopens on the survivor's OpenWire port and hears its push.
        there = f"tcp://127.0.0.1:{survivor.endpoint('tcp').port}"
        assert source.wait_until(lambda s: (s.last_push or ("",))[0] == there, WAIT)
        heard = time.monotonic()
        assert source.wait_until(lambda s: s.opened == 2, WAIT)
        assert f"channel={there}" in repr(source)
        assert source.last_push is not None
        assert key(survivor) in {a.key for a in source.last_push[1]}
        print(
            f"\nSIGKILL of the data broker -> data on {key(survivor)} after "
            f"{events.time_of(moved) - killed:.3f}s, control channel there and its push heard "
            f"after {heard - killed:.3f}s"
        )
        assert key(first) in pool_keys(conn)  # a seed is never removed by a push
        conn.send(unique_queue, "after the kill")  # the data connection works on the survivor
    finally:
        conn.close()


def test_the_brokers_rebalance_request_reaches_the_connection(
    tcp_network: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "failover_client")
    first = tcp_network[0]
    source = source_for(tcp_network)
    conn = FailoverConnection(f"failover:({first.uri('stomp')})?randomize=false", topology=[source])
    try:
        conn.connect()
        # rebalanceClusterClients=true: every push carries rebalanceConnection=true.
        assert source.wait_until(lambda s: s.rebalances >= 1, WAIT)
        assert "openwire asked for rebalancing: placing this client by rendezvous" in caplog.text
    finally:
        conn.close()


@pytest.fixture
def secured(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """The auth pair of test_activemq_auth (an equal spec: one running cluster per session)."""
    return broker_cluster(BrokerKind.ACTIVEMQ, 2, users=(APP, OPS))


def test_the_control_channel_logs_in_and_a_wrong_login_touches_only_itself(
    secured: Cluster, unique_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker = secured[0]
    ports = {key(broker): broker.endpoint("tcp").port}
    uri = f"failover:({broker.uri('stomp')})?{PINNED}"
    right = OpenWireSource(openwire_port=ports, login=APP.name, passcode=APP.password)
    with FailoverConnection(uri, login=APP.name, passcode=APP.password, topology=[right]) as conn:
        # The broker's ConnectionControl (a lone broker's: no cluster information, so nothing
        # is pushed) comes after it accepted the login.
        assert right.wait_until(lambda s: s.opened == 1 and s.controls >= 1, WAIT)
        assert right.pushes == 0
        assert right.last_error is None

    wrong = OpenWireSource(openwire_port=ports, login=APP.name, passcode=WRONG)
    with FailoverConnection(uri, login=APP.name, passcode=APP.password, topology=[wrong]) as conn:
        assert wrong.wait_until(lambda s: s.last_error is not None, WAIT)
        error = wrong.last_error
        assert isinstance(error, AuthenticationFailed)
        assert "User name [app] or password is invalid" in str(error)
        conn.send(unique_queue, "the data connection does not care")
        assert conn.state == "connected"
        assert wrong.opened == 0
    assert "control channel to tcp://127.0.0.1" in caplog.text
    assert "refused" in caplog.text
    for text in (caplog.text, repr(wrong), str(error), repr(error)):
        assert WRONG not in text
        assert APP.password not in text
