"""Reading the broker lists an AMQP broker sends: ``failover-server-list`` and redirects.

What arrives is untrusted input from the network, decoded by proton: maps with symbol or
string keys, ints of proton's own int types, and anything else a broker (or an attacker in
front of one) cares to send.
"""

from __future__ import annotations

import logging

import pytest
from failover_client.uri import BrokerAddress, parse
from proton import symbol, uint, ulong, ushort

from failover_client.amqp._server_list import MAX_ENTRIES, parse_redirect, parse_server_list
from failover_client.engine._pool import BrokerPool

LOGGER = "failover_client.amqp"

PLAIN = BrokerAddress("amqp", "broker-a", 5672)
TLS = BrokerAddress("amqps", "broker-a", 5671)
WITH_SECRETS = parse(
    "amqps://admin:s3cr3t-pw@broker-a:5671?transport.trustStorePassword=st0re-pw"
).members[0]


def _artemis(host: str, port: int, scheme: str = "amqp") -> dict[symbol, object]:
    return {
        symbol("network-host"): host,
        symbol("hostname"): host,
        symbol("port"): port,
        symbol("scheme"): scheme,
    }


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)


# --- the shapes real brokers send ---------------------------------------------------------------


def test_artemis_shape() -> None:
    value = [_artemis("backup-1", 61616), _artemis("backup-2", 5671, "amqps")]
    assert parse_server_list(value, current=PLAIN) == (
        BrokerAddress("amqp", "backup-1", 61616),
        BrokerAddress("amqps", "backup-2", 5671),
    )


def test_router_shape_string_port_and_no_scheme_takes_the_current_scheme() -> None:
    value = [
        {symbol("network-host"): "router-2", symbol("port"): "5672"},
        {symbol("network-host"): "router-3", symbol("port"): "15672", symbol("scheme"): "amqp"},
    ]
    assert parse_server_list(value, current=PLAIN) == (
        BrokerAddress("amqp", "router-2", 5672),
        BrokerAddress("amqp", "router-3", 15672),
    )
    assert parse_server_list(value[:1], current=TLS) == (BrokerAddress("amqps", "router-2", 5672),)


@pytest.mark.parametrize("key", [str, symbol], ids=["str-keys", "symbol-keys"])
def test_keys_may_be_symbols_or_strings(key: type[str]) -> None:
    entry = {key("network-host"): "b", key("port"): 5673, key("scheme"): key("amqps")}
    assert parse_server_list([entry], current=PLAIN) == (BrokerAddress("amqps", "b", 5673),)


@pytest.mark.parametrize("port", [ulong(5672), uint(5672), ushort(5672), 5672, "5672"])
def test_proton_int_types_and_digit_strings_are_ports(port: object) -> None:
    result = parse_server_list([{"network-host": "b", "port": port}], current=PLAIN)
    assert result == (BrokerAddress("amqp", "b", 5672),)
    assert type(result[0].port) is int


def test_scheme_is_read_without_case() -> None:
    entry = {"network-host": "b", "port": 1, "scheme": "AMQPS"}
    assert parse_server_list([entry], current=PLAIN)[0].scheme == "amqps"


def test_port_bounds_are_inclusive() -> None:
    value = [{"network-host": "b", "port": 1}, {"network-host": "c", "port": "65535"}]
    assert [a.port for a in parse_server_list(value, current=PLAIN)] == [1, 65535]


def test_empty_list_is_no_brokers(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_server_list([], current=PLAIN) == ()
    assert _warnings(caplog) == []


def test_a_tuple_is_read_like_a_list() -> None:
    assert parse_server_list(({"network-host": "b", "port": 2},), current=PLAIN) == (
        BrokerAddress("amqp", "b", 2),
    )


# --- IPv6 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("fe80::1%eth0", "fe80::1%eth0"),
        ("2001:db8::7", "2001:db8::7"),
    ],
)
def test_ipv6_hosts(host: str, expected: str) -> None:
    (address,) = parse_server_list([{"network-host": host, "port": "5672"}], current=PLAIN)
    assert address.host == expected
    assert address.authority == f"[{expected}]:5672"
    assert str(address) == f"amqp://[{expected}]:5672"


def test_ipv6_redirect() -> None:
    redirect = parse_redirect({symbol("network-host"): "::1", symbol("port"): 5672}, current=TLS)
    assert redirect == BrokerAddress("amqps", "::1", 5672)
    assert redirect is not None
    assert redirect.key == "[::1]:5672"


# --- invalid entries: each one logged with its index and skipped ---------------------------------

