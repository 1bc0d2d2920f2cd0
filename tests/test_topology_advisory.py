"""The ``advisory`` topology source on a fake clock and fake brokers: parsing, mapping, the set."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions, ServerListAction

from failover_client import ConfigurationError, Event, FailoverConnection, TopologyChanged
from failover_client.testing import FakeClock, FakeConnector, FakeSession
from failover_client.topology import (
    ADVISORY_TOPIC,
    AdvisoryError,
    AdvisorySource,
    BaseSink,
    Bridge,
    TopologySource,
    map_broker_url,
    parse_advisory,
    topology_source_factory,
)

SAFETY = 30.0  # real seconds, only against a hung test (a loaded machine took over 5)
SUB = "failover-client-advisory"
A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
C = BrokerAddress("stomp", "c", 61613)
# In URI order and without reconnect delay: a fail-over needs no clock advance, only settling.
FAST = FailoverOptions(initial_reconnect_delay=0.0, reconnect_delay=0.0, randomize=False)


def advisory(
    name: str, url: str, *, started: bool = True, origin: str = "net-0"
) -> tuple[bytes, dict[str, str]]:
    """A bridge advisory as ActiveMQ 5.17 sends it over STOMP (body shortened)."""
    info = {
        "BrokerInfo": {
            "commandId": 3,
            "brokerId": {"value": f"ID:{name}-1"},
            "brokerURL": url,
            "peerBrokerInfos": [""],
            "brokerName": name,
        }
    }
    headers = {
        "started": "true" if started else "false",
        "originBrokerName": origin,
        "type": "Advisory",
        "transformation": "jms-advisory-json",
    }
    return json.dumps(info).encode(), headers


class Sink(BaseSink):
    """Records every update; ``fail`` makes the next one raise (a buggy sink)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[tuple[tuple[BrokerAddress, ...], str, ServerListAction | None]] = []
        self.pushed: list[bool] = []
        self.fail = False

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append((tuple(update), source, action))
            self.pushed.append(pushed)
            self.cond.notify_all()
            if self.fail:
                self.fail = False
                raise RuntimeError("sink bug")

    def wait_for(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.updates) >= count, SAFETY)

    def wait_for_list(self, brokers: tuple[BrokerAddress, ...]) -> bool:
        with self.cond:
            return self.cond.wait_for(
                lambda: bool(self.updates) and self.updates[-1][0] == brokers, SAFETY
            )

    def lists(self) -> list[tuple[BrokerAddress, ...]]:
        with self.cond:
            return [brokers for brokers, _, _ in self.updates]


# --- parsing ------------------------------------------------------------------------------------


def test_a_started_and_a_stopped_bridge_name_the_peer():
    body, headers = advisory("net-1", "stomp://b:61613")
    assert parse_advisory(body, headers) == Bridge("net-1", B, started=True)
    body, headers = advisory("net-1", "stomp://b:61613", started=False)
    assert parse_advisory(body, headers) == Bridge("net-1", B, started=False)


def test_the_real_body_with_nested_peer_infos_names_the_top_level_peer():
    body = (
        b'{"BrokerInfo":{"commandId":3,"responseRequired":false,"brokerId":{"value":"ID:x"},'
        b'"brokerURL":"stomp://127.0.0.1:29204","slaveBroker":false,"peerBrokerInfos":'
        b'[{"BrokerInfo":{"brokerURL":"stomp://127.0.0.1:29200","brokerName":"net-0"}}],'
        b'"brokerName":"net-2","connectionId":0}}'
    )
    bridge = parse_advisory(body, {"started": "true", "originBrokerName": "net-0"})
    assert bridge == Bridge("net-2", BrokerAddress("stomp", "127.0.0.1", 29204), started=True)


def test_a_stop_needs_only_the_name_but_a_start_needs_a_usable_url():
    body, headers = advisory("net-1", "vm://localhost", started=False)
    assert parse_advisory(body, headers) == Bridge("net-1", None, started=False)
    body, headers = advisory("net-1", "vm://localhost")
    with pytest.raises(AdvisoryError, match="no port"):
        parse_advisory(body, headers)


