"""The grammar: every form, members, nesting, dialect detection and positioned errors."""

from __future__ import annotations

import pytest
from failover_client.uri import (
    BrokerAddress,
    DiscoveryAgent,
    FailoverURI,
    format_uri,
    parse,
)
from failover_client.uri import __all__ as uri_all

from failover_client import OptionError, URIError


def keys(uri: FailoverURI) -> list[str]:
    return [m.key for m in uri.members]


def test_public_surface_is_pinned():
    assert sorted(uri_all) == sorted(
        [
            "AGENT_SCHEMES",
            "ARTEMIS_POLICY_CLASSES",
            "BUILTIN_POLICIES",
            "DEFAULT_PORTS",
            "MEMBER_PARAMS",
            "OPTION_TABLE",
            "RETRY_FIELDS",
            "SCHEMES",
            "AttemptUnit",
            "BrokerAddress",
            "Component",
            "ConfirmMode",
            "Dialect",
            "DiscoveryAgent",
            "ExplainRow",
            "FailoverOptions",
            "FailoverURI",
            "Form",
            "OptionSpec",
            "Pairs",
            "SchemeMapEntries",
            "ServerListAction",
            "broker_key",
            "build",
            "dialect_defaults",
            "explain",
            "format_uri",
            "mask_same_length",
            "option_table_markdown",
            "parse",
            "redact_value",
            "unused_member_params",
            "wrote_retry_options",
        ]
    )


# --- forms --------------------------------------------------------------------------------------


def test_classic_parenthesised_list_with_shared_options():
    uri = parse("failover:(tcp://a:61616,tcp://b:61617)?randomize=false&maxReconnectAttempts=3")
    assert (uri.form, uri.dialect) == ("failover", "classic")
    assert keys(uri) == ["a:61616", "b:61617"]
    assert uri.options.randomize is False
    assert uri.options.max_reconnect_attempts == 3
    assert uri.query == (("randomize", "false"), ("maxReconnectAttempts", "3"))


def test_classic_list_without_parentheses():
    uri = parse("failover:tcp://a:61616,tcp://b:61616")
    assert uri.form == "failover"
    assert keys(uri) == ["a:61616", "b:61616"]


def test_without_parentheses_a_query_belongs_to_the_last_member_as_in_activemq():
    uri = parse("failover:tcp://a:61616,tcp://b:61616?wireFormat.tightEncodingEnabled=false")
    assert uri.members[0].params == ()
    assert uri.members[1].params == (("wireFormat.tightEncodingEnabled", "false"),)
    assert uri.query == ()


def test_old_double_slash_spelling():
    uri = parse(
        "failover://(tcp://localhost:61616,tcp://remotehost:61616)?initialReconnectDelay=100"
    )
    assert keys(uri) == ["localhost:61616", "remotehost:61616"]
    assert uri.options.initial_reconnect_delay == 0.1


def test_per_member_query_and_nested_options_override_them():
    uri = parse(
        "failover:(tcp://a:61616?soTimeout=1&keepAlive=true,tcp://b:61616)"
        "?nested.soTimeout=9&nested.tcpNoDelay=true"
    )
    assert uri.members[0].params == (
        ("soTimeout", "9"),
        ("keepAlive", "true"),
        ("tcpNoDelay", "true"),
    )
    assert uri.members[1].params == (("soTimeout", "9"), ("tcpNoDelay", "true"))
    assert uri.nested == (("soTimeout", "9"), ("tcpNoDelay", "true"))
    # What was written is kept for formatting.
    assert uri.components[0] == BrokerAddress(
        "tcp", "a", 61616, params=(("soTimeout", "1"), ("keepAlive", "true"))
    )


def test_static_list():
    uri = parse("static:(tcp://a:61616,tcp://b:61616)?useExponentialBackOff=false")
    assert (uri.form, uri.dialect) == ("static", "classic")
    assert keys(uri) == ["a:61616", "b:61616"]
    assert uri.options.use_exponential_backoff is False


def test_masterslave_is_ordered_and_means_no_randomize():
    uri = parse("masterslave:(tcp://master:61616,tcp://slave1:61616,tcp://slave2:61616)")
    assert uri.form == "masterslave"
    assert keys(uri) == ["master:61616", "slave1:61616", "slave2:61616"]
    assert uri.options.randomize is False
    assert uri.options.source_of("randomize") == "masterslave:"


def test_masterslave_needs_two_members():
    with pytest.raises(URIError, match="at least one slave") as info:
        parse("masterslave:(tcp://master:61616)")
    assert info.value.position == 0


