"""Dynamic discovery on a fake clock: ActiveMQ multicast and Artemis UDP-group sources.

The sources read from a queue of datagrams that waits on the fake clock (the socket is the only
part left out; the namespace integration test covers it with real brokers).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Iterator

import pytest
from failover_client.uri import BrokerAddress, ServerListAction, parse

from failover_client import ConfigurationError, FailoverConnection
from failover_client.testing import FakeClock, FakeConnector
from failover_client.testing.brokers._broadcast import (
    encode_artemis_broadcast,
    encode_artemis_connector,
)
from failover_client.topology import (
    ArtemisUdpSource,
    BaseSink,
    MulticastSource,
    encode_multicast_advert,
    parse_multicast_advert,
    uri_sources,
)
from failover_client.topology._heard import HeardTable
from failover_client.topology._listening import DecodeError

SAFETY = 5.0  # real seconds, only against a hung test


class QueueDatagrams:
    """Datagrams a test puts; ``receive`` waits on the fake clock, as the socket waits on time."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._items: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.closed = False

    def put(self, *packets: bytes) -> None:
        with self._lock:
            self._items.extend(packets)
            self._ready.set()

    def receive(self, timeout: float) -> bytes | None:
        self._clock.wait(self._ready, timeout)
        with self._lock:
            if not self._items:
                if not self.closed:
                    self._ready.clear()
                return None
            packet = self._items.popleft()
            if not self._items and not self.closed:
                self._ready.clear()
            return packet

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._ready.set()