def test_a_peer_without_a_name_is_known_by_its_url():
    body = json.dumps({"BrokerInfo": {"brokerURL": "stomp://b:61613"}}).encode()
    assert parse_advisory(body, {"started": "true"}).peer == "stomp://b:61613"


@pytest.mark.parametrize(
    ("body", "headers", "reason"),
    [
        (b"not json", {"started": "true"}, "not JSON"),
        (b"[1, 2]", {"started": "true"}, "no BrokerInfo"),
        (b'{"BrokerInfo": "x"}', {"started": "true"}, "no BrokerInfo"),
        (b'{"BrokerInfo": {"brokerName": "n"}}', {"started": "true"}, "no brokerURL"),
        (b'{"BrokerInfo": {"brokerURL": 5}}', {"started": "true"}, "no brokerURL"),
        (advisory("n", "stomp://b:1")[0], {}, "header 'started' is None"),
        (advisory("n", "stomp://b:1")[0], {"started": "maybe"}, "not true or false"),
        (b"[" * 100_000 + b"]" * 100_000, {"started": "true"}, "exceeds"),
        (b"[" * 30_000 + b"]" * 30_000, {"started": "true"}, "not JSON"),
        (
            json.dumps({"BrokerInfo": {"brokerURL": "stomp://b:1", "brokerName": "x" * 300}}),
            {"started": "true"},
            "not a short string",
        ),
    ],
)
def test_malformed_and_hostile_advisories_say_why(body, headers, reason):
    data = body.encode() if isinstance(body, str) else body
    with pytest.raises(AdvisoryError, match=reason):
        parse_advisory(data, headers)


# --- mapping advertised URLs --------------------------------------------------------------------


def test_stomp_urls_are_used_as_they_are_and_drop_their_query():
    assert map_broker_url("stomp://b:61613?transport.x=1", "stomp", None) == B
    assert map_broker_url("stomp+ssl://b:61614", "stomp", None) == BrokerAddress(
        "stomp+ssl", "b", 61614
    )
    assert map_broker_url("stomp://[::1]:61613", "stomp", None) == BrokerAddress(
        "stomp", "::1", 61613
    )


def test_openwire_urls_need_a_scheme_map():
    with pytest.raises(AdvisoryError, match=r"does not speak stomp .*scheme_map"):
        map_broker_url("tcp://b:61616", "stomp", None)
    assert map_broker_url("tcp://b:61616", "stomp", {"tcp": ("stomp", 61613)}) == B
    assert map_broker_url("ssl://b:61617", "stomp", {"ssl": ("stomp+ssl", None)}) == (
        BrokerAddress("stomp+ssl", "b", 61617)
    )


def test_a_callable_scheme_map_may_rewrite_skip_or_fail():
    def rewrite(scheme: str, host: str, port: int) -> BrokerAddress | None:
        if host == "skip":
            return None
        if host == "boom":
            raise RuntimeError("map bug")
        if host == "amqp":
            return BrokerAddress("amqp", host, 5672)
        return BrokerAddress("stomp", host.replace("internal", "public"), port - 3)

    assert map_broker_url("tcp://b.internal:61616", "stomp", rewrite) == BrokerAddress(
        "stomp", "b.public", 61613
    )
    with pytest.raises(AdvisoryError, match="skipped"):
        map_broker_url("tcp://skip:61616", "stomp", rewrite)
    with pytest.raises(AdvisoryError, match=r"failed .*map bug"):
        map_broker_url("tcp://boom:61616", "stomp", rewrite)
    with pytest.raises(AdvisoryError, match="not a stomp broker"):
        map_broker_url("tcp://amqp:61616", "stomp", rewrite)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("stomp://0.0.0.0:61613", "wildcard address"),
        ("stomp://[::]:61613", "wildcard address"),
        ("stomp://224.0.0.1:61613", "multicast group"),
        ("stomp://b:99999", "not a URL"),
        ("stomp://b:0", "no port"),
        ("stomp://b", "no port"),
        ("stomp://:61613", "no host"),
        ("stomp://b%20c:61613", "not a host name"),
        ("stomp://" + "a" * 300 + ":61613", "too long"),
        ("stomp://b:61613/" + "x" * 2000, "too long"),
        ("http://b:80", "does not speak stomp"),
    ],
)
def test_absurd_urls_are_refused(url, reason):
    with pytest.raises(AdvisoryError, match=reason):
        map_broker_url(url, "stomp", None)