def test_masterslave_rejects_randomize_true():
    text = "masterslave:(tcp://a:61616,tcp://b:61616)?randomize=true"
    with pytest.raises(OptionError, match="ordered") as info:
        parse(text)
    assert info.value.position == text.index("true")


def test_masterslave_accepts_randomize_false():
    assert parse("masterslave:(tcp://a,tcp://b)?randomize=false").options.randomize is False


def test_nested_composites_flatten_members_in_order():
    uri = parse(
        "failover:(static:(tcp://a:61616,tcp://b:61616)?randomize=false,tcp://c:61616)"
        "?maxReconnectAttempts=2&nested.x=1"
    )
    assert keys(uri) == ["a:61616", "b:61616", "c:61616"]
    static = uri.components[0]
    assert isinstance(static, FailoverURI)
    assert static.form == "static"
    assert static.options.randomize is False
    assert uri.options.randomize is True
    assert all(m.param("x") == "1" for m in uri.members)


def test_deeply_nested_parentheses_match_by_depth():
    uri = parse("failover:(static:(failover:(tcp://a,tcp://b)?randomize=false),tcp://c)")
    assert keys(uri) == ["a:61616", "b:61616", "c:61616"]
    inner = uri.components[0]
    assert isinstance(inner, FailoverURI)
    deepest = inner.components[0]
    assert isinstance(deepest, FailoverURI)
    assert deepest.options.randomize is False


def test_network_connector_style_static_of_failover():
    uri = parse("static:(failover:(tcp://a:61616,tcp://b:61616)?maxReconnectAttempts=0)")
    assert keys(uri) == ["a:61616", "b:61616"]
    assert isinstance(uri.components[0], FailoverURI)


def test_discovery_multicast_is_kept_not_resolved():
    uri = parse("discovery:(multicast://default?group=orders)?initialReconnectDelay=100")
    assert uri.form == "discovery"
    assert uri.members == ()
    assert uri.agents == (DiscoveryAgent("multicast", "//default", (("group", "orders"),)),)
    assert uri.agents[0].host == "default"
    assert uri.options.initial_reconnect_delay == 0.1


def test_discovery_file_agent():
    uri = parse("discovery:(file:/etc/failover/brokers.txt)")
    (agent,) = uri.agents
    assert (agent.scheme, agent.location, agent.host, agent.port) == (
        "file",
        "/etc/failover/brokers.txt",
        None,
        None,
    )


def test_discovery_lists_agents_only():
    with pytest.raises(URIError, match="discovery agents") as info:
        parse("discovery:(tcp://a:61616)")
    assert info.value.position == 11


def test_agents_outside_discovery_are_errors():
    with pytest.raises(URIError, match=r"wrapped in discovery") as info:
        parse("failover:(multicast://default)")
    assert info.value.position == 10


def test_artemis_static_list_with_semicolons():
    uri = parse("(tcp://a:61616,tcp://b:61616)?ha=true;reconnectAttempts=-1&retryInterval=500")
    assert (uri.form, uri.dialect) == ("artemis", "artemis")
    assert uri.options.ha is True
    assert uri.options.max_reconnect_attempts == -1
    assert uri.options.reconnect_delay == 0.5
    assert uri.options.attempt_unit == "broker"


def test_artemis_shared_transport_option_is_a_default_the_member_beats():
    uri = parse("(tcp://a:61616?sslEnabled=false,tcp://b:61616)?sslEnabled=true&ha=true")
    assert uri.members[0].params == (("sslEnabled", "false"),)
    assert uri.members[1].params == (("sslEnabled", "true"),)
    # Locator options are options, not member params.
    assert all(m.param("ha") is None for m in uri.members)


def test_artemis_near_miss_of_an_option_is_not_silently_a_transport_param():
    with pytest.raises(OptionError) as info:
        parse("(tcp://a:61616)?reconectAttempts=3")
    assert info.value.suggestions[0] == "reconnectAttempts"


def test_artemis_udp_discovery_group():
    uri = parse("udp://231.7.7.7:9876")
    assert (uri.form, uri.dialect) == ("discovery", "artemis")
    assert (uri.agents[0].host, uri.agents[0].port) == ("231.7.7.7", 9876)


def test_single_member_forms():
    uri = parse("stomp+ssl://broker.example.com?heartbeat=500,500&transport.x=1")
    assert (uri.form, uri.dialect) == ("single", "classic")
    assert keys(uri) == ["broker.example.com:61612"]
    assert uri.options.heartbeat == (500, 500)
    assert uri.members[0].params == (("transport.x", "1"),)


