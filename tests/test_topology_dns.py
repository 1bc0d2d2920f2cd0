"""The ``dns`` topology source on a fake clock and a scripted resolver: what it pushes, when."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import dns.exception
import dns.resolver
import pytest
from failover_client.uri import BrokerAddress, ServerListAction

from failover_client import ConfigurationError, FailoverConnection
from failover_client.testing import FakeClock, FakeConnector
from failover_client.topology import (
    ZERO_WEIGHT,
    BaseSink,
    DnsAnswer,
    DnsLookupError,
    DnsSource,
    TopologySink,
    TopologySource,
    _dns,
    topology_source_factory,
)

SAFETY = 5.0  # real seconds, only against a hung test
SRV_NAME = "_stomp._tcp.example.com"


@dataclass(frozen=True)
class Update:
    brokers: tuple[BrokerAddress, ...]
    source: str
    action: ServerListAction | None
    tiers: dict[str, int] | None
    weights: dict[str, float] | None

    @property
    def keys(self) -> list[str]:
        return [b.key for b in self.brokers]


class Sink(BaseSink):
    """Records every update; ``fail`` makes the next one raise (a buggy sink)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[Update] = []
        self.failures: list[tuple[int, float | None]] = []
        self.fail = False

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append((failures, retry_in))

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append(
                Update(
                    tuple(update),
                    source,
                    action,
                    None if tiers is None else dict(tiers),
                    None if weights is None else dict(weights),
                )
            )
            self.cond.notify_all()
            if self.fail:
                self.fail = False
                raise RuntimeError("sink bug")

    def wait_for(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.updates) >= count, SAFETY)

    def last(self) -> Update:
        with self.cond:
            return self.updates[-1]

    def count(self) -> int:
        with self.cond:
            return len(self.updates)