class Sink(BaseSink):
    """Records every list pushed."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.lists: list[tuple[BrokerAddress, ...]] = []
        self.actions: list[ServerListAction | None] = []
        self.failures: list[str] = []

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: object = None,
        weights: object = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.lists.append(tuple(update))
            self.actions.append(action)
            self.cond.notify_all()

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append(error)
            self.cond.notify_all()

    def wait_for(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.lists) >= count, SAFETY)

    def latest(self) -> tuple[BrokerAddress, ...]:
        with self.cond:
            return self.lists[-1]


B1 = BrokerAddress("stomp", "b1", 61613)
B2 = BrokerAddress("stomp", "b2", 61613)
TCP_MAP = {"tcp": ("stomp", 61613)}


def alive(service: str, group: str = "default") -> bytes:
    return encode_multicast_advert(service, group=group)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def multicast(clock: FakeClock) -> Iterator[tuple[MulticastSource, QueueDatagrams, Sink]]:
    queue = QueueDatagrams(clock)
    source = MulticastSource(scheme_map=TCP_MAP, clock=clock, datagrams=lambda: queue)
    sink = Sink()
    source.start(sink)
    try:
        yield source, queue, sink
    finally:
        source.stop()


# --- the ActiveMQ 5.x announcement -------------------------------------------------------------


def test_the_announcement_activemq_sends_is_decoded():
    # MulticastDiscoveryAgent.doAdvertizeSelf: getType() + "alive." + "%localhost%" + service,
    # getType() being group + ".ActiveMQ-4.".
    packet = b"default.ActiveMQ-4.alive.%localhost%tcp://broker1:61616"
    advert = parse_multicast_advert(packet)
    assert advert is not None
    assert (advert.alive, advert.broker_name, advert.service) == (
        True,
        "localhost",
        "tcp://broker1:61616",
    )
    assert encode_multicast_advert("tcp://broker1:61616") == packet
    dead = parse_multicast_advert(b"default.ActiveMQ-4.dead.%localhost%tcp://broker1:61616")
    assert dead is not None
    assert not dead.alive


def test_another_group_s_packet_is_not_ours_and_a_malformed_one_says_why():
    assert parse_multicast_advert(alive("tcp://b1:61616", group="blue")) is None
    assert parse_multicast_advert(alive("tcp://b1:61616", group="blue"), "blue") is not None
    for bad, why in (
        (b"default.ActiveMQ-4.sleepy.%localhost%tcp://b1:61616", "neither alive"),
        (b"default.ActiveMQ-4.alive.localhost-tcp://b1:61616", "broker name"),
        (b"default.ActiveMQ-4.alive.%localhost%", "not a URL"),
        (b"default.ActiveMQ-4.alive.%x%\xff\xfe", "UTF-8"),
    ):
        with pytest.raises(DecodeError, match=why):
            parse_multicast_advert(bad)


# --- who is alive -------------------------------------------------------------------------------


def test_the_table_keeps_an_announcer_until_its_timeout_and_is_bounded():
    table: HeardTable[str, int] = HeardTable(5.0, limit=2)
    assert table.heard("a", 1, now=0.0)
    assert not table.heard("a", 1, now=4.0)  # the same again: no change, heard later
    assert table.heard("b", 2, now=1.0)
    assert not table.heard("c", 3, now=1.0)  # full
    assert table.refused == 1
    assert not table.expire(5.9)  # a: heard at 4
    assert table.expire(6.0)
    assert table.values() == [1]
    assert table.next_expiry() == 9.0
    assert table.forget("a")
    assert not table.forget("a")


# --- the multicast source ------------------------------------------------------------------------


def test_a_broker_s_announcement_adds_it_mapped_and_silence_removes_it(multicast, clock):
    _, queue, sink = multicast
    queue.put(alive("tcp://b1:61616"))
    assert sink.wait_for(1)
    assert sink.latest() == (B1,)  # OpenWire URL mapped to STOMP on 61613
    assert sink.actions == ["replace"]
    assert clock.wait_for_deadline(5.0)  # heard at 0: expires at 5 unless heard again
    for _ in range(9):  # announcements every 0.5 s keep it; nothing new is pushed
        clock.advance(0.5)
        queue.put(alive("tcp://b1:61616"))
        assert clock.wait_for_deadline(clock.monotonic() + 5.0)  # taken: 5 s from now
    clock.advance(4.9)
    assert clock.wait_for_deadline(9.5)  # woke for nothing, waits for the rest
    assert len(sink.lists) == 1
    clock.advance(0.1)  # ten keep-alive intervals (5 s) without an announcement
    assert sink.wait_for(2)
    assert sink.latest() == ()


def test_a_dead_announcement_removes_the_broker_at_once(multicast, clock):
    _, queue, sink = multicast
    queue.put(alive("tcp://b1:61616"), alive("tcp://b2:61616"))
    assert sink.wait_for(2)
    assert sink.latest() == (B1, B2)
    queue.put(encode_multicast_advert("tcp://b1:61616", alive=False))
    assert sink.wait_for(3)
    assert sink.latest() == (B2,)
    assert clock.monotonic() == 0.0


def test_bad_packets_and_other_groups_are_skipped_and_logged_once(multicast, caplog):
    _, queue, sink = multicast
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        queue.put(b"\x00garbage", alive("tcp://x:61616", group="other"))
        queue.put(*[b"default.ActiveMQ-4.alive.nope"] * 5, alive("tcp://b1:61616"))
        assert sink.wait_for(1)
    assert sink.latest() == (B1,)
    assert len([r for r in caplog.records if "skipped a packet" in r.getMessage()]) == 1


def test_a_broker_that_comes_back_is_added_again(multicast, clock):
    _, queue, sink = multicast
    queue.put(alive("tcp://b1:61616"))
    assert sink.wait_for(1)
    clock.advance(5.0)
    assert sink.wait_for(2)
    queue.put(alive("tcp://b1:61616"))
    assert sink.wait_for(3)
    assert sink.lists == [(B1,), (), (B1,)]


def test_stop_ends_the_thread_without_time_passing(clock):
    queue = QueueDatagrams(clock)
    source = MulticastSource(clock=clock, datagrams=lambda: queue)
    source.start(Sink())
    assert clock.wait_for_waiters(1)
    source.stop()
    source.stop()
    assert queue.closed
    assert "stopped" in repr(source)


def test_a_group_that_cannot_be_joined_is_reported_and_retried(clock):
    tries: list[int] = []
    queue = QueueDatagrams(clock)

    def join() -> QueueDatagrams:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("No such device")
        return queue

    source = MulticastSource(clock=clock, datagrams=join, scheme_map=TCP_MAP)
    sink = Sink()
    source.start(sink)
    try:
        with sink.cond:
            assert sink.cond.wait_for(lambda: sink.failures, SAFETY)
        assert "No such device" in sink.failures[0]
        assert clock.wait_for_deadline(1.0)
        clock.advance(1.0)
        queue.put(alive("tcp://b1:61616"))
        assert sink.wait_for(1)
        assert len(tries) == 2
    finally:
        source.stop()


# --- the URI ------------------------------------------------------------------------------------


def _sources(uri: str) -> list[object]:
    parsed = parse(uri)
    return list(
        uri_sources(
            parsed.members,
            parsed.options,
            parsed.agents,
            login=None,
            passcode=None,
            clock=FakeClock(),
        )
    )


def test_the_uris_of_the_documents_build_the_sources():
    (classic,) = _sources("discovery:(multicast://default)?initialReconnectDelay=100")
    assert isinstance(classic, MulticastSource)
    assert (classic.address, classic.port, classic.group, classic.keep_alive) == (
        "239.255.2.3",
        6155,
        "default",
        0.5,
    )
    (grouped,) = _sources(
        "discovery:(multicast://239.255.2.4:6156?group=blue&keepAliveInterval=1000&timeToLive=2)"
    )
    assert isinstance(grouped, MulticastSource)
    assert (grouped.address, grouped.port, grouped.group, grouped.keep_alive) == (
        "239.255.2.4",
        6156,
        "blue",
        1.0,
    )
    (artemis,) = _sources("udp://231.7.7.7:9876?refreshTimeout=3000&discoveryInitialWaitTimeout=50")
    assert isinstance(artemis, ArtemisUdpSource)
    assert (artemis.address, artemis.port, artemis.refresh_timeout) == ("231.7.7.7", 9876, 3.0)
    (wrapped,) = _sources("discovery:(udp://231.7.7.7:9876?initialWaitTimeout=100)")
    assert isinstance(wrapped, ArtemisUdpSource)
    for text in ("discovery:multicast://default", "failover:(discovery:(multicast://default))"):
        (same,) = _sources(text)
        assert isinstance(same, MulticastSource)
        assert (same.address, same.port) == ("239.255.2.3", 6155)
    (amqp,) = _sources("udp://231.7.7.7:9876?topology.schemeMap=tcp:amqp,ssl:amqps")
    assert isinstance(amqp, ArtemisUdpSource)
    assert amqp.brokers() == []


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("discovery:(multicast://default?grop=x)", "unknown option 'grop'"),
        ("discovery:(multicast://default?keepAliveInterval=0)", "keepAliveInterval must be"),
        ("discovery:(multicast://10.0.0.1:6155)", "not an IPv4 multicast group"),
        ("discovery:(multicast://default?interface=eth0)", "interface must be an IPv4"),
        ("udp://231.7.7.7:9876?refreshTimeout=-1", "refreshTimeout"),
        ("udp://231.7.7.7:9876?localAddress=somewhere", "localAddress must be an IPv4"),
    ],
)
def test_bad_agent_options_are_refused_by_name(uri, message):
    with pytest.raises(ConfigurationError, match=message):
        _sources(uri)


def test_jgroups_is_refused_as_java_only():
    with pytest.raises(ConfigurationError, match="only a Java process can join"):
        parse("jgroups://channel?file=jgroups.xml")


# --- a connection -------------------------------------------------------------------------------


def test_a_connection_with_no_members_connects_to_the_first_announced_broker(clock):
    queue = QueueDatagrams(clock)
    source = MulticastSource(scheme_map=TCP_MAP, clock=clock, datagrams=lambda: queue)
    conn = FailoverConnection(
        "failover:()?updateURIsURL=unused",
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology=[source],
        topology_factory=lambda *a, **k: [],
    )
    try:
        queue.put(alive("tcp://b1:61616"))
        conn.connect()
        assert conn.broker == str(B1)
        assert [s.address for s in conn.pool.states()] == [B1]
    finally:
        conn.close()


# --- the Artemis UDP-group source ---------------------------------------------------------------


def _broadcast(node: str, host: str, port: str = "61616") -> bytes:
    connector = encode_artemis_connector("artemis", [("port", port), ("host", host)])
    return encode_artemis_broadcast(node, f"unique-{node}", [connector])


def test_artemis_nodes_come_and_go_with_their_broadcasts(clock):
    queue = QueueDatagrams(clock)
    source = ArtemisUdpSource("231.7.7.7", 9876, clock=clock, datagrams=lambda: queue)
    sink = Sink()
    source.start(sink)
    try:
        queue.put(_broadcast("node-1", "10.0.0.5"))
        assert sink.wait_for(1)
        # The all-protocols acceptor: tcp becomes stomp on the advertised port.
        assert sink.latest() == (BrokerAddress("stomp", "10.0.0.5", 61616),)
        assert clock.wait_for_deadline(10.0)  # refreshTimeout: 10 s by default
        clock.advance(2.0)
        queue.put(_broadcast("node-2", "10.0.0.6"), _broadcast("node-1", "10.0.0.5"))
        assert sink.wait_for(2)
        assert clock.wait_for_deadline(12.0)  # both heard at 2 s
        clock.advance(2.0)
        queue.put(_broadcast("node-1", "10.0.0.5"))  # node-2 falls silent
        assert clock.wait_for_deadline(12.0)
        clock.advance(8.0)
        assert sink.wait_for(3)
        assert sink.latest() == (BrokerAddress("stomp", "10.0.0.5", 61616),)
        queue.put(b"\x00\x00\x00\x01")  # rubbish on the group: skipped, the source goes on
        queue.put(_broadcast("node-1", "10.0.0.7"))  # the node moved: one entry per node id
        assert sink.wait_for(4)
        assert sink.latest() == (BrokerAddress("stomp", "10.0.0.7", 61616),)
    finally:
        source.stop()


def test_a_first_connect_waits_for_the_artemis_initial_wait_not_one_connect_timeout(clock):
    queue = QueueDatagrams(clock)

    def factory(members, options, agents, **_):  # the URI's udp:// agent, fed by the queue
        (agent,) = agents
        return [ArtemisUdpSource(agent.host, agent.port, clock=clock, datagrams=lambda: queue)]

    conn = FailoverConnection(
        "udp://231.7.7.7:9876?initialWaitTimeout=20000",
        connector=FakeConnector(clock=clock),
        clock=clock,
        topology_factory=factory,
    )
    outcome: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: outcome.append(_connect(conn)))
    thread.start()
    try:
        assert clock.wait_for_deadline(20.0)  # waits 20 s for a broadcast, not connectTimeout
        clock.advance(15.0)
        queue.put(_broadcast("node-1", "10.0.0.5"))
        thread.join(SAFETY)
        assert outcome == [None]
        assert conn.broker == "stomp://10.0.0.5:61616"
    finally:
        conn.close()
        thread.join(SAFETY)


def _connect(conn: FailoverConnection) -> BaseException | None:
    try:
        conn.connect()
    except BaseException as exc:
        return exc
    return None


def test_a_socket_that_breaks_is_reported_and_the_group_joined_again(clock):
    class Broken(QueueDatagrams):
        def receive(self, timeout: float) -> bytes | None:
            raise OSError("Network is down")

    queue = QueueDatagrams(clock)
    opened: list[QueueDatagrams] = []

    def join() -> QueueDatagrams:
        opened.append(Broken(clock) if not opened else queue)
        return opened[-1]

    source = MulticastSource(clock=clock, datagrams=join, scheme_map=TCP_MAP)
    sink = Sink()
    source.start(sink)
    try:
        with sink.cond:
            assert sink.cond.wait_for(lambda: sink.failures, SAFETY)
        assert "Network is down" in sink.failures[0]
        assert clock.wait_for_deadline(1.0)  # the back-off's first delay
        clock.advance(1.0)
        queue.put(alive("tcp://b1:61616"))
        assert sink.wait_for(1)
        assert opened[0].closed
        assert len(opened) == 2
    finally:
        source.stop()


def test_tls_stays_tls_and_two_connectors_of_one_broker_are_one_entry(clock):
    queue = QueueDatagrams(clock)
    default = parse("discovery:(multicast://default)")
    (built,) = uri_sources(
        default.members, default.options, default.agents, login=None, passcode=None, clock=clock
    )
    assert isinstance(built, MulticastSource)
    source = MulticastSource(scheme_map=built._scheme_map, clock=clock, datagrams=lambda: queue)
    sink = Sink()
    source.start(sink)
    try:
        queue.put(
            alive("ssl://b1:61617"),  # ActiveMQ's default map: stomp+ssl on 61612
            alive("tcp://b2:61616"),
            alive("stomp://b2:61613"),  # b2 announces its STOMP connector too: one broker
            alive("tcp://b3:61616"),  # read after the others: its list comes last
        )
        assert sink.wait_for(3)
        b3 = BrokerAddress("stomp", "b3", 61613)
        assert sink.lists == [
            (BrokerAddress("stomp+ssl", "b1", 61612),),
            (BrokerAddress("stomp+ssl", "b1", 61612), B2),
            (BrokerAddress("stomp+ssl", "b1", 61612), B2, b3),
        ]
    finally:
        source.stop()
