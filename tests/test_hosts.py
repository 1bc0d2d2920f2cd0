"""The one rule for a host a peer advertises, and every path a pushed broker takes obeys it."""

from __future__ import annotations

import pytest
from failover_client.uri import BrokerAddress

from failover_client._hosts import HostError, check_host, shown_list
from failover_client.amqp._server_list import parse_server_list
from failover_client.engine._pool import BrokerPool
from failover_client.topology import AdvisoryError, map_broker_url

GOOD = [
    ("broker-1.example.com", "broker-1.example.com"),
    ("Broker_1.example.com.", "Broker_1.example.com"),  # a final dot, '_' as ActiveMQ has it
    ("localhost", "localhost"),
    ("192.0.2.7", "192.0.2.7"),
    ("::1", "::1"),
    ("[2001:db8::7]", "2001:db8::7"),
    ("fe80::1%eth0", "fe80::1%eth0"),
]

BAD = [
    (None, "no host"),
    (7, "not a string but an int"),
    ("", "is empty"),
    ("a" * 300, "too long (300 characters)"),
    ("user:secret@b", "holds an '@'"),
    ("a b", "not a host name"),
    ("a?x=1", "not a host name"),
    ("a/b", "not a host name"),
    ("a\nb", "not a host name"),
    ("bröker", "not a host name"),
    ("-x", "not a host name"),
    ("a..b", "not a host name"),
    ("a" * 64 + ".example.com", "not a host name"),  # a label of 64 characters
    ("a:b", "not an IPv6 address"),
    ("[::1", "not an IPv6 address"),
    ("fe80::1%a b", "bad IPv6 zone"),
    ("0.0.0.0", "wildcard address"),
    ("::", "wildcard address"),
    ("224.0.0.1", "multicast group"),
    ("ff02::1", "multicast group"),
]


@pytest.mark.parametrize(("value", "expected"), GOOD)
def test_a_reachable_host_passes_as_a_client_connects_to_it(value: str, expected: str) -> None:
    assert check_host(value) == expected


@pytest.mark.parametrize(("value", "reason"), BAD)
def test_a_host_no_client_can_use_is_refused_saying_why(value: object, reason: str) -> None:
    with pytest.raises(HostError) as info:
        check_host(value)
    assert reason in str(info.value)


def test_the_refusal_never_shows_user_info_and_stays_short() -> None:
    with pytest.raises(HostError) as info:
        check_host("admin:hunter2@" + "x" * 200)
    assert "hunter2" not in str(info.value)
    assert len(str(info.value)) < 120


# Every path a pushed host takes refuses what the rule refuses (one rule, not three).
PATHS_BAD = ["a b", "0.0.0.0", "224.0.0.1", "-x", "a..b"]


@pytest.mark.parametrize("host", PATHS_BAD)
def test_every_path_a_pushed_host_takes_applies_the_one_rule(host: str) -> None:
    with pytest.raises(AdvisoryError):
        map_broker_url(f"stomp://{host}:61613", "stomp", None)
    current = BrokerAddress("amqp", "a", 5672)
    assert parse_server_list([{"network-host": host, "port": 5672}], current=current) == ()
    pool = BrokerPool([BrokerAddress("stomp", "seed", 61613)])
    delta = pool.merge([BrokerAddress("stomp", host, 61613)], "add", source="s", now=0.0)
    assert delta.added == ()
    assert len(delta.rejected) == 1


def test_a_long_list_is_shown_bounded() -> None:
    assert shown_list(range(3)) == "0, 1, 2"
    assert shown_list(range(10_000), limit=2) == "0, 1 and 9,998 more"
