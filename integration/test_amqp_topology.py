"""Broker-pushed lists and redirects over AMQP 1.0, end to end through FailoverConnection.

No local broker sends ``failover-server-list`` or redirects, so the brokers here are
:class:`AmqpPeer` s: real AMQP listeners on proton's server side that answer opens with the
shapes Artemis and the Qpid routers send, redirect, lie, and accept messages.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from failover_client.uri import broker_key

from failover_client import (
    FailoverConnection,
    PoisonQuarantined,
    ReconnectAttempt,
    TopologyChanged,
)
from failover_client.testing.brokers import (
    FAILOVER_SERVER_LIST,
    AmqpPeer,
    AmqpPeerConfig,
    artemis_server_list,
    redirect_condition,
    router_server_list,
)
from integration.test_failover_common import SAFETY, Events

pytestmark = pytest.mark.integration

OPTIONS = "randomize=false&initialReconnectDelay=0&maxReconnectDelay=100"


@pytest.fixture
def peers() -> Iterator[list[AmqpPeer]]:
    started = [AmqpPeer().start() for _ in range(3)]
    try:
        yield started
    finally:
        for peer in started:
            peer.close()


def uri(*members: AmqpPeer, options: str = OPTIONS) -> str:
    return f"failover:({','.join(p.url for p in members)})?{options}"


def keys(conn: FailoverConnection) -> set[str]:
    return {state.address.key for state in conn.pool.states()}


def key(peer: AmqpPeer) -> str:
    return broker_key(peer.host, peer.port)


def test_an_advertised_backup_joins_the_pool_and_takes_over(peers: list[AmqpPeer]) -> None:
    primary, backup, _ = peers
    primary.config = AmqpPeerConfig(
        properties={FAILOVER_SERVER_LIST: artemis_server_list((backup.host, backup.port))}
    )
    events = Events()
    with FailoverConnection(uri(primary), listeners=[events]) as conn:
        conn.connect()
        changed = events.wait_for(TopologyChanged)
        assert key(backup) in keys(conn)
        assert key(primary) in keys(conn)  # the URI's own member is never removed
        assert changed.added
        conn.send("/queue/a", b"one", timeout=SAFETY)
        primary.close()  # the primary is gone for good: only the advertised backup is left
        conn.send("/queue/a", b"two", timeout=SAFETY)
        assert conn.broker is not None
        assert f":{backup.port}" in conn.broker
    assert [m.body for m in backup.received] == [b"two"]


@pytest.mark.parametrize(("action", "joins"), [("REPLACE", True), ("ADD", True), ("IGNORE", False)])
def test_the_server_list_action_decides_what_joins(
    peers: list[AmqpPeer], action: str, joins: bool
) -> None:
    primary, backup, other = peers
    primary.config = AmqpPeerConfig(
        properties={FAILOVER_SERVER_LIST: router_server_list((backup.host, backup.port))}
    )
    # Qpid JMS spellings throughout: the option is Qpid JMS's, and a URI speaks one dialect.
    options = (
        "failover.randomize=false&failover.initialReconnectDelay=0"
        f"&failover.amqpOpenServerListAction={action}"
    )
    with FailoverConnection(uri(primary, other, options=options)) as conn:
        conn.connect()
        primary.wait_opens(1, SAFETY)
        conn.send("/queue/a", b"x", timeout=SAFETY)  # the open was read before the send
        assert (key(backup) in keys(conn)) is joins
        assert {key(primary), key(other)} <= keys(conn)


def test_malformed_and_hostile_lists_are_skipped_and_the_connection_works(
    peers: list[AmqpPeer],
) -> None:
    primary, backup, _ = peers
    hostile: list[object] = [
        "not a map",
        {"network-host": "evil host", "port": 1},
        {"network-host": "a@b", "port": 5672},
        {"network-host": backup.host, "port": 70000},
        {"port": 5672},
        {"network-host": backup.host, "port": backup.port, "scheme": "gopher"},
        {"network-host": backup.host, "port": str(backup.port)},  # the one good entry
    ]
    primary.config = AmqpPeerConfig(properties={FAILOVER_SERVER_LIST: hostile})
    with FailoverConnection(uri(primary)) as conn:
        conn.connect()
        conn.send("/queue/a", b"x", timeout=SAFETY)
        assert keys(conn) == {key(primary), key(backup)}
    assert [m.body for m in primary.received] == [b"x"]


def test_a_list_that_is_not_a_list_changes_nothing(peers: list[AmqpPeer]) -> None:
    primary, _, _ = peers
    primary.config = AmqpPeerConfig(properties={FAILOVER_SERVER_LIST: "backup:5672"})
    with FailoverConnection(uri(primary)) as conn:
        conn.connect()
        conn.send("/queue/a", b"x", timeout=SAFETY)
        assert keys(conn) == {key(primary)}


def test_a_refused_open_with_a_redirect_moves_to_the_target_at_once(
    peers: list[AmqpPeer],
) -> None:
    router, target, other = peers
    router.config = AmqpPeerConfig(refuse=redirect_condition(target.host, target.port))
    with FailoverConnection(uri(router, other)) as conn:
        conn.connect()
        conn.send("/queue/a", b"x", timeout=SAFETY)
        assert conn.broker is not None
        assert f":{target.port}" in conn.broker
    assert other.opens == []  # the redirect came before the rest of the plan
    assert [m.body for m in target.received] == [b"x"]


def test_two_routers_that_redirect_to_each_other_do_not_hold_the_client(
    peers: list[AmqpPeer],
) -> None:
    left, right, healthy = peers
    left.config = AmqpPeerConfig(refuse=redirect_condition(right.host, right.port))
    right.config = AmqpPeerConfig(refuse=redirect_condition(left.host, left.port))
    with FailoverConnection(uri(left, healthy)) as conn:
        conn.connect()
        # A router answers an open with an open and a close at once: the confirmed send is
        # the proof of a usable broker. Five hops at most in a row, then the plan goes on.
        conn.send("/queue/a", b"x", timeout=SAFETY)
    assert [m.body for m in healthy.received] == [b"x"]
    assert len(left.opens) + len(right.opens) < 20


def test_two_routers_alone_that_redirect_to_each_other_cost_a_growing_delay(
    peers: list[AmqpPeer],
) -> None:
    # No healthy broker: each router opens and at once closes with a redirect to the other.
    # Every open completes, so connect() succeeds; once the row of redirects is full the
    # bounce must cost the schedule's growing delays (it once opened 1,302 times in 5 s).
    left, right, _ = peers
    left.config = AmqpPeerConfig(refuse=redirect_condition(right.host, right.port))
    right.config = AmqpPeerConfig(refuse=redirect_condition(left.host, left.port))
    events = Events()
    # No jitter: the delays below are the schedule's exact ones.
    options = "randomize=false&initialReconnectDelay=10&maxReconnectDelay=320&reconnectJitter=0"
    with FailoverConnection(uri(left, right, options=options), listeners=[events]) as conn:
        conn.connect()
        # The schedule reached its maximum: 10 ms doubled five times.
        events.wait_for(ReconnectAttempt, lambda e: e.delay >= 0.32)
        opens = len(left.opens) + len(right.opens)
    # The first open, five hops, then one open per delay of 10, 20, ... 320 ms (and a few
    # more while the last events travel).
    assert opens < 25


def test_an_established_connection_closed_with_a_redirect_replays_on_the_target(
    peers: list[AmqpPeer],
) -> None:
    primary, target, other = peers
    primary.config = AmqpPeerConfig(outcome="held")  # nothing confirmed on the primary
    with FailoverConnection(uri(primary, other)) as conn:
        conn.connect()
        future = conn.send_async("/queue/a", b"in doubt", timeout=SAFETY)
        primary.wait_received(1, SAFETY)
        primary.close_connections(redirect_condition(target.host, target.port))
        future.result(SAFETY)
        assert conn.broker is not None
        assert f":{target.port}" in conn.broker
    (first,) = primary.received
    (replayed,) = target.received
    # Re-sent with the same AMQP message-id: a duplicate the receiver can recognise.
    assert replayed.message_id == first.message_id
    assert replayed.body == b"in doubt"
    assert other.opens == []


def test_a_message_the_broker_keeps_releasing_is_rejected_not_lost(
    peers: list[AmqpPeer],
) -> None:
    primary, _, _ = peers
    primary.config = AmqpPeerConfig(outcome="released")
    events = Events()
    with FailoverConnection(uri(primary), listeners=[events]) as conn:
        conn.connect()
        with pytest.raises(Exception, match="released") as info:
            conn.send("/queue/a", b"x", timeout=SAFETY)
        assert type(info.value).__name__ == "SendRejected"
        assert events.of(PoisonQuarantined) == []
    assert len(primary.received) == 4  # the first try and three re-sends