# --- the source on fake brokers -----------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def connector(clock: FakeClock) -> FakeConnector:
    return FakeConnector(clock=clock)


def subscribed(connector: FakeConnector, key: str) -> FakeSession:
    """The live session to ``key`` on which the source subscribed to the advisories."""

    def found() -> list[FakeSession]:
        return [
            s
            for s in connector.sessions
            if s.alive and s.address.key == key and SUB in s.subscriptions
        ]

    assert connector.wait_until(lambda: bool(found()))
    session = found()[-1]
    assert session.subscriptions[SUB].destination == ADVISORY_TOPIC
    assert dict(session.subscriptions[SUB].headers) == {"transformation": "jms-advisory-json"}
    return session


def deliver(session: FakeSession, *messages: tuple[bytes, dict[str, str]]) -> None:
    for body, headers in messages:
        session.deliver(SUB, body, headers=headers, destination=ADVISORY_TOPIC)


@pytest.fixture
def running(clock, connector) -> Iterator[tuple[AdvisorySource, Sink]]:
    source = AdvisorySource((A,), clock=clock, connector=connector, options=FAST, name="net")
    sink = Sink()
    source.start(sink)
    try:
        yield source, sink
    finally:
        source.stop()


def settled(source: AdvisorySource, clock: FakeClock, heard: int) -> None:
    """Wait until ``heard`` advisories were handled, then end the settle window."""
    assert source.wait_heard(heard, SAFETY)
    assert clock.wait_for_deadline(source.settle)
    clock.advance(source.settle)


def test_the_replay_is_pushed_once_as_the_whole_network(running, clock, connector):
    source, sink = running
    session = subscribed(connector, "a:61613")
    deliver(session, advisory("net-1", "stomp://b:61613"), advisory("net-2", "stomp://c:61613"))
    settled(source, clock, 2)
    assert sink.wait_for(1)
    assert sink.updates == [((A, B, C), "net", "replace")]
    assert sink.pushed == [True]  # the brokers sent it: updateURIsSupported=false ignores it
    assert "heard=2, skipped=0, running" in repr(source)


def test_pushes_follow_bridges_and_only_on_change(running, clock, connector):
    source, sink = running
    session = subscribed(connector, "a:61613")
    deliver(session, advisory("net-1", "stomp://b:61613"), advisory("net-2", "stomp://c:61613"))
    settled(source, clock, 2)
    assert sink.wait_for(1)
    deliver(session, advisory("net-2", "stomp://c:61613", started=False))
    assert sink.wait_for(2)
    # A repeated start and a stop of an unknown peer change nothing; the next stop does.
    deliver(
        session,
        advisory("net-1", "stomp://b:61613"),
        advisory("net-9", "stomp://z:61613", started=False),
        advisory("net-1", "stomp://b:61613", started=False),
    )
    assert sink.wait_for(3)
    deliver(session, advisory("net-2", "stomp://c:61613"))
    assert sink.wait_for(4)
    assert sink.lists() == [(A, B, C), (A, B), (A,), (A, C)]


def test_bad_advisories_are_logged_and_skipped(running, clock, connector, caplog):
    source, sink = running
    caplog.set_level(logging.WARNING, logger="failover_client.topology")
    session = subscribed(connector, "a:61613")
    body, headers = advisory("net-1", "stomp://b:61613")
    deliver(
        session,
        (b"{oops", headers),
        (body, {"originBrokerName": "net-0"}),
        advisory("net-3", "stomp://0.0.0.0:61613"),
        advisory("net-4", "tcp://d:61616"),
        (b"x" * 100_000, headers),
        (body, headers),
    )
    settled(source, clock, 6)
    assert sink.wait_for(1)
    assert sink.lists() == [(A, B)]
    assert source.skipped == 5
    reasons = [r.getMessage() for r in caplog.records if "skipped an advisory" in r.getMessage()]
    assert len(reasons) == 1  # the others within the minute are counted, not written
    assert "from 'net-0': body is not JSON" in reasons[0]
    # Each reason on its own:
    for (each, each_headers), reason in (
        ((body, {"originBrokerName": "net-0"}), "header 'started'"),
        (advisory("net-3", "stomp://0.0.0.0:61613"), "wildcard address"),
        (advisory("net-4", "tcp://d:61616"), "scheme_map"),
        ((b"x" * 100_000, headers), "exceeds"),
    ):
        with pytest.raises(AdvisoryError, match=reason):
            parse_advisory(each, each_headers)