INVALID = [
    pytest.param(7, "not a map but an int", id="int"),
    pytest.param("amqp://b:5672", "not a map but a str", id="uri-string"),
    pytest.param(["network-host", "b"], "not a map but a list", id="list"),
    pytest.param(None, "not a map but nothing", id="none"),
    pytest.param({"port": 5672}, "no network-host", id="no-host"),
    pytest.param({"network-host": None, "port": 1}, "no network-host", id="host-none"),
    pytest.param({"network-host": "", "port": 1}, "network-host is empty", id="host-empty"),
    pytest.param({"network-host": 10, "port": 1}, "not a string but an int", id="host-int"),
    pytest.param({"network-host": b"b", "port": 1}, "not a string but a bytes", id="host-bytes"),
    pytest.param({"network-host": "a b", "port": 1}, "is not a host name", id="host-space"),
    pytest.param({"network-host": "a?x=1", "port": 1}, "is not a host name", id="host-query"),
    pytest.param({"network-host": "a/b", "port": 1}, "is not a host name", id="host-slash"),
    pytest.param({"network-host": "a#b", "port": 1}, "is not a host name", id="host-hash"),
    pytest.param({"network-host": "a\nb", "port": 1}, "is not a host name", id="host-newline"),
    pytest.param({"network-host": "bröker", "port": 1}, "is not a host name", id="host-unicode"),
    pytest.param({"network-host": "-x", "port": 1}, "is not a host name", id="host-dash"),
    pytest.param({"network-host": "u@b", "port": 1}, "holds an '@'", id="host-at"),
    pytest.param({"network-host": "a:b", "port": 1}, "not an IPv6 address", id="host-colon"),
    pytest.param({"network-host": "::g", "port": 1}, "not an IPv6 address", id="bad-ipv6"),
    pytest.param({"network-host": "[::1", "port": 1}, "not an IPv6 address", id="half-bracket"),
    pytest.param({"network-host": "fe80::1%a b", "port": 1}, "bad IPv6 zone", id="bad-zone"),
    pytest.param({"network-host": "0.0.0.0", "port": 1}, "wildcard", id="any-ipv4"),
    pytest.param({"network-host": "::", "port": 1}, "wildcard", id="any-ipv6"),
    pytest.param({"network-host": "b" * 300, "port": 1}, "too long (300 characters)", id="long"),
    pytest.param({"network-host": "b"}, "no port", id="no-port"),
    pytest.param({"network-host": "b", "port": None}, "no port", id="port-none"),
    pytest.param({"network-host": "b", "port": True}, "port is a bool", id="port-bool"),
    pytest.param({"network-host": "b", "port": 5672.0}, "port is a float", id="port-float"),
    pytest.param({"network-host": "b", "port": b"5672"}, "port is a bytes", id="port-bytes"),
    pytest.param({"network-host": "b", "port": [5672]}, "port is a list", id="port-list"),
    pytest.param({"network-host": "b", "port": "amqp"}, "port 'amqp' is not", id="port-word"),
    pytest.param({"network-host": "b", "port": "-1"}, "port '-1' is not", id="port-minus"),
    pytest.param({"network-host": "b", "port": "+1"}, "port '+'... is not", id="port-plus"),
    pytest.param({"network-host": "b", "port": " 5672"}, "is not a number", id="port-space"),
    pytest.param({"network-host": "b", "port": "٥٦٧٢"}, "is not a number", id="port-arabic"),
    pytest.param({"network-host": "b", "port": ""}, "port '' is not", id="port-empty"),
    pytest.param({"network-host": "b", "port": 0}, "port 0 is out of range", id="port-0"),
    pytest.param({"network-host": "b", "port": -5}, "port -5 is out of range", id="port-neg"),
    pytest.param({"network-host": "b", "port": 65536}, "out of range", id="port-65536"),
    pytest.param({"network-host": "b", "port": "70000"}, "out of range", id="port-str-big"),
    pytest.param({"network-host": "b", "port": "123456"}, "is not a number", id="port-digits"),
    pytest.param({"network-host": "b", "port": 10**40}, "a very large number", id="port-huge"),
    pytest.param({"network-host": "b", "port": 1, "scheme": "http"}, "unknown scheme", id="http"),
    pytest.param({"network-host": "b", "port": 1, "scheme": "amqpws"}, "unknown scheme", id="ws"),
    pytest.param({"network-host": "b", "port": 1, "scheme": "stomp"}, "unknown scheme", id="stomp"),
    pytest.param({"network-host": "b", "port": 1, "scheme": ""}, "unknown scheme", id="no-scheme"),
    pytest.param(
        {"network-host": "b", "port": 1, "scheme": 1}, "scheme is an int", id="scheme-int"
    ),
    pytest.param({"network-host": "b", "port": 1, "hostname": "a b"}, "hostname", id="hostname"),
    pytest.param({"network-host": "b", "port": 1, "hostname": 3}, "hostname is not", id="hn-int"),
]


