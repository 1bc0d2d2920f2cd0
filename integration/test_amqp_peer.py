"""The AMQP test peer, driven by raw proton clients over loopback.

The peer stands in for Artemis and the Qpid routers in the AMQP adapter's tests, so each
behaviour a test relies on is checked here with the plain library: what the open frame
carries, refusals and later closes with a condition, SASL, dispositions, queues and credit,
and that ``close()`` ends every connection at once.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest
from failover_client.uri import BrokerAddress
from proton import Condition, ConnectionException, Delivery, Handler, Message, symbol
from proton.reactor import Container
from proton.utils import BlockingConnection, ConnectionClosed, SendException

from failover_client.amqp._server_list import parse_redirect, parse_server_list
from failover_client.testing.brokers import (
    AMQP_REDIRECT,
    FAILOVER_SERVER_LIST,
    AmqpPeer,
    AmqpPeerConfig,
    PeerCondition,
    artemis_server_list,
    redirect_condition,
    router_server_list,
)

pytestmark = pytest.mark.integration

SASL_HEADER = b"AMQP\x03\x01\x00\x00"

WAIT = 10.0  # a safety net for a broken peer, never a measurement


class Observer(Handler):
    """Opens one connection, records what the peer answered, and closes it.

    Runs a proton Container on the test's thread until the connection is over.
    """

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__()
        self.url = url
        self.options = options
        self.opened = False
        self.properties: dict[Any, Any] | None = None
        self.condition: Condition | None = None
        self.transport_condition: Condition | None = None
        self._deadline: Any = None

    def run(self) -> Observer:
        Container(self).run()
        return self

    def on_reactor_init(self, event: Any) -> None:
        self._deadline = event.container.schedule(WAIT, _Stop())
        event.container.connect(self.url, handler=self, reconnect=False, **self.options)

    def on_connection_remote_open(self, event: Any) -> None:
        self.opened = True
        self.properties = dict(event.connection.remote_properties or {})
        event.connection.close()

    def on_connection_remote_close(self, event: Any) -> None:
        self.condition = event.connection.remote_condition
        event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        self.transport_condition = event.transport.condition

    def on_transport_closed(self, event: Any) -> None:
        event.container.stop()  # the connection is over; so is the safety timer


class _Stop(Handler):
    def on_timer_task(self, event: Any) -> None:
        event.container.stop()


@pytest.fixture
def peer() -> Iterator[AmqpPeer]:
    with AmqpPeer() as peer:
        yield peer


def connect(peer: AmqpPeer, **options: Any) -> BlockingConnection:
    return BlockingConnection(peer.url, timeout=WAIT, reconnect=False, **options)


def here(peer: AmqpPeer, scheme: str = "amqp") -> BrokerAddress:
    return BrokerAddress(scheme, peer.host, peer.port)


# --- the open frame --------------------------------------------------------------------------


def test_open_frame_carries_the_artemis_server_list(peer: AmqpPeer) -> None:
    peer.config = AmqpPeerConfig(
        properties={FAILOVER_SERVER_LIST: artemis_server_list(("backup", 61617), ("::1", 5672))}
    )
    seen = Observer(peer.url).run()
    assert seen.opened
    assert seen.properties is not None
    (key,) = seen.properties
    assert type(key) is symbol
    assert key == FAILOVER_SERVER_LIST
    first = seen.properties[key][0]
    assert all(type(k) is symbol for k in first)
    assert first == {
        "network-host": "backup",
        "hostname": "backup",
        "port": 61617,
        "scheme": "amqp",
    }
    assert parse_server_list(seen.properties[key], current=here(peer)) == (
        BrokerAddress("amqp", "backup", 61617),
        BrokerAddress("amqp", "::1", 5672),
    )


def test_open_frame_carries_the_router_shape_with_string_keys(peer: AmqpPeer) -> None:
    peer.config = AmqpPeerConfig(
        properties={FAILOVER_SERVER_LIST: router_server_list(("r1", 5672), ("r2", 5673))},
        symbol_keys=False,
    )
    seen = Observer(peer.url).run()
    assert seen.properties is not None
    entries = seen.properties[symbol(FAILOVER_SERVER_LIST)]
    assert entries == [
        {"network-host": "r1", "port": "5672"},
        {"network-host": "r2", "port": "5673"},
    ]
    assert all(type(k) is str for entry in entries for k in entry)
    assert parse_server_list(entries, current=here(peer, "amqps")) == (
        BrokerAddress("amqps", "r1", 5672),
        BrokerAddress("amqps", "r2", 5673),
    )


def test_hostile_values_arrive_as_configured(peer: AmqpPeer) -> None:
    hostile: list[object] = [
        "not a map",
        {"network-host": "x" * 10_000, "port": 5672},
        {"network-host": "mallory:pw@evil", "port": 1},
        {"network-host": {"nested": [1, [2, [3]]]}, "port": [5672]},
        {"network-host": "plain", "port": 5672, "scheme": "amqp"},  # a downgrade over TLS
    ]
    peer.config = AmqpPeerConfig(properties={FAILOVER_SERVER_LIST: hostile, "other": 7})
    seen = Observer(peer.url).run()
    assert seen.properties is not None
    assert seen.properties[symbol("other")] == 7
    received = seen.properties[symbol(FAILOVER_SERVER_LIST)]
    assert received == hostile
    assert parse_server_list(received, current=here(peer, "amqps")) == (
        BrokerAddress("amqp", "plain", 5672),
    )


def test_a_server_list_that_is_not_a_list(peer: AmqpPeer) -> None:
    peer.config = AmqpPeerConfig(properties={FAILOVER_SERVER_LIST: "amqp://a:1,amqp://b:2"})
    seen = Observer(peer.url).run()
    assert seen.properties == {FAILOVER_SERVER_LIST: "amqp://a:1,amqp://b:2"}


def test_the_client_open_is_recorded(peer: AmqpPeer) -> None:
    seen = Observer(peer.url, virtual_host="vhost-a", properties={symbol("k"): "v"}).run()
    assert seen.opened
    (opened,) = peer.wait_opens(1)
    assert (opened.number, opened.mechanism, opened.user) == (0, "ANONYMOUS", "anonymous")
    assert opened.hostname == "vhost-a"
    assert opened.properties == {"k": "v"}
    assert not opened.refused


# --- refusing and closing with a condition -----------------------------------------------------


def test_a_refused_open_carries_the_redirect_condition_and_info(peer: AmqpPeer) -> None:
    peer.config = AmqpPeerConfig(
        refuse=redirect_condition("::1", 5673, scheme="amqps", hostname="node-2")
    )
    seen = Observer(peer.url).run()
    assert seen.condition is not None
    assert seen.condition.name == AMQP_REDIRECT
    info = cast("dict[object, object]", seen.condition.info)
    assert info == {"network-host": "::1", "port": 5673, "scheme": "amqps", "hostname": "node-2"}
    assert all(type(k) is symbol for k in info)
    assert parse_redirect(info, current=here(peer)) == BrokerAddress("amqps", "::1", 5673)
    (opened,) = peer.opens
    assert opened.refused


def test_two_peers_redirect_a_client_back_and_forth() -> None:
    with AmqpPeer() as a, AmqpPeer() as b:
        a.config = AmqpPeerConfig(refuse=redirect_condition(b.host, b.port))
        b.config = AmqpPeerConfig(refuse=redirect_condition(a.host, str(a.port)))
        where = here(a)
        for expected in (b, a, b):
            seen = Observer(f"amqp://{where.authority}").run()
            assert seen.condition is not None
            assert seen.condition.name == AMQP_REDIRECT
            target = parse_redirect(seen.condition.info, current=where)
            assert target == here(expected)
            where = target
        assert len(a.opens) == 2
        assert len(b.opens) == 1


def test_a_refusal_with_hostile_info(peer: AmqpPeer) -> None:
    info = {"network-host": ["nested"], "port": "99999", "user": "mallory"}
    peer.config = AmqpPeerConfig(refuse=PeerCondition(AMQP_REDIRECT, None, info))
    seen = Observer(peer.url).run()
    assert seen.condition is not None
    assert seen.condition.info == info
    assert parse_redirect(seen.condition.info, current=here(peer)) is None


@pytest.mark.parametrize(
    "condition",
    [
        redirect_condition("127.0.0.1", 5673, scheme="amqp"),
        PeerCondition("amqp:internal-error", "going down", {"why": "maintenance"}),
    ],
    ids=["redirect", "internal-error"],
)
def test_an_established_connection_is_closed_on_demand(
    peer: AmqpPeer, condition: PeerCondition
) -> None:
    client = connect(peer)
    try:
        assert peer.close_connections(condition) == 1
        with pytest.raises(ConnectionClosed) as closed:
            client.wait(lambda: False, timeout=WAIT)
        remote = closed.value.connection.remote_condition
        assert remote is not None
        assert (remote.name, remote.description) == (condition.name, condition.description)
        assert remote.info == condition.info
    finally:
        client.close()


def test_close_without_condition(peer: AmqpPeer) -> None:
    client = connect(peer)
    try:
        assert peer.close_connections() == 1
        with pytest.raises(ConnectionClosed) as closed:
            client.wait(lambda: False, timeout=WAIT)
        assert closed.value.connection.remote_condition is None
    finally:
        client.close()


# --- SASL --------------------------------------------------------------------------------------


def test_sasl_plain_with_fixed_credentials() -> None:
    with AmqpPeer(AmqpPeerConfig(credentials=("app", "right"))) as peer:
        good = Observer(peer.url, user="app", password="right", allowed_mechs="PLAIN").run()
        assert good.opened
        (opened,) = peer.opens
        assert (opened.mechanism, opened.user) == ("PLAIN", "app")

        for options in (
            {"user": "app", "password": "wrong", "allowed_mechs": "PLAIN"},
            {"user": "other", "password": "right", "allowed_mechs": "PLAIN"},
            {"allowed_mechs": "ANONYMOUS"},
        ):
            refused = Observer(peer.url, **options).run()
            assert not refused.opened
            assert refused.transport_condition is not None
            assert refused.transport_condition.name == "amqp:unauthorized-access"
        assert len(peer.opens) == 1


def test_sasl_plain_takes_any_credentials_without_fixed_ones(peer: AmqpPeer) -> None:
    seen = Observer(peer.url, user="anyone", password="anything", allowed_mechs="PLAIN").run()
    assert seen.opened
    assert peer.opens[0].user == "anyone"


def test_a_client_without_sasl_gets_in_when_no_credentials_are_set(peer: AmqpPeer) -> None:
    seen = Observer(peer.url, sasl_enabled=False).run()
    assert seen.opened
    assert peer.opens[0].mechanism is None


def test_config_repr_hides_the_password() -> None:
    assert "right" not in repr(AmqpPeerConfig(credentials=("app", "right")))


# --- messages from clients ---------------------------------------------------------------------


def test_messages_are_recorded_and_accepted(peer: AmqpPeer) -> None:
    client = connect(peer)
    try:
        sender = client.create_sender("orders")
        delivery = sender.send(Message(body=b"\x00one", id="m-1", properties={"k": "v"}))
        assert delivery.remote_state == Delivery.ACCEPTED
        anonymous = client.create_sender(None)
        anonymous.send(Message(body="two", address="audit", durable=True))
    finally:
        client.close()
    first, second = peer.received
    assert (first.address, first.body, first.message_id) == ("orders", b"\x00one", "m-1")
    assert first.properties == {"k": "v"}
    assert (first.connection, first.outcome, first.durable) == (0, "accepted", False)
    assert (second.address, second.body, second.durable) == ("audit", "two", True)


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        ("accepted", Delivery.ACCEPTED),
        ("rejected", Delivery.REJECTED),
        ("released", Delivery.RELEASED),
        ("modified", Delivery.MODIFIED),
    ],
)
def test_dispositions(peer: AmqpPeer, outcome: Any, state: int) -> None:
    peer.config = AmqpPeerConfig(outcome=outcome)
    client = connect(peer)
    try:
        sender = client.create_sender("q")
        every_state = [Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED]
        with pytest.raises(SendException) as settled:
            sender.send(Message(body="x"), error_states=every_state)
        assert settled.value.state == state
    finally:
        client.close()
    assert [m.outcome for m in peer.received] == [outcome]


def test_held_messages_settle_on_demand(peer: AmqpPeer) -> None:
    peer.config = AmqpPeerConfig(outcome="held")
    client = connect(peer)
    try:
        sender = client.create_sender("q")
        delivery = sender.link.send(Message(body="x"))
        assert isinstance(delivery, Delivery)
        # The peer answers frames in order: once it answered this attach, it has handled the
        # transfer before it (and held it).
        client.create_receiver("barrier")
        assert [m.outcome for m in peer.received] == ["held"]
        assert not delivery.settled
        assert peer.settle_held("released") == 1
        client.wait(lambda: delivery.settled, timeout=WAIT)
        # Released, not accepted: the peer had not settled it before it was told to.
        assert delivery.remote_state == Delivery.RELEASED
    finally:
        client.close()


def test_a_large_message_in_both_directions(peer: AmqpPeer) -> None:
    body = bytes(range(256)) * 2000  # 512 KB: many frames, many socket reads and writes
    client = connect(peer)
    try:
        client.create_sender("big").send(Message(body=body))
        (received,) = peer.wait_received(1)
        assert received.body == body
        peer.enqueue("back", body)
        receiver = client.create_receiver("back")
        assert receiver.receive().body == body
        receiver.accept()
    finally:
        client.close()


# --- messages to clients -----------------------------------------------------------------------


def test_receivers_drain_the_queue_as_their_credit_allows(peer: AmqpPeer) -> None:
    peer.enqueue("jobs", "a", "b", "c", properties={"n": 1})
    assert peer.queued("jobs") == 3
    client = connect(peer)
    try:
        receiver = client.create_receiver("jobs", credit=0)
        fetcher = receiver.fetcher
        assert fetcher is not None
        receiver.link.flow(2)
        client.wait(lambda: fetcher.has_message == 2, timeout=WAIT)
        assert peer.queued("jobs") == 1  # two credits, two messages: the third stays
        first = receiver.receive()
        assert first.body == "a"
        assert cast("object", first.properties) == {"n": 1}  # proton types it as None
        receiver.accept()
        assert receiver.receive().body == "b"
        receiver.accept()
        receiver.link.flow(5)
        assert receiver.receive().body == "c"
        receiver.accept()
        assert peer.queued("jobs") == 0
    finally:
        client.close()


def test_released_and_unsettled_messages_go_back_to_the_queue(peer: AmqpPeer) -> None:
    peer.enqueue("jobs", "a", "b")
    client = connect(peer)
    try:
        first = client.create_receiver("jobs", credit=1)
        assert first.receive().body == "a"
        first.release(delivered=False)
        # proton writes a detach after the disposition before it: once the peer answered the
        # detach, "a" is back at the head of the queue.
        first.close()  # type: ignore[no-untyped-call]  # proton leaves it unannotated
        second = client.create_receiver("jobs", credit=2)
        assert second.receive().body == "a"
        assert second.receive().body == "b"
    finally:
        client.close()  # both still unsettled: they go back to the queue, in order
    again = connect(peer)
    try:
        receiver = again.create_receiver("jobs", credit=2)
        for body in ("a", "b"):
            redelivered = receiver.receive()
            assert (redelivered.body, redelivered.delivery_count) == (body, 1)
            receiver.accept()
    finally:
        again.close()
    assert peer.queued("jobs") == 0


def test_a_detached_receiver_returns_what_it_did_not_settle(peer: AmqpPeer) -> None:
    peer.enqueue("jobs", "a", "b")
    client = connect(peer)
    try:
        receiver = client.create_receiver("jobs", credit=2)
        assert receiver.receive().body == "a"
        receiver.close()  # type: ignore[no-untyped-call]  # returns once the peer answered
        assert peer.queued("jobs") == 2
    finally:
        client.close()


@pytest.mark.parametrize(
    "greeting",
    [b"GET / HTTP/1.1\r\n\r\n", SASL_HEADER + b"\xff\xff\xff\xff\x02\x01\x00\x00"],
    ids=["not-amqp", "oversized-sasl-frame"],
)
def test_garbage_gets_the_sasl_header_and_a_closed_socket(peer: AmqpPeer, greeting: bytes) -> None:
    with socket.create_connection((peer.host, peer.port), timeout=WAIT) as sock:
        sock.sendall(greeting)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(SASL_HEADER)
    assert peer.opens == []
    connect(peer).close()  # the peer still serves others


# --- ending connections ------------------------------------------------------------------------


def test_close_ends_every_connection_and_the_listener_at_once() -> None:
    peer = AmqpPeer().start()
    clients = [connect(peer), connect(peer)]
    assert peer.connections == 2
    peer.close()
    for client in clients:
        try:
            # A disconnect, not a timeout: the peer reset the connection when it closed.
            with pytest.raises(ConnectionException):
                client.wait(lambda: False, timeout=WAIT)
        finally:
            client.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((peer.host, peer.port), timeout=WAIT).close()
    peer.close()  # idempotent


def test_drop_connections_resets_them_and_keeps_listening(peer: AmqpPeer) -> None:
    client = connect(peer)
    try:
        assert peer.drop_connections() == 1
        with pytest.raises(ConnectionException):
            client.wait(lambda: False, timeout=WAIT)
    finally:
        client.close()
    again = connect(peer)
    again.close()
    assert len(peer.opens) == 2


def test_a_peer_is_started_once() -> None:
    peer = AmqpPeer()
    peer.close()  # never started: nothing to close
    with pytest.raises(RuntimeError):
        peer.start()
    with AmqpPeer() as running, pytest.raises(RuntimeError):
        running.start()
