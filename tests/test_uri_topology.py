"""The topology options of a URI: ``topology``, ``topology.openwirePort``, ``topology.schemeMap``,
``updateURIsURL``'s secrets, and what ``explain`` says about them."""

from __future__ import annotations

import pytest
from failover_client.uri import FailoverOptions, explain, format_uri, parse, redact_value

from failover_client import OptionError

PASSWORD = "s3cretPW"
BASE = "failover:(stomp://a:61613)?"


def warnings(text: str) -> dict[str, str]:
    return {r.option: r.meaning for r in explain(parse(text)) if r.kind == "warning"}


def test_the_options_default_to_no_sources_and_activemq_s_openwire_port():
    options = parse("failover:(stomp://a:61613)").options
    assert (options.topology, options.topology_openwire_port, options.topology_scheme_map) == (
        (),
        61616,
        (),
    )


@pytest.mark.parametrize(
    "text",
    [
        "failover:(tcp://a:61616)?topology=openwire",
        "failover:(amqp://a:5672)?failover.randomize=false&topology=openwire",
        "(tcp://a:61616)?topology=openwire",
    ],
)
def test_every_dialect_takes_them(text):
    assert parse(text).options.topology == ("openwire",)


@pytest.mark.parametrize(
    ("value", "offset", "message"),
    [
        ("openwire,,advisory", 9, "expected a topology-source name"),
        ("openwire,advisory,openwire", 18, "'openwire' is named twice"),
        ("open+wire", 0, "expected a topology-source name"),
    ],
)
def test_a_bad_source_list_points_at_the_bad_name(value, offset, message):
    text = f"{BASE}topology={value}"
    with pytest.raises(OptionError, match=message) as info:
        parse(text)
    assert info.value.position == text.index("topology=") + len("topology=") + offset


@pytest.mark.parametrize(
    ("value", "offset", "message"),
    [
        ("tcp:stomp:61613,ssl", 16, "expected from:to"),
        ("tcp:stomp:61613,ssl:openwire", 20, "'openwire' is not a STOMP or AMQP scheme"),
        ("tcp:stomp:99999", 10, "expected a port 1-65535"),
        ("tcp:stomp,TCP:amqp", 10, "scheme 'tcp' is mapped twice"),
        ("1tcp:stomp", 0, "'1tcp' is not a URL scheme"),
    ],
)
def test_a_bad_scheme_map_points_at_the_bad_part(value, offset, message):
    text = f"{BASE}topology.schemeMap={value}"
    with pytest.raises(OptionError, match=message) as info:
        parse(text)
    assert info.value.position == text.index("schemeMap=") + len("schemeMap=") + offset


def test_a_scheme_map_reads_a_plus_whether_escaped_or_decoded_as_a_space():
    for written in ("ssl:stomp+ssl:61612", "ssl:stomp%2Bssl:61612"):
        options = parse(f"{BASE}topology.schemeMap={written}").options
        assert options.topology_scheme_map == (("ssl", "stomp+ssl", 61612),)


def test_the_options_round_trip():
    text = (
        f"{BASE}topology=openwire,advisory&topology.openwirePort=61626"
        "&topology.schemeMap=tcp:stomp:61613,ssl:stomp%2Bssl"
    )
    uri = parse(text)
    assert parse(format_uri(uri)) == uri


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"topology": ("",)}, "topology"),
        ({"topology": ("a", "a")}, "topology"),
        ({"topology_openwire_port": 0}, "topology_openwire_port"),
        ({"topology_openwire_port": True}, "topology_openwire_port"),
        ({"topology_scheme_map": (("tcp", "stomp"),)}, "topology_scheme_map"),
        ({"topology_scheme_map": (("tcp", "stomp", 70000),)}, "topology_scheme_map"),
    ],
)
def test_options_built_in_code_are_validated_too(changes, option):
    with pytest.raises(OptionError) as info:
        FailoverOptions(**changes)
    assert info.value.option == option


# --- updateURIsURL's secrets ---------------------------------------------------------------------


def test_the_password_of_update_uris_url_is_never_shown():
    uri = parse(f"failover:()?updateURIsURL=https://app:{PASSWORD}@h/list%3Ftoken%3D{PASSWORD}")
    assert uri.options.update_uris_url == f"https://app:{PASSWORD}@h/list?token={PASSWORD}"
    for shown in (str(uri), repr(uri), repr(uri.query), repr(uri.options), f"{explain(uri)}"):
        assert PASSWORD not in shown
    assert dict(uri.query)["updateURIsURL"] == "https://app:***@h/list?token=***"
    assert uri.query.secret("updateURIsURL") == uri.options.update_uris_url
    assert parse(format_uri(uri)) == uri  # the clear text still round-trips


def test_redact_value_masks_secret_options_and_secrets_inside_urls():
    assert redact_value("password", "x") == "***"
    assert redact_value("updateURIsURL", "http://u:p@h/x") == "http://u:***@h/x"
    assert redact_value("updateURIsURL", "http://h/x?apiKey=k&a=b") == "http://h/x?apiKey=***&a=b"
    assert redact_value("updateURIsURL", "/etc/brokers.txt") == "/etc/brokers.txt"


# --- explain -------------------------------------------------------------------------------------


def test_topology_under_update_uris_supported_false_warns_its_lists_are_ignored():
    found = warnings(
        f"{BASE}topology=openwire&updateURIsSupported=false&topology.schemeMap=tcp:stomp"
    )
    assert "are ignored" in found["topology + updateURIsSupported"]


def test_openwire_port_without_openwire_warns():
    found = warnings(
        f"{BASE}topology=advisory&topology.openwirePort=61617&topology.schemeMap=tcp:stomp"
    )
    assert "no effect without topology=openwire" in found["topology.openwirePort"]


def test_scheme_map_without_a_source_to_map_warns():
    found = warnings(f"{BASE}topology.schemeMap=tcp:stomp:61613")
    assert "no effect" in found["topology.schemeMap"]
    assert "topology.schemeMap" not in warnings(
        "failover:()?updateURIsURL=/b.txt&topology.schemeMap=tcp:stomp:61613"
    )


def test_activemq_sources_without_a_scheme_map_warn_their_urls_are_skipped():
    found = warnings(f"{BASE}topology=openwire,advisory")
    assert "without topology.schemeMap" in found["topology"]
    assert "topology" not in warnings(f"{BASE}topology=openwire&topology.schemeMap=tcp:stomp")


def test_openwire_with_amqp_members_is_fine():
    text = "failover:(amqp://a:5672)?topology=openwire&topology.schemeMap=tcp:amqp:5672"
    assert warnings(text) == {}


def test_explain_lists_the_topology_rows():
    rows = {r.option: r for r in explain(parse(f"{BASE}topology=openwire")) if r.kind == "option"}
    assert (rows["topology"].value, rows["topology"].given) == ("openwire", True)
    assert (rows["topology.openwirePort"].value, rows["topology.openwirePort"].given) == (
        "61616",
        False,
    )