@pytest.mark.parametrize(("entry", "problem"), INVALID)
def test_invalid_entry_is_logged_and_skipped(
    entry: object, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    good = {"network-host": "good", "port": 5672}
    assert parse_server_list([good, entry, good], current=PLAIN) == (
        BrokerAddress("amqp", "good", 5672),
        BrokerAddress("amqp", "good", 5672),
    )
    (line,) = _warnings(caplog)
    assert line.startswith("failover-server-list entry 1 skipped: ")
    assert problem in line
    assert "\n" not in line


@pytest.mark.parametrize(("entry", "problem"), INVALID)
def test_invalid_redirect_is_not_followed(
    entry: object, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert parse_redirect(entry, current=PLAIN) is None
    (line,) = _warnings(caplog)
    assert line.startswith("amqp:connection:redirect not followed: ")
    assert problem in line


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({"network-host": "b", "port": 1}, "a dict"),
        ("amqp://b:1,amqp://c:2", "a str"),
        (b"\x00", "a bytes"),
        (None, "nothing"),
        (42, "an int"),
    ],
)
def test_a_value_that_is_not_a_list_yields_nothing(
    value: object, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert parse_server_list(value, current=PLAIN) == ()
    assert _warnings(caplog) == [f"failover-server-list ignored: not a list but {kind}"]


# --- bounds and hostile values -------------------------------------------------------------------


def test_at_most_max_entries_are_read(caplog: pytest.LogCaptureFixture) -> None:
    value: list[object] = [{"network-host": f"b{i}", "port": i + 1} for i in range(MAX_ENTRIES)]
    value += ["junk"] * 1000  # beyond the bound: neither read nor logged one by one
    result = parse_server_list(value, current=PLAIN)
    assert [a.host for a in result] == [f"b{i}" for i in range(MAX_ENTRIES)]
    assert _warnings(caplog) == [
        f"failover-server-list has {MAX_ENTRIES + 1000} entries: reading the first"
        f" {MAX_ENTRIES}, ignoring the rest"
    ]


def test_huge_strings_are_skipped_and_shortened_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    huge = "x" * 10_000_000
    value = [
        {"network-host": huge, "port": 1},
        {"network-host": "b", "port": huge},
        {"network-host": "b", "port": 1, "scheme": huge},
        {"network-host": "b", "port": 1, "hostname": huge},
        {"network-host": "b", "port": 1, huge: huge},  # an unknown key is ignored
    ]
    assert parse_server_list(value, current=PLAIN) == (BrokerAddress("amqp", "b", 1),)
    lines = _warnings(caplog)
    assert [line.split(" skipped")[0] for line in lines] == [
        f"failover-server-list entry {i}" for i in range(4)
    ]
    assert all(len(line) < 200 for line in lines)


def test_nested_junk_is_skipped() -> None:
    deep: list[object] = []
    for _ in range(200):
        deep = [deep, {"network-host": deep}]
    value = [
        deep,
        {"network-host": deep, "port": 1},
        {"network-host": {"network-host": "b", "port": 1}, "port": 1},
        {"network-host": "b", "port": {"port": 1}},
        {"network-host": "b", "port": 1, "scheme": ["amqps"]},
        {("network-host",): "b", 5: 6, None: None, "port": 1},
        {i: i for i in range(10_000)},
    ]
    assert parse_server_list(value, current=PLAIN) == ()


def test_control_characters_are_escaped_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    parse_server_list([{"network-host": "b\x1b[31m\r\nFAKE LOG LINE", "port": 1}], current=PLAIN)
    (line,) = _warnings(caplog)
    assert "\n" not in line
    assert "\r" not in line
    assert "\x1b" not in line


# --- nothing of the current broker, and nothing the broker adds, beyond scheme, host and port ---


def test_no_credentials_or_options_of_current_leak_into_the_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = [
        _artemis("b", 5671, "amqps"),
        {"network-host": "c", "port": "5671"},
        {"network-host": "d", "port": 1, "scheme": "amqp"},
    ]
    result = parse_server_list(value, current=WITH_SECRETS)
    redirect = parse_redirect({"network-host": "e", "port": 1}, current=WITH_SECRETS)
    assert redirect is not None
    for address in (*result, redirect):
        assert address.user is None
        assert address.password is None
        assert address.params == ()
        assert "s3cr3t" not in repr(address)
    assert "s3cr3t" not in caplog.text
    assert "st0re" not in caplog.text


def test_an_entry_cannot_inject_credentials_or_options(caplog: pytest.LogCaptureFixture) -> None:
    entry = {
        "network-host": "b",
        "port": 1,
        "user": "mallory",
        "password": "hunter2",
        "username": "mallory",
        "params": {"transport.verifyHost": "false"},
        "sslEnabled": True,
        "verifyHost": False,
    }
    (address,) = parse_server_list([entry], current=PLAIN)
    assert address == BrokerAddress("amqp", "b", 1)
    assert (address.user, address.password, address.params) == (None, None, ())
    injected = [
        {"network-host": "mallory:hunter2@b", "port": 1},
        {"network-host": "b", "port": "hunter2@5672"},
        {"network-host": "b", "port": 1, "scheme": "amqp://mallory:hunter2@b"},
        {"network-host": "b?user=mallory&password=hunter2", "port": 1},
    ]
    assert parse_server_list(injected, current=PLAIN) == ()
    assert parse_redirect(injected[0], current=PLAIN) is None
    assert "hunter2" not in caplog.text
    assert "***@b" in caplog.text


def test_hostname_is_checked_but_not_kept() -> None:
    entry = {"network-host": "10.0.0.7", "hostname": "broker-b.example", "port": 5671}
    assert parse_server_list([entry], current=TLS) == (BrokerAddress("amqps", "10.0.0.7", 5671),)
    entry["hostname"] = ""
    assert parse_server_list([entry], current=TLS) == (BrokerAddress("amqps", "10.0.0.7", 5671),)


# --- TLS: a plain entry keeps its scheme and the pool decides ---------------------------------


def test_plain_entry_over_tls_keeps_its_scheme_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = [_artemis("backup", 5672, "amqp"), _artemis("other", 5671, "amqps")]
    assert parse_server_list(value, current=TLS) == (
        BrokerAddress("amqp", "backup", 5672),
        BrokerAddress("amqps", "other", 5671),
    )
    (line,) = _warnings(caplog)
    assert line.startswith("failover-server-list entry 0 names plain amqp for backup:5672")


def test_plain_redirect_over_tls_keeps_its_scheme_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    info = {"network-host": "b", "port": 5672, "scheme": "amqp"}
    assert parse_redirect(info, current=TLS) == BrokerAddress("amqp", "b", 5672)
    (line,) = _warnings(caplog)
    assert line.startswith("amqp:connection:redirect names plain amqp for b:5672")


def test_tls_entry_over_plain_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_server_list([_artemis("b", 5671, "amqps")], current=PLAIN)[0].tls
    assert _warnings(caplog) == []


def test_a_tls_alias_scheme_is_kept_for_entries_without_scheme() -> None:
    current = BrokerAddress("amqp+ssl", "a", 5671)
    (address,) = parse_server_list([{"network-host": "b", "port": 5671}], current=current)
    assert address.scheme == "amqp+ssl"
    assert address.tls


def test_the_pool_merge_keeps_tls_when_every_seed_uses_it() -> None:
    # What the parser leaves to the pool: a plain entry seen over TLS becomes TLS there, and
    # gets the seeds' credentials (never any from the broker).
    pool = BrokerPool([WITH_SECRETS])
    advertised = parse_server_list([_artemis("backup", 5672, "amqp")], current=WITH_SECRETS)
    delta = pool.merge(advertised, "add", source="amqp-open", now=0.0)
    (added,) = delta.added
    assert (added.scheme, added.host, added.port) == ("amqps", "backup", 5672)
    assert added.user == "admin"
    assert added.params == ()


# --- redirect ------------------------------------------------------------------------------------


def test_artemis_redirect() -> None:
    info = {symbol("network-host"): "node-2", symbol("port"): 61616}
    assert parse_redirect(info, current=PLAIN) == BrokerAddress("amqp", "node-2", 61616)
    assert parse_redirect(info, current=TLS) == BrokerAddress("amqps", "node-2", 61616)


def test_redirect_with_scheme_hostname_and_string_port() -> None:
    info = {"network-host": "node-2", "port": "5671", "scheme": "amqps", "hostname": "node-2"}
    assert parse_redirect(info, current=PLAIN) == BrokerAddress("amqps", "node-2", 5671)


def test_redirect_without_info(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_redirect(None, current=PLAIN) is None
    assert _warnings(caplog) == ["amqp:connection:redirect not followed: not a map but nothing"]