def test_thousands_of_bad_advisories_write_one_line_a_minute_with_a_count(
    running, clock, connector, caplog
):
    source, _ = running
    caplog.set_level(logging.WARNING, logger="failover_client.topology")
    session = subscribed(connector, "a:61613")
    _, headers = advisory("net-1", "stomp://b:61613")
    deliver(session, *[(b"{oops", headers)] * 3_203)
    assert source.wait_heard(3_203, SAFETY)
    clock.advance(60.0)
    deliver(session, (b"{oops", headers))
    assert source.wait_heard(3_204, SAFETY)
    lines = [r.getMessage() for r in caplog.records if "skipped an advisory" in r.getMessage()]
    assert len(lines) == 2
    assert "(3202 similar messages suppressed in the last 60 s)" in lines[1]


def test_a_scheme_map_turns_openwire_peers_into_stomp_ones(clock, connector):
    source = AdvisorySource(
        "failover:(stomp://a:61613)",
        clock=clock,
        connector=connector,
        scheme_map={"tcp": ("stomp", 61613)},
        settle=0.0,
    )
    sink = Sink()
    source.start(sink)
    try:
        session = subscribed(connector, "a:61613")
        deliver(session, advisory("net-1", "tcp://b:61616"))
        # No settle wait: each change is pushed as it is heard (a first (A,) may come before).
        assert sink.wait_for_list((A, B))
    finally:
        source.stop()
    assert sink.lists()[-2:] in ([(A,), (A, B)], [(A, B)])


def test_after_a_failover_the_new_broker_s_replay_replaces_the_old_one(clock, connector):
    source = AdvisorySource((A, B), clock=clock, connector=connector, options=FAST)
    sink = Sink()
    source.start(sink)
    try:
        first = subscribed(connector, "a:61613")
        deliver(first, advisory("net-1", "stomp://b:61613"), advisory("net-2", "stomp://c:61613"))
        settled(source, clock, 2)
        assert sink.wait_for(1)
        connector.behave("a:61613", "refuse")
        first.kill()
        second = subscribed(connector, "b:61613")
        # b's bridge to a is down; it replays only c.
        deliver(second, advisory("net-2", "stomp://c:61613", origin="net-1"))
        assert source.wait_heard(3, SAFETY)
        assert source.wait_connected(2, SAFETY)
        assert clock.wait_for_deadline(clock.monotonic() + source.settle)
        clock.advance(source.settle)
        assert sink.wait_for(2)
    finally:
        source.stop()
    assert sink.lists() == [(A, B, C), (B, C)]


def test_a_broker_that_replays_nothing_has_no_bridges(clock, connector):
    source = AdvisorySource((A, B), clock=clock, connector=connector, options=FAST)
    sink = Sink()
    source.start(sink)
    try:
        first = subscribed(connector, "a:61613")
        deliver(first, advisory("net-2", "stomp://c:61613"))
        settled(source, clock, 1)
        assert sink.wait_for(1)
        connector.behave("a:61613", "refuse")
        first.kill()
        subscribed(connector, "b:61613")
        assert source.wait_connected(2, SAFETY)
        assert clock.wait_for_deadline(clock.monotonic() + source.settle)
        clock.advance(source.settle)
        assert sink.wait_for(2)
    finally:
        source.stop()
    assert sink.lists() == [(A, C), (B,)]


