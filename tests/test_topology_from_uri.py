"""Which topology sources a failover URI asks for (``uri_sources``), and what it refuses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions, parse

from failover_client import ConfigurationError, FailoverConnection
from failover_client.testing import FakeClock, FakeConnector
from failover_client.topology import (
    URI_SOURCE_NAME,
    AdvisorySource,
    BaseSink,
    DnsSource,
    FileSource,
    OpenWireSource,
    TopologySource,
    TopologySourceError,
    UrlSource,
    _from_uri,
    register_topology_source,
    unregister_topology_source,
    uri_sources,
)

PASSWORD = "s3cretPW"
CLOCK = FakeClock()


def sources(text: str, *, login: str | None = None, passcode: str | None = None) -> list[object]:
    uri = parse(text)
    return list(
        uri_sources(
            uri.members, uri.options, uri.agents, login=login, passcode=passcode, clock=CLOCK
        )
    )


def only(text: str) -> object:
    (source,) = sources(text)
    return source


def test_a_uri_without_topology_asks_for_nothing():
    assert sources("failover:(stomp://a:61613,stomp://b:61613)?randomize=false") == []


# --- updateURIsURL --------------------------------------------------------------------------------


def test_update_uris_url_is_a_url_source_that_rebalances_by_default():
    source = only("failover:()?updateURIsURL=https://config.example.com/brokers.txt")
    assert isinstance(source, UrlSource)
    assert (source.name, source.shown, source.rebalance) == (
        URI_SOURCE_NAME,
        "https://config.example.com/brokers.txt",
        True,
    )


def test_rebalance_update_uris_false_is_passed_on(tmp_path):
    source = only(
        f"failover:(stomp://a:61613)?updateURIsURL={tmp_path}/b&rebalanceUpdateURIs=false"
    )
    assert isinstance(source, UrlSource)
    assert not source.rebalance


def test_the_url_s_password_is_never_shown():
    source = only(f"failover:()?updateURIsURL=https://app:{PASSWORD}@config.example.com/b")
    assert PASSWORD not in repr(source)
    assert PASSWORD not in str(parse(f"failover:()?updateURIsURL=https://a:{PASSWORD}@h/b"))


def test_the_scheme_map_rewrites_the_url_s_openwire_entries(tmp_path):
    path = tmp_path / "brokers.txt"
    path.write_text("tcp://a:61616,tcp://b:61616\n")  # as ActiveMQ's own clients read it
    source = only(f"failover:()?updateURIsURL=file:{path}&topology.schemeMap=tcp:stomp:61613")
    assert isinstance(source, UrlSource)
    got: list[tuple[BrokerAddress, ...]] = []

    class Sink(BaseSink):
        def update_brokers(self, update, **_: object) -> None:
            got.append(tuple(update))

    source.start(Sink())
    try:
        assert source.wait_reads(1, 5.0)
    finally:
        source.stop()
    assert got == [(BrokerAddress("stomp", "a", 61613), BrokerAddress("stomp", "b", 61613))]


# --- discovery agents -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scheme"),
    [
        ("discovery:(dns://_stomp._tcp.example.com)", "stomp"),
        ("discovery:(dns://_amqps._tcp.example.com)", "amqps"),
        ("discovery:(dns://_activemq._tcp.example.com)", "stomp"),
        ("discovery:(dns://_activemq._tcp.example.com?scheme=stomp+ssl)", "stomp+ssl"),
        ("failover:(amqp://a:5672,discovery:(dns://_mq._tcp.example.com))", "amqp"),
    ],
)
def test_an_srv_name_is_an_srv_dns_source(text, scheme):
    source = only(text)
    assert isinstance(source, DnsSource)
    assert source.srv
    assert source.query_name == parse(text).agents[0].host
    assert (source.scheme, source.port) == (scheme, None)
    assert source.name == f"dns:{source.query_name}"


@pytest.mark.parametrize(
    ("text", "scheme", "port"),
    [
        ("discovery:(dns://brokers.example.com:61623)", "stomp", 61623),
        ("discovery:(dns://brokers.example.com)", "stomp", 61613),
        ("discovery:(dns://brokers.example.com?scheme=amqps)", "amqps", 5671),
    ],
)
def test_a_host_name_is_an_address_dns_source_on_the_agent_s_port(text, scheme, port):
    source = only(text)
    assert isinstance(source, DnsSource)
    assert not source.srv
    assert (source.query_name, source.scheme, source.port) == ("brokers.example.com", scheme, port)


def test_a_dns_agent_may_name_its_resolver():
    source = only("discovery:(dns://_stomp._tcp.example.com?resolver=127.0.0.1:5353)")
    assert isinstance(source, DnsSource)
    source = only("discovery:(dns://_stomp._tcp.example.com?resolver=[::1]:5353)")
    assert isinstance(source, DnsSource)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("discovery:(dns://_stomp._tcp.example.com:61613)", "an SRV name takes no port"),
        ("discovery:(dns://_stomp._tcp.example.com?ttl=5)", "unknown parameter 'ttl'"),
        ("discovery:(dns://_stomp._tcp.example.com?scheme=tcp)", "not a STOMP or AMQP scheme"),
        ("discovery:(dns://_stomp._tcp.example.com?resolver=dns.local)", "resolver must be ip"),
        ("discovery:(dns://_stomp._tcp.example.com?resolver=10.0.0.1:0)", "resolver must be ip"),
        ("discovery:(dns:brokers.example.com)", "needs a name"),
    ],
)
def test_bad_dns_agents_are_refused_naming_the_agent(text, message):
    with pytest.raises(ConfigurationError, match=message) as info:
        sources(text)
    assert "discovery agent dns:" in str(info.value)


@pytest.mark.parametrize(
    "location", ["/etc/brokers.txt", "///etc/brokers.txt", "//localhost/etc/brokers.txt"]
)
def test_a_file_agent_is_a_file_source_replacing_its_list(location):
    source = only(f"discovery:(file:{location})")
    assert isinstance(source, FileSource)
    assert source.path == Path("/etc/brokers.txt")
    assert source.name == "file:/etc/brokers.txt"


def test_a_relative_file_agent_stays_relative():
    source = only("discovery:(file:brokers.txt)")
    assert isinstance(source, FileSource)
    assert source.path == Path("brokers.txt")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("discovery:(file://fileserver/etc/brokers.txt)", "a file on another host"),
        ("discovery:(file:/etc/brokers.txt?interval=5)", "takes no parameters"),
    ],
)
def test_bad_file_agents_are_refused(text, message):
    with pytest.raises(ConfigurationError, match=message):
        sources(text)


def test_every_agent_of_a_uri_gets_its_source_in_order():
    got = sources(
        "failover:(discovery:(dns://_stomp._tcp.example.com),discovery:(file:/etc/b.txt))"
        "?updateURIsURL=/etc/url.txt"
    )
    assert [type(s) for s in got] == [UrlSource, DnsSource, FileSource]


@pytest.mark.parametrize(
    ("text", "agent"),
    [
        ("discovery:(zeroconf:_activemq_development.)", "zeroconf:_activemq_development."),
        ("failover:(discovery:(zeroconf:_x.))", "zeroconf:_x."),
    ],
)
def test_other_discovery_protocols_are_refused_saying_what_works(text, agent):
    with pytest.raises(ConfigurationError) as info:
        sources(text)
    message = str(info.value)
    assert f"discovery agent {agent} is not supported" in message
    assert "dns://" in message
    assert "updateURIsURL" in message


def test_the_http_discovery_registry_is_refused_pointing_at_update_uris_url():
    with pytest.raises(ConfigurationError) as info:
        sources(f"discovery:(http://app:{PASSWORD}@registry:8080/brokers)")
    message = str(info.value)
    assert "HTTP discovery registry" in message
    assert "updateURIsURL=http://" in message
    assert PASSWORD not in message
    assert "app:***@registry" in message


# --- topology=... ---------------------------------------------------------------------------------


class Recorder:
    """Stands in for the registry: records how each named source was built."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...], dict[str, object]]] = []

    def factory(self, name: str) -> object:
        def build(*args: object, **kwargs: object) -> object:
            self.calls.append((name, args, kwargs))
            return object()

        return build