class Zone:
    """A scripted resolver: (name, rdtype) -> an answer or the error to raise; records queries."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[tuple[str, str], DnsAnswer | DnsLookupError] = {}
        self.queries: list[tuple[str, str]] = []

    def set(self, name: str, rdtype: str, entry: DnsAnswer | DnsLookupError) -> None:
        with self.lock:
            self.entries[(name, rdtype)] = entry

    def srv(self, *records: str, ttl: int = 30) -> None:
        self.set(SRV_NAME, "SRV", DnsAnswer(records, ttl))

    def __call__(self, name: str, rdtype: str) -> DnsAnswer:
        with self.lock:
            self.queries.append((name, rdtype))
            entry = self.entries.get((name, rdtype), DnsLookupError("NXDOMAIN", name))
        if isinstance(entry, DnsLookupError):
            raise entry
        return entry


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def zone() -> Zone:
    return Zone()


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def sources() -> Iterator[list[DnsSource]]:
    made: list[DnsSource] = []
    yield made
    for source in made:
        source.stop()


@pytest.fixture
def start(clock, zone, sink, sources):
    """Start a source on the fake clock and scripted zone (SRV unless told otherwise)."""

    def run(name: str = SRV_NAME, **settings: object) -> DnsSource:
        settings.setdefault("min_interval", 1.0)
        settings.setdefault("max_interval", 300.0)
        source = DnsSource(name, clock=clock, resolve=zone, **settings)
        sources.append(source)
        source.start(sink)
        return source

    return run


def key(host: str, port: int = 61613) -> str:
    return BrokerAddress("stomp", host, port).key


# --- what an answer becomes ----------------------------------------------------------------


def test_srv_priorities_become_tiers_and_weights_weights(start, zone, sink, clock):
    zone.srv(
        "20 5 61613 c.example.com.",
        "10 60 61613 A.example.com.",
        "10 40 61614 b.example.com.",
        "30 0 61613 d.example.com.",
        "40 10 61613 a.example.com.",  # a duplicate target: its best record wins
    )
    start()
    assert sink.wait_for(1)
    update = sink.last()
    assert update.keys == [
        key("a.example.com"),
        key("b.example.com", 61614),
        key("c.example.com"),
        key("d.example.com"),
    ]
    assert update.brokers[0] == BrokerAddress("stomp", "a.example.com", 61613)
    assert update.source == f"dns:{SRV_NAME}"
    assert update.action == "replace"
    assert update.tiers == {
        key("a.example.com"): 0,
        key("b.example.com", 61614): 0,
        key("c.example.com"): 1,
        key("d.example.com"): 2,
    }
    assert update.weights == {
        key("a.example.com"): 60.0,
        key("b.example.com", 61614): 40.0,
        key("c.example.com"): 5.0,
        key("d.example.com"): ZERO_WEIGHT,
    }
    assert zone.queries == [(SRV_NAME, "SRV")]
    assert clock.wait_for_deadline(30.0)


def test_a_and_aaaa_records_become_brokers_on_the_given_port(start, zone, sink):
    zone.set("brokers.example.com", "A", DnsAnswer(("192.0.2.7", "192.0.2.1"), 60))
    zone.set("brokers.example.com", "AAAA", DnsAnswer(("::1", "2001:0DB8:0:0::1"), 60))
    start("brokers.example.com", srv=False, port=61613, scheme="stomp+ssl")
    assert sink.wait_for(1)
    update = sink.last()
    assert update.keys == [
        "192.0.2.1:61613",
        "192.0.2.7:61613",
        "[::1]:61613",
        "[2001:db8::1]:61613",
    ]
    assert {b.scheme for b in update.brokers} == {"stomp+ssl"}
    assert str(update.brokers[2]) == "stomp+ssl://[::1]:61613"
    assert update.tiers == dict.fromkeys(update.keys, 0)
    assert update.weights == dict.fromkeys(update.keys, 1.0)


def test_a_name_with_only_ipv4_addresses_is_fine(start, zone, sink, clock):
    zone.set("brokers.example.com", "A", DnsAnswer(("192.0.2.1",), 20))
    zone.set("brokers.example.com", "AAAA", DnsAnswer(()))  # NODATA
    start("brokers.example.com", srv=False, port=5672, scheme="amqp")
    assert sink.wait_for(1)
    assert sink.last().keys == ["192.0.2.1:5672"]
    assert clock.wait_for_deadline(20.0)


def test_bad_records_are_skipped_and_each_kind_is_warned_about_once_a_minute_with_a_count(
    start, zone, sink, clock, caplog
):
    zone.srv(
        "10 1 61613 good.example.com.",
        "10 1 0 port-zero.example.com.",
        "10 1 70000 big.example.com.",
        "10 1 61613 bad\\032host.example.com.",
        "not an srv record",
    )
    with caplog.at_level(logging.DEBUG, logger="failover_client.topology"):
        start()
        assert sink.wait_for(1)
        assert clock.wait_for_deadline(30.0)
        clock.advance(30.0)  # the same answer again: nothing new to say
        assert clock.wait_for_deadline(60.0)
        first = [r.getMessage() for r in caplog.records if "skipped record" in r.getMessage()]
        clock.advance(30.0)  # a minute after the first warnings: they come back, counted
        assert clock.wait_for_deadline(90.0)
    assert sink.last().keys == [key("good.example.com")]
    assert len(first) == 3  # one per kind: the two records out of range share one
    assert "out of range" in first[0]
    assert "not a host name" in first[1]
    assert "not 'priority weight port target'" in first[2]
    again = [r.getMessage() for r in caplog.records if "skipped record" in r.getMessage()][3:]
    assert len(again) == 3
    assert "(3 similar messages suppressed in the last 60 s)" in again[0]


# --- when it resolves and pushes -----------------------------------------------------------


@pytest.mark.parametrize(("ttl", "wait"), [(45, 45.0), (0, 2.0), (86400, 600.0)])
def test_the_next_resolution_follows_the_ttl_within_the_bounds(start, zone, clock, ttl, wait):
    zone.srv("10 1 61613 a.example.com.", ttl=ttl)
    start(min_interval=2.0, max_interval=600.0)
    assert clock.wait_for_deadline(wait)


def test_the_shortest_ttl_of_a_and_aaaa_counts(start, zone, clock):
    zone.set("h.example.com", "A", DnsAnswer(("192.0.2.1",), 40))
    zone.set("h.example.com", "AAAA", DnsAnswer(("2001:db8::1",), 15))
    start("h.example.com", srv=False, port=61613)
    assert clock.wait_for_deadline(15.0)


def test_pushes_only_when_the_list_tiers_or_weights_change(start, zone, sink, clock):
    zone.srv("10 1 61613 a.example.com.", "20 1 61613 b.example.com.", ttl=10)
    start()
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(10.0)
    zone.srv("20 1 61613 b.example.com.", "10 1 61613 a.example.com.", ttl=10)  # same, reordered
    clock.advance(10.0)
    assert clock.wait_for_deadline(20.0)
    assert sink.count() == 1
    zone.srv("10 1 61613 a.example.com.", "20 7 61613 b.example.com.", ttl=10)  # a weight
    clock.advance(10.0)
    assert sink.wait_for(2)
    assert sink.last().weights == {key("a.example.com"): 1.0, key("b.example.com"): 7.0}
    assert clock.wait_for_deadline(30.0)
    zone.srv("10 1 61613 a.example.com.", "10 7 61613 b.example.com.", ttl=10)  # a tier
    clock.advance(10.0)
    assert sink.wait_for(3)
    assert sink.last().tiers == {key("a.example.com"): 0, key("b.example.com"): 0}
    assert clock.wait_for_deadline(40.0)
    zone.srv("10 1 61613 a.example.com.", ttl=10)  # b leaves: the replace removes it
    clock.advance(10.0)
    assert sink.wait_for(4)
    assert sink.last().keys == [key("a.example.com")]
    assert sink.last().action == "replace"


@pytest.mark.parametrize(
    "failure",
    [
        DnsLookupError("timeout", "no answer within 2s"),
        DnsLookupError("SERVFAIL", "server failed"),
        DnsLookupError("NXDOMAIN", "gone"),
        DnsAnswer(()),  # the name exists without SRV records
        DnsAnswer(("0 0 0 .",)),  # "the service is decidedly not available"
    ],
    ids=["timeout", "servfail", "nxdomain", "nodata", "dot"],
)
def test_a_failure_keeps_the_last_list_and_backs_off(start, zone, sink, clock, caplog, failure):
    zone.srv("10 1 61613 a.example.com.", ttl=4)
    start(min_interval=1.0, max_interval=5.0)
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(4.0)
    zone.set(SRV_NAME, "SRV", failure)
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        for now, retry in [(4.0, 1.0), (5.0, 2.0), (7.0, 4.0), (11.0, 5.0), (16.0, 5.0)]:
            clock.advance(now - clock.monotonic())
            assert clock.wait_for_deadline(now + retry)
    assert sink.count() == 1  # never an empty list
    # Each failure is told (a connection emits TopologySourceFailed), with its back-off.
    assert sink.failures == [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (5, 5.0)]
    failures = [r.getMessage() for r in caplog.records if "did not resolve" in r.getMessage()]
    assert len(failures) == 1  # once per streak
    assert "keeping the last list (1 brokers)" in failures[0]
    zone.srv("10 1 61613 b.example.com.", ttl=4)
    with caplog.at_level(logging.INFO, logger="failover_client.topology"):
        clock.advance(5.0)
        assert sink.wait_for(2)
        assert clock.wait_for_deadline(25.0)
    assert sink.last().keys == [key("b.example.com")]
    assert "resolves again after 5 failures" in caplog.text
    zone.set(SRV_NAME, "SRV", DnsLookupError("timeout"))
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        clock.advance(4.0)
        assert clock.wait_for_deadline(26.0)  # a new streak starts again at min_interval


def test_a_name_that_never_resolves_pushes_nothing(start, sink, clock, zone):
    start()
    assert clock.wait_for_deadline(1.0)
    clock.advance(1.0)
    assert clock.wait_for_deadline(3.0)
    assert sink.count() == 0
    assert zone.queries == [(SRV_NAME, "SRV")] * 2


def test_a_resolver_bug_is_a_failure_not_the_end_of_the_source(start, zone, sink, clock, caplog):
    zone.set(SRV_NAME, "SRV", DnsAnswer(("10 1 61613 a.example.com.",), 10))
    calls = 0

    def buggy(name: str, rdtype: str) -> DnsAnswer:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyError("resolver bug")
        return zone(name, rdtype)

    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        source = DnsSource(SRV_NAME, clock=clock, resolve=buggy)
        try:
            source.start(sink)
            assert clock.wait_for_deadline(1.0)
            clock.advance(1.0)
            assert sink.wait_for(1)
        finally:
            source.stop()
    (record,) = [r for r in caplog.records if "did not resolve" in r.getMessage()]
    assert record.exc_info is not None


def test_a_long_outage_retries_at_max_interval_for_ever(sink):
    clock = FakeClock(autojump=True)  # every wait ends at once: the retries run back to back
    calls = 0

    def outage(name: str, rdtype: str) -> DnsAnswer:
        nonlocal calls
        calls += 1
        if calls <= 2000:
            raise DnsLookupError("timeout")
        return DnsAnswer(("10 1 61613 a.example.com.",), 10)

    source = DnsSource(SRV_NAME, clock=clock, resolve=outage, min_interval=1.0, max_interval=4.0)
    try:
        source.start(sink)
        assert sink.wait_for(1)
    finally:
        source.stop()
    # 1 + 2 + 4 * 1998 seconds of retries, then the answer.
    assert clock.monotonic() >= 1 + 2 + 4 * 1998


def test_a_sink_that_raises_does_not_stop_the_source(start, zone, sink, clock, caplog):
    zone.srv("10 1 61613 a.example.com.", ttl=10)
    sink.fail = True
    with caplog.at_level(logging.ERROR, logger="failover_client.topology"):
        start()
        assert sink.wait_for(1)
        assert clock.wait_for_deadline(10.0)
    assert "sink failed" in caplog.text
    zone.srv("10 1 61613 b.example.com.", ttl=10)
    clock.advance(10.0)
    assert sink.wait_for(2)
    assert sink.last().keys == [key("b.example.com")]


def test_stop_ends_the_thread_without_time_passing_and_is_idempotent(start, zone, sink, clock):
    zone.srv("10 1 61613 a.example.com.", ttl=300)
    source = start(source="dns-east")
    assert sink.wait_for(1)
    assert clock.wait_for_deadline(300.0)
    assert repr(source) == f"DnsSource({SRV_NAME!r}, SRV, brokers=1, running)"
    source.stop()
    source.stop()
    assert clock.waiters() == 0
    assert clock.monotonic() == 0.0
    assert repr(source).endswith("stopped)")
    assert not [t for t in threading.enumerate() if t.name == "failover-client-topology-dns-east"]
    assert sink.last().source == "dns-east"
    with pytest.raises(RuntimeError, match="already started"):
        source.start(sink)


def test_a_source_that_never_started_stops_quietly(zone):
    source = DnsSource("h.example.com", srv=False, port=61613, resolve=zone)
    source.stop()
    assert repr(source) == "DnsSource('h.example.com', A/AAAA port=61613, brokers=0, new)"


# --- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"name": ""}, "name must be a DNS name"),
        ({"name": "two words.example.com"}, "name must be a DNS name"),
        ({"name": "a..b"}, "name must be a DNS name"),
        ({"scheme": "gopher"}, "unknown scheme 'gopher'"),
        ({"port": 61613}, "port is only for srv=False"),
        ({"srv": False}, "port is required with srv=False"),
        ({"srv": False, "port": 0}, "port must be 1-65535, got 0"),
        ({"srv": False, "port": 65536}, "port must be 1-65535, got 65536"),
        ({"resolver_address": "dns.example.com"}, "resolver_address must be an IP address"),
        ({"resolver_port": 0}, "resolver_port must be 1-65535"),
        ({"min_interval": 0}, "min_interval must be a number > 0"),
        ({"max_interval": -1}, "max_interval must be a number > 0"),
        ({"min_interval": 10, "max_interval": 5}, r"max_interval \(5\) must be >= min_interval"),
        ({"timeout": 0}, "timeout must be a number > 0"),
        ({"source": ""}, "source must be a name"),
    ],
)
def test_bad_settings_are_configuration_errors_naming_the_argument(settings, message):
    settings = {"name": SRV_NAME, **settings}
    with pytest.raises(ConfigurationError, match=message):
        DnsSource(**settings)


def test_dns_is_a_registered_source():
    source = topology_source_factory("dns")(
        name="_amqp._tcp.example.com", scheme="amqp", resolver_address="127.0.0.1"
    )
    assert isinstance(source, DnsSource)
    assert isinstance(source, TopologySource)
    assert source.name == "dns:_amqp._tcp.example.com"
    assert source.query_name == "_amqp._tcp.example.com"


# --- the dnspython boundary ----------------------------------------------------------------


class FakeRdata:
    def __init__(self, text: str) -> None:
        self.text = text

    def to_text(self) -> str:
        return self.text


class FakeAnswer:
    """What ``Resolver.resolve`` returns, as far as the source reads it."""

    def __init__(self, texts: tuple[str, ...], ttl: int) -> None:
        self.rrset = [FakeRdata(t) for t in texts] if texts else None
        self.chaining_result = type("Chain", (), {"minimum_ttl": ttl})()


def answering(monkeypatch, outcome: object) -> list[tuple[object, ...]]:
    calls: list[tuple[object, ...]] = []

    def resolve(self, name, rdtype, **kwargs):
        calls.append((tuple(self.nameservers), self.port, name, rdtype, kwargs))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(dns.resolver.Resolver, "resolve", resolve)
    return calls


def test_dnspython_asks_the_given_server_with_the_timeout(monkeypatch):
    calls = answering(monkeypatch, FakeAnswer(("10 1 61613 a.example.com.",), 7))
    resolve = _dns._dnspython_resolve("127.0.0.1", 5353, 1.5)
    assert resolve(SRV_NAME, "SRV") == DnsAnswer(("10 1 61613 a.example.com.",), 7)
    assert calls == [
        (
            ("127.0.0.1",),
            5353,
            SRV_NAME,
            "SRV",
            {"search": False, "raise_on_no_answer": False, "lifetime": 1.5},
        )
    ]


def test_dnspython_nodata_is_an_empty_answer(monkeypatch):
    answering(monkeypatch, FakeAnswer((), 300))
    assert _dns._dnspython_resolve("127.0.0.1", 53, 1.0)("h.example.com", "AAAA") == DnsAnswer(())


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (dns.resolver.NXDOMAIN(), "NXDOMAIN"),
        (dns.resolver.LifetimeTimeout(timeout=1.0, errors=[]), "timeout"),
        (dns.resolver.NoNameservers(), "SERVFAIL"),
        (dns.resolver.YXDOMAIN(), "YXDOMAIN"),
    ],
)
def test_dnspython_errors_become_lookup_errors(monkeypatch, error, reason):
    answering(monkeypatch, error)
    resolve = _dns._dnspython_resolve("::1", 53, 1.0)
    with pytest.raises(DnsLookupError) as info:
        resolve(SRV_NAME, "SRV")
    assert info.value.reason == reason
    assert info.value.__cause__ is error
    assert isinstance(error, dns.exception.DNSException)


def test_without_dnspython_the_error_names_the_extra(monkeypatch):
    for module in ("dns", "dns.resolver", "dns.exception"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigurationError, match=r"failover-client\[dns\]"):
        DnsSource(SRV_NAME)
    DnsSource(SRV_NAME, resolve=Zone())  # a resolver of one's own needs no dnspython


# --- into a connection ---------------------------------------------------------------------


def test_a_failover_connection_takes_the_tiers_and_weights(clock, zone):
    seed = BrokerAddress("stomp", "seed.example.com", 61613)
    zone.srv("10 3 61613 a.example.com.", "20 0 61614 b.example.com.", ttl=60)
    source = DnsSource(SRV_NAME, clock=clock, resolve=zone)
    conn = FailoverConnection(
        (seed,), connector=FakeConnector(clock=clock), clock=clock, topology=[source]
    )
    try:
        conn.connect()  # starts the source with the connection's sink
        assert clock.wait_for_deadline(60.0)
        states = {s.address.key: s for s in conn.pool.states()}
        assert list(states) == [seed.key, key("a.example.com"), key("b.example.com", 61614)]
        assert states[key("a.example.com")].tier == 0
        assert states[key("a.example.com")].weight == 3.0
        assert states[key("b.example.com", 61614)].tier == 1
        assert states[key("b.example.com", 61614)].weight == ZERO_WEIGHT
        assert states[key("a.example.com")].source == source.name
    finally:
        conn.close()


def test_a_failover_connection_is_not_a_sink_and_says_how_to_give_it_a_source(clock, zone):
    seed = BrokerAddress("stomp", "seed.example.com", 61613)
    conn = FailoverConnection((seed,), connector=FakeConnector(clock=clock), clock=clock)
    source = DnsSource(SRV_NAME, clock=clock, resolve=zone)
    assert not isinstance(conn, TopologySink)
    with pytest.raises(TypeError, match=r"topology=\[source\]"):
        source.start(conn)  # type: ignore[arg-type]
    source.stop()
    conn.close()