def test_the_watcher_fails_over_to_a_broker_it_learned(clock, connector):
    # Only a is named: the watcher reaches b because it feeds itself what it pushes.
    source = AdvisorySource((A,), clock=clock, connector=connector, options=FAST)
    sink = Sink()
    source.start(sink)
    try:
        first = subscribed(connector, "a:61613")
        deliver(first, advisory("net-1", "stomp://b:61613"))
        settled(source, clock, 1)
        assert sink.wait_for(1)
        connector.behave("a:61613", "refuse")
        first.kill()
        second = subscribed(connector, "b:61613")
        deliver(second, advisory("net-0", "stomp://a:61613", started=False, origin="net-1"))
        assert source.wait_heard(2, SAFETY)
        assert source.wait_connected(2, SAFETY)  # its Connected may come after the advisory
        assert clock.wait_for_deadline(clock.monotonic() + source.settle)
        clock.advance(source.settle)
        assert sink.wait_for(2)
    finally:
        source.stop()
    assert sink.lists() == [(A, B), (B,)]


def test_a_failing_sink_does_not_stop_the_watcher(running, clock, connector):
    source, sink = running
    sink.fail = True
    session = subscribed(connector, "a:61613")
    deliver(session, advisory("net-1", "stomp://b:61613"))
    settled(source, clock, 1)
    assert sink.wait_for(1)
    deliver(session, advisory("net-1", "stomp://b:61613", started=False))
    assert sink.wait_for(2)
    assert sink.lists() == [(A, B), (A,)]


def test_a_failover_connection_takes_the_network(clock, connector):
    source = AdvisorySource((A,), clock=clock, connector=connector, options=FAST)
    changes: list[TopologyChanged] = []
    changed = threading.Event()

    def listen(event: Event) -> None:
        if isinstance(event, TopologyChanged):
            changes.append(event)
            changed.set()

    conn = FailoverConnection(
        (A,), connector=connector, clock=clock, topology=[source], listeners=[listen]
    )
    try:
        conn.connect()
        watcher = subscribed(connector, "a:61613")
        assert len(connector.live_sessions()) == 2  # the data session and the watcher's
        deliver(watcher, advisory("net-1", "stomp://b:61613"))
        settled(source, clock, 1)
        assert changed.wait(SAFETY)
        assert changes == [TopologyChanged(added=(str(B),), removed=(), source="advisory")]
        states = conn.pool.states()
        assert [s.address.key for s in states] == ["a:61613", "b:61613"]
        assert states[1].source == "advisory"
    finally:
        conn.close()
    assert "stopped" in repr(source)


# --- life cycle and configuration ---------------------------------------------------------------


def test_stop_is_idempotent_and_start_twice_is_refused(clock, connector):
    source = AdvisorySource((A,), clock=clock, connector=connector)
    assert isinstance(source, TopologySource)
    source.stop()  # never started
    source.start(Sink())
    with pytest.raises(RuntimeError, match="already started"):
        source.start(Sink())
    source.stop()
    source.stop()
    assert repr(source).startswith("AdvisorySource('advisory'")