@pytest.fixture
def recorder(monkeypatch) -> Recorder:
    recording = Recorder()
    monkeypatch.setattr(_from_uri, "topology_source_factory", recording.factory)
    return recording


URI_OPENWIRE = (
    "failover:(stomp://a:61613,stomp://b:61613)?topology=openwire"
    "&topology.openwirePort=61626&topology.schemeMap=tcp:stomp:61613,ssl:stomp+ssl"
)


def test_openwire_gets_the_members_credentials_clock_port_scheme_map_and_tls(recorder):
    sources(
        URI_OPENWIRE,
        login="app",
        passcode=PASSWORD,
    )
    ((name, args, kwargs),) = recorder.calls
    assert name == "openwire"
    assert args == ((BrokerAddress("stomp", "a", 61613), BrokerAddress("stomp", "b", 61613)),)
    assert kwargs == {
        "openwire_port": 61626,
        "scheme_map": {"tcp": ("stomp", 61613), "ssl": ("stomp+ssl", None)},
        "tls": parse(URI_OPENWIRE).options,
        "login": "app",
        "passcode": PASSWORD,
        "clock": CLOCK,
    }


def test_advisory_gets_the_members_credentials_clock_scheme_map_and_tls_options(recorder):
    uri = "failover:(stomp+ssl://a:61612)?topology=advisory&tls.caFile=/etc/ca.pem"
    sources(uri, login="app", passcode=PASSWORD)
    ((name, args, kwargs),) = recorder.calls
    assert (name, args) == ("advisory", ((BrokerAddress("stomp+ssl", "a", 61612),),))
    options = kwargs.pop("options")
    assert isinstance(options, FailoverOptions)
    assert options.tls_ca_file == "/etc/ca.pem"
    assert kwargs == {"scheme_map": None, "login": "app", "passcode": PASSWORD, "clock": CLOCK}


