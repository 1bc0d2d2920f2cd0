"""The URI grammar against what the ActiveMQ Classic, Artemis and Qpid JMS clients accept."""

from __future__ import annotations

import pickle

import pytest
from failover_client.uri import BrokerAddress, format_uri, parse

from failover_client import OptionError, URIError

# --- secrets stay out of errors, reprs and plain tuples ------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "(tcp://a:61616,tcp://b:61616)?trustStorePassword=ENC(3a34fd21b82bf2a822fa49a8d8fa115d)"
            "&bogus",
            "3a34fd21b82bf2a822fa49a8d8fa115d",
        ),
        ("failover:(stomp://app:s(cret@a:61613)", "cret"),
        ("failover:(tcp://a:61616?password=se,cret)", "cret"),
        ("tcp://h:61616?password=se;cret", "cret"),
        ("tcp://h:61616?password=se cret&x=1", "cret"),
        ("failover:(tcp://a:61616?password=ab)cd)x", "cd"),
        ("stomp://app:se cret@h:61613", "cret"),
    ],
)
def test_errors_never_show_any_part_of_a_secret(text: str, secret: str) -> None:
    with pytest.raises(URIError) as caught:
        parse(text)
    assert secret not in str(caught.value)
    assert secret not in caught.value.text


def test_query_and_params_hold_secrets_masked_and_reveal_them_on_request() -> None:
    uri = parse("failover:(stomp+ssl://a:61612?sslPassword=p1)?tls.keyPassword=k1&randomize=false")
    assert "k1" not in repr(uri.query)
    assert "k1" not in str(uri.query)
    assert dict(uri.query)["tls.keyPassword"] == "***"
    assert uri.query.secret("tls.keyPassword") == "k1"
    assert uri.secret("tls.keyPassword") == "k1"
    assert uri.query.reveal() == (("tls.keyPassword", "k1"), ("randomize", "false"))
    member = uri.members[0]
    assert "p1" not in repr(member.params)
    assert member.param("sslPassword") == "***"
    assert member.secret_param("sslPassword") == "p1"
    assert uri.options.tls_key_password == "k1"
    assert parse(format_uri(uri)) == uri
    assert "k1" in uri.to_text()
    assert "k1" not in str(uri)
    # Values, not masks, decide equality: two passwords are two URIs.
    assert parse("tcp://h:61616?password=a") != parse("tcp://h:61616?password=b")
    assert pickle.loads(pickle.dumps(uri)) == uri


def test_built_members_mask_their_secret_params_too() -> None:
    member = BrokerAddress("tcp", "h", 61616, params=(("keyStorePassword", "x1"),))
    assert member.params == (("keyStorePassword", "x1"),)
    assert "x1" not in repr(member.params)
    assert member.params[0][1] == "***"


# --- Artemis clientID ----------------------------------------------------------------------------


def test_artemis_client_id_spelling_sets_the_client_id() -> None:
    uri = parse("(tcp://a:61616,tcp://b:61616)?clientID=app1")
    assert uri.options.client_id == "app1"
    assert uri.options.source_of("client_id") == "clientID"


# --- credentials as options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "tcp://h:61616?user=app&password=s3cret",
        "(tcp://h:61616,tcp://b:61616)?user=app&password=s3cret",
        "amqp://h:5672?jms.username=app&jms.password=s3cret",
        "failover:(amqp://h:5672,amqp://b:5672)?jms.username=app&jms.password=s3cret",
    ],
)
def test_credentials_given_as_options_reach_the_members(text: str) -> None:
    uri = parse(text)
    for member in uri.members:
        assert (member.user, member.password) == ("app", "s3cret")
        assert "s3cret" not in repr(member)
        assert "s3cret" not in str(member.params)
    assert "s3cret" not in str(uri)
    assert "s3cret" not in repr(uri.query)
    assert "s3cret" not in repr(uri.passthrough)
    assert parse(format_uri(uri)) == uri


def test_a_members_own_userinfo_beats_shared_credentials() -> None:
    uri = parse("(tcp://me:mine@a:61616,tcp://b:61616)?user=app&password=s3cret")
    assert [(m.user, m.password) for m in uri.members] == [("me", "mine"), ("app", "s3cret")]


# --- host names ----------------------------------------------------------------------------------