def test_single_artemis_member():
    uri = parse("tcp://localhost:61616?ha=true&reconnectAttempts=3")
    assert (uri.form, uri.dialect) == ("single", "artemis")
    assert uri.options.max_reconnect_attempts == 3


# --- dialects ---------------------------------------------------------------------------------


def test_failover_keys_make_a_qpid_uri():
    uri = parse("failover:(amqp://a:5672,amqp://b:5672)?failover.maxReconnectAttempts=20")
    assert uri.dialect == "qpid"
    assert uri.options.randomize is False
    assert uri.options.max_reconnect_attempts == 20


def test_all_amqp_list_without_options_is_qpid():
    assert parse("failover:(amqp://a,amqps://b)").dialect == "qpid"
    assert parse("failover:(amqp://a,stomp://b)").dialect == "classic"


def test_dialect_can_be_forced():
    uri = parse("failover:(stomp://a,stomp://b)", dialect="qpid")
    assert uri.dialect == "qpid"
    assert uri.options.randomize is False


def test_forced_dialect_must_fit_the_form():
    with pytest.raises(URIError, match="dialect"):
        parse("(tcp://a:61616)", dialect="classic")


def test_qpid_nested_options_apply_to_every_member():
    uri = parse(
        "failover:(amqp://a:5672?amqp.idleTimeout=1,amqp://b:5672)"
        "?failover.nested.amqp.idleTimeout=5000&failover.randomize=true"
    )
    assert [m.param("amqp.idleTimeout") for m in uri.members] == ["5000", "5000"]
    assert uri.nested == (("amqp.idleTimeout", "5000"),)


def test_mixing_classic_and_qpid_spellings_names_both():
    text = "failover:(amqp://a:5672)?failover.randomize=false&maxReconnectAttempts=3"
    with pytest.raises(OptionError) as info:
        parse(text)
    message = str(info.value)
    assert "failover.randomize" in message
    assert "maxReconnectAttempts" in message
    assert info.value.position == text.index("maxReconnectAttempts")


def test_another_systems_option_suggests_this_systems_spelling():
    with pytest.raises(OptionError, match="Artemis") as info:
        parse("failover:(tcp://a:61616)?reconnectAttempts=3")
    assert "maxReconnectAttempts" in info.value.suggestions


def test_classic_option_in_artemis_list_is_an_error():
    with pytest.raises(OptionError, match="ActiveMQ Classic") as info:
        parse("(tcp://a:61616)?randomize=false")
    assert info.value.option == "randomize"


def test_jms_options_pass_through():
    uri = parse("failover:(tcp://a:61616)?jms.prefetchPolicy.all=5&jms.clientID=c1")
    assert uri.passthrough == (("jms.prefetchPolicy.all", "5"),)
    assert uri.options.client_id == "c1"


# --- members ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "port", "protocol", "tls"),
    [
        ("tcp", 61616, "openwire", False),
        ("nio", 61616, "openwire", False),
        ("ssl", 61617, "openwire", True),
        ("stomp", 61613, "stomp", False),
        ("stomp+nio", 61613, "stomp", False),
        ("stomp+ssl", 61612, "stomp", True),
        ("amqp", 5672, "amqp", False),
        ("amqps", 5671, "amqp", True),
        ("amqp+ssl", 5671, "amqp", True),
    ],
)
def test_schemes_and_default_ports(scheme, port, protocol, tls):
    (member,) = parse(f"failover:({scheme}://host)").members
    assert (member.scheme, member.port, member.protocol, member.tls) == (
        scheme,
        port,
        protocol,
        tls,
    )


def test_scheme_is_case_insensitive():
    assert parse("FAILOVER:(STOMP://h:1)").members[0].scheme == "stomp"


def test_ipv6_literals():
    uri = parse("failover:(stomp://[::1]:61613,stomp://[fe80::1%eth0],stomp://[2001:db8::7])")
    assert [m.host for m in uri.members] == ["::1", "fe80::1%eth0", "2001:db8::7"]
    assert keys(uri) == ["[::1]:61613", "[fe80::1%eth0]:61613", "[2001:db8::7]:61613"]


def test_credentials_are_percent_decoded():
    (member,) = parse("failover:(stomp://us%40er:p%3As%2Cs@h:61613)").members
    assert (member.user, member.password) == ("us@er", "p:s,s")


def test_user_without_password():
    (member,) = parse("stomp://guest@h").members
    assert (member.user, member.password) == ("guest", None)


def test_surrounding_whitespace_and_spaces_after_commas_are_tolerated():
    assert keys(parse("  failover:(tcp://a:1, tcp://b:2)\n")) == ["a:1", "b:2"]