def test_the_advisory_watcher_takes_the_uri_s_tls_options_but_never_its_sources():
    (source,) = sources(
        "failover:(stomp+ssl://a:61612)?topology=advisory&tls.verifyHostname=false"
        "&maxReconnectAttempts=3"
    )
    assert isinstance(source, AdvisorySource)
    watcher = source._conn.options
    assert watcher.tls_verify_hostname is False
    assert watcher.topology == ()
    assert watcher.max_reconnect_attempts == -1


def test_the_built_in_sources_are_built_for_real():
    got = sources(
        "failover:(stomp://a:61613)?topology=openwire,advisory&topology.schemeMap=tcp:stomp"
    )
    assert [type(s) for s in got] == [OpenWireSource, AdvisorySource]
    assert [s.name for s in got] == ["openwire", "advisory"]  # type: ignore[attr-defined]


def test_an_unknown_source_name_lists_the_registered_ones():
    with pytest.raises(TopologySourceError) as info:
        sources("failover:(stomp://a:61613)?topology=gossip")
    assert "unknown topology source 'gossip'" in str(info.value)
    assert {"advisory", "dns", "file", "openwire", "url"} <= set(info.value.known)


@pytest.mark.parametrize(
    ("name", "instead"),
    [
        ("file", "discovery:(file:<path>)"),
        ("url", "updateURIsURL=<path or URL>"),
        ("dns", "discovery:(dns://<name>)"),
    ],
)
def test_sources_that_need_settings_of_their_own_say_where_to_give_them(name, instead):
    with pytest.raises(ConfigurationError, match="needs settings of its own") as info:
        sources(f"failover:(stomp://a:61613)?topology={name}")
    assert instead in str(info.value)


@pytest.fixture
def plugin() -> Iterator[list[dict[str, object]]]:
    built: list[dict[str, object]] = []

    class Plugin:
        name = "gossip"

        def __init__(self, members: object, **settings: object) -> None:
            built.append({"members": members, **settings})

        def start(self, sink: object) -> None: ...

        def stop(self) -> None: ...

    def strict(members: object) -> TopologySource:
        raise AssertionError("never called with the connection's settings")

    register_topology_source("gossip", Plugin)
    register_topology_source("strict", strict)  # type: ignore[arg-type]
    try:
        yield built
    finally:
        unregister_topology_source("gossip")
        unregister_topology_source("strict")


def test_a_registered_plug_in_is_built_from_the_connection_s_settings(plugin):
    sources("failover:(stomp://a:61613)?topology=gossip", login="app", passcode=PASSWORD)
    assert plugin == [
        {
            "members": (BrokerAddress("stomp", "a", 61613),),
            "login": "app",
            "passcode": PASSWORD,
            "clock": CLOCK,
        }
    ]


def test_a_plug_in_that_cannot_take_those_settings_is_a_configuration_error(plugin):
    with pytest.raises(ConfigurationError, match="'strict' cannot be built from the connection"):
        sources("failover:(stomp://a:61613)?topology=strict")


def test_advisory_without_members_is_refused():
    with pytest.raises(ConfigurationError, match="no brokers to watch"):
        sources("failover:()?updateURIsURL=/etc/b.txt&topology=advisory")


# --- the connection starts them -------------------------------------------------------------------


def test_a_connection_builds_its_uri_s_sources_and_refuses_a_bad_one(tmp_path):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://b:61613\n")
    clock = FakeClock()
    conn = FailoverConnection(
        f"failover:()?updateURIsURL={path}", connector=FakeConnector(clock=clock), clock=clock
    )
    with conn:
        assert conn.broker == "stomp://b:61613"
    with pytest.raises(ConfigurationError, match=r"zeroconf:_x\. is not supported"):
        FailoverConnection("discovery:(zeroconf:_x.)", connector=FakeConnector())


def test_an_https_update_uris_url_is_verified_with_the_uri_s_trust(tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ConfigurationError, match="tls_ca_file"):
        sources(f"failover:()?updateURIsURL=https://cfg.example.com/b.txt&tls.caFile={missing}")
    # A plain-file list needs no trust, so a bad one does not stop it.
    (source,) = sources(f"failover:()?updateURIsURL=file:{tmp_path}/b.txt&tls.caFile={missing}")
    assert isinstance(source, UrlSource)