def test_host_names_compare_without_case_so_priority_backup_matches() -> None:
    uri = parse(
        "failover:(tcp://Broker1:61616,tcp://b:61616)?priorityBackup=true"
        "&priorityURIs=tcp://broker1:61616"
    )
    assert uri.members[0].key == "broker1:61616"
    assert uri.options.priority_uris == (uri.members[0].key,)


def test_ipv6_literals_have_one_key_however_written() -> None:
    a = parse("tcp://[2001:DB8:0:0::1]:61616").members[0]
    b = parse("tcp://[2001:db8::1]:61616").members[0]
    assert a.key == b.key == "[2001:db8::1]:61616"


# --- '+' in values -------------------------------------------------------------------------------


def test_plus_in_an_option_value_is_a_space_as_java_url_decoder_reads_it() -> None:
    uri = parse("amqp://h:5672?jms.password=a+b&jms.username=x%2By")
    assert (uri.members[0].user, uri.members[0].password) == ("x+y", "a b")
    assert parse(format_uri(uri)) == uri
    # A scheme in a URI-list value keeps its '+' (a space cannot be part of a broker URI).
    listed = parse("failover:(nio+ssl://a:61617)?priorityURIs=nio+ssl://a:61617")
    assert listed.options.priority_uris == ("a:61617",)


# --- parentheses in values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("failover:(tcp://a:61616)?updateURIsURL=file:/C:/Dir(1)/a.csv", "file:/C:/Dir(1)/a.csv"),
        ("failover:(tcp://a:61616?x=f(1),tcp://b:61616)", None),
        ("(tcp://a:61616)?sslPassword=ENC(ab)", None),
    ],
)
def test_parentheses_inside_option_values_are_accepted(text: str, value: str | None) -> None:
    uri = parse(text)
    if value is not None:
        assert uri.options.update_uris_url == value
    assert parse(format_uri(uri)) == uri


def test_an_unbalanced_parenthesis_in_a_member_value_is_a_positioned_error() -> None:
    with pytest.raises(URIError) as caught:
        parse("failover:(tcp://a:61616?x=f(1")
    assert caught.value.position == 27


# --- empty list with updateURIsURL ---------------------------------------------------------------


def test_an_empty_list_takes_its_brokers_from_update_uris_url() -> None:
    uri = parse("failover:()?updateURIsURL=file:///etc/brokers.txt")
    assert uri.members == ()
    assert uri.options.update_uris_url == "file:///etc/brokers.txt"
    assert parse(format_uri(uri)) == uri
    with pytest.raises(URIError, match="empty"):
        parse("failover:()?randomize=false")


# --- fragments -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [("tcp://h:61616?host=localhost#", 28), ("failover:(tcp://a:61616?x=1#y)", 27)],
)
def test_a_fragment_is_a_positioned_error_not_part_of_a_value(text: str, position: int) -> None:
    with pytest.raises(URIError, match="fragment") as caught:
        parse(text)
    assert caught.value.position == position


# --- table gaps ----------------------------------------------------------------------------------


def test_track_transaction_producers_is_a_classic_option() -> None:
    uri = parse("failover:(tcp://a:61616)?trackTransactionProducers=false")
    assert ("trackTransactionProducers", "false") in uri.passthrough


def test_artemis_ha_bean_spelling_sets_ha() -> None:
    assert parse("tcp://h:61616?HA=true").options.ha is True
    assert parse("(tcp://h:61616)?HA=true").options.ha is True


def test_udp_discovery_reads_discovery_initial_wait_timeout() -> None:
    uri = parse("udp://231.7.7.7:9876?discoveryInitialWaitTimeout=500")
    assert uri.agents[0].param("discoveryInitialWaitTimeout") == "500"
    with pytest.raises(OptionError, match="discoveryInitialWaitTimeout"):
        parse("udp://231.7.7.7:9876?discoveryInitialWaitTimeout=soon")


def test_classic_discovered_options_and_static_agent() -> None:
    uri = parse(
        "discovery:(static:(tcp://a:61616,tcp://b:61616))?discovered.maxReconnectAttempts=3"
    )
    assert [m.key for m in uri.members] == ["a:61616", "b:61616"]
    assert uri.nested == ()
    assert ("discovered.maxReconnectAttempts", "3") in uri.passthrough
    assert parse(format_uri(uri)) == uri