def test_trailing_slash_is_harmless():
    assert keys(parse("failover:(tcp://a:61616/,tcp://b/)")) == ["a:61616", "b:61616"]


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "empty URI"),
        ("   ", 0, "empty URI"),
        ("failover:(tcp://a", 9, "unclosed '('"),
        ("failover:(static:(tcp://a)", 9, "unclosed '('"),
        ("failover:(tcp://a))", 18, "unbalanced ')'"),
        ("failover:()", 10, "empty member"),
        ("failover:(tcp://a,,tcp://b)", 18, "empty member"),
        ("failover:(tcp://a,)", 18, "empty member"),
        ("failover:", 9, "no members"),
        ("failover:(foo://a)", 10, "unknown scheme 'foo'"),
        ("bogus://a", 0, "unknown scheme 'bogus'"),
        ("failover:(tcp://a:0)", 18, "bad port 0"),
        ("failover:(tcp://a:65536)", 18, "bad port 65536"),
        ("failover:(tcp://a:http)", 18, "bad port 'http'"),
        ("failover:(tcp://a:)", 18, "bad port ''"),
        ("failover:(localhost:61616)", 10, "no scheme"),
        ("localhost:61616", 0, "no scheme"),
        ("failover:(tcp://)", 16, "needs a host"),
        ("failover:(tcp://[::1)", 16, "unclosed '['"),
        ("failover:(tcp://[zz::1]:1)", 17, "bad IPv6"),
        ("failover:(tcp://a b)", 17, "unexpected ' '"),
        ("failover:(tcp:a)", 14, "expected '//'"),
        ("failover:(tcp://a/path)", 18, "no path"),
        ("failover:(tcp://a)?randomize", 19, "expected name=value"),
        ("failover:(tcp://a)?=1", 19, "without a name"),
        ("failover:(tcp://a)?x=%zz", 21, "percent-escape"),
        ("failover:(tcp://a)?x=%e2%28", 21, "UTF-8"),
        ("failover:(tcp://a?x=(1,tcp://b", 20, "unclosed '('"),
        ("failover:(tcp://a)junk", 18, "unexpected 'j'"),
        ("failover:((tcp://a))", 10, "needs a scheme"),
        ("(tcp://a)(tcp://b)", 9, "unexpected '('"),
        ("multicast://default", 0, "wrapped in discovery"),
    ],
)
def test_syntax_errors_name_the_position(text, position, fragment):
    with pytest.raises(URIError) as info:
        parse(text)
    assert info.value.position == position
    assert fragment in info.value.reason


def test_error_message_has_a_caret_under_the_problem():
    with pytest.raises(URIError) as info:
        parse("failover:(tcp://a:61616,tcp://b:99999)")
    _, shown, caret = str(info.value).splitlines()
    assert shown.strip() == "failover:(tcp://a:61616,tcp://b:99999)"
    assert caret.index("^") == shown.index("99999")


def test_unknown_option_suggests_the_nearest_names():
    text = "failover:(tcp://a:61616)?maxReconectAttempts=3"
    with pytest.raises(OptionError) as info:
        parse(text)
    assert info.value.option == "maxReconectAttempts"
    assert info.value.position == text.index("maxReconect")
    assert info.value.suggestions[0] == "maxReconnectAttempts"
    assert "did you mean: maxReconnectAttempts" in str(info.value)


def test_unknown_option_with_wrong_case_suggests_the_right_case():
    with pytest.raises(OptionError) as info:
        parse("failover:(tcp://a)?RANDOMIZE=false")
    assert info.value.suggestions[0] == "randomize"


def test_errors_never_show_the_password_and_keep_the_caret_aligned():
    text = "failover:(stomp://u:s3cret@a:61613,stomp://b:0)?tls.keyPassword=hunter2"
    with pytest.raises(URIError) as info:
        parse(text)
    message = str(info.value)
    assert "s3cret" not in message
    assert "hunter2" not in message
    _, shown, caret = message.splitlines()
    assert len(shown) == len(text) + 2
    assert caret.index("^") == text.index(":0)") + 1 + 2


def test_option_error_on_a_secret_does_not_echo_it():
    with pytest.raises(OptionError) as info:
        parse("failover:(stomp://u:topsecret@a,stomp://b)?randomize=maybe")
    assert "topsecret" not in str(info.value)


def test_uri_error_is_a_value_error_for_callers_that_catch_broadly():
    with pytest.raises(ValueError, match="empty URI"):
        parse("")


def test_format_always_writes_ports_and_parentheses():
    assert format_uri(parse("failover:tcp://a,tcp://b")) == "failover:(tcp://a:61616,tcp://b:61616)"