def test_it_is_registered_as_advisory():
    assert topology_source_factory("advisory") is AdvisorySource


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"settle": -1}, "settle must be >= 0"),
        ({"name": ""}, "name must be a name"),
        ({"scheme_map": {"tcp": ("amqp", 5672)}}, "not a stomp scheme"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        AdvisorySource((A,), connector=FakeConnector(), **kwargs)


def test_only_stomp_members_can_be_watched():
    with pytest.raises(ConfigurationError, match="must be stomp brokers"):
        AdvisorySource("failover:(amqp://a:5672)", connector=FakeConnector())
    with pytest.raises(ConfigurationError, match="no brokers"):
        AdvisorySource((), connector=FakeConnector())


# --- when the watcher fails ------------------------------------------------------------------


class FailureSink(Sink):
    """Also records the failures a source reports."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[tuple[str, str, int, float | None]] = []

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append((source, error, failures, retry_in))
            self.cond.notify_all()

    def wait_failures(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.failures) >= count, SAFETY)


def test_a_watcher_refused_by_tls_is_reported_and_built_again_with_back_off(
    clock, connector, caplog
):
    caplog.set_level(logging.DEBUG, logger="failover_client.topology")
    connector.behave(A, "tls-fail", "tls-fail", "accept")
    source = AdvisorySource(
        (A,), clock=clock, connector=connector, options=FAST, name="net", min_backoff=2.0
    )
    sink = FailureSink()
    source.start(sink)
    try:
        assert sink.wait_failures(1)
        assert clock.wait_for_deadline(2.0)  # the first retry waits the first back-off
        clock.advance(2.0)
        assert sink.wait_failures(2)
        assert clock.wait_for_deadline(2.0 + 4.0)  # then twice as long
        clock.advance(4.0)
        session = subscribed(connector, "a:61613")  # the third watcher connects
        deliver(session, advisory("net-1", "stomp://b:61613"))
        assert source.wait_heard(1, SAFETY)
        assert clock.wait_for_deadline(6.0 + source.settle)
        clock.advance(source.settle)
        assert sink.wait_for_list((A, B))
    finally:
        source.stop()
    assert [(s, n, r) for s, _, n, r in sink.failures] == [("net", 1, 2.0), ("net", 2, 4.0)]
    assert all(e.startswith("TLSFailure") for _, e, _, _ in sink.failures)
    errors = [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name == "failover_client.topology"
    ]
    assert len(errors) == 1  # the second failure within the minute is counted, not written


def test_stop_forgets_what_the_watcher_learned(running, clock, connector):
    source, sink = running
    session = subscribed(connector, "a:61613")
    deliver(session, advisory("net-1", "stomp://b:61613"))
    settled(source, clock, 1)
    assert sink.wait_for(1)
    source.stop()
    assert "peers=0" in repr(source)


def test_a_flood_of_peers_is_kept_only_up_to_max_brokers(clock, connector):
    options = FAST.replace(topology_max_brokers=3)
    source = AdvisorySource((A,), clock=clock, connector=connector, options=options, name="net")
    sink = Sink()
    source.start(sink)
    try:
        session = subscribed(connector, "a:61613")
        deliver(session, *(advisory(f"net-{n}", f"stomp://h{n}:61613") for n in range(50)))
        settled(source, clock, 50)
        assert sink.wait_for(1)
    finally:
        source.stop()
    assert [b.key for b in sink.lists()[-1]] == ["a:61613", "h0:61613", "h1:61613", "h2:61613"]
    assert source.skipped == 47


def test_a_flapping_bridge_writes_one_info_line_a_minute_not_one_per_flap(
    running, clock, connector, caplog
):
    source, sink = running
    caplog.set_level(logging.INFO, logger="failover_client.topology")
    session = subscribed(connector, "a:61613")
    deliver(session, advisory("net-1", "stomp://b:61613"))
    settled(source, clock, 1)
    assert sink.wait_for(1)
    for flap in range(1, 21):
        deliver(session, advisory("net-1", "stomp://b:61613", started=flap % 2 == 0))
        assert sink.wait_for(1 + flap)  # every flap is pushed
    lines = [r for r in caplog.records if "network of brokers" in r.getMessage()]
    assert len(lines) == 1
    clock.advance(60.0)
    deliver(session, advisory("net-1", "stomp://b:61613", started=False))
    assert sink.wait_for(22)
    lines = [r.getMessage() for r in caplog.records if "network of brokers" in r.getMessage()]
    assert len(lines) == 2
    assert "(20 similar messages suppressed in the last 60 s)" in lines[1]


def test_a_watcher_that_gives_up_after_it_ran_is_built_again(clock, connector):
    connector.behave(A, "accept", "tls-fail", "accept")
    source = AdvisorySource(
        (A,), clock=clock, connector=connector, options=FAST, name="net", min_backoff=2.0
    )
    sink = FailureSink()
    source.start(sink)
    try:
        subscribed(connector, "a:61613").kill()  # its reconnect is refused for good (TLS)
        assert sink.wait_failures(1)
        assert clock.wait_for_deadline(clock.monotonic() + 2.0)
        clock.advance(2.0)
        session = subscribed(connector, "a:61613")  # a new watcher
        deliver(session, advisory("net-1", "stomp://b:61613"))
        assert source.wait_heard(1, SAFETY)
    finally:
        source.stop()
    ((_, error, failures, retry),) = sink.failures
    assert (error.split(":")[0], failures, retry) == ("TLSFailure", 1, 2.0)
