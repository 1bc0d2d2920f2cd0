"""``probe`` over amqp:// members: the open frame's properties and the brokers it names."""

from __future__ import annotations

import io
import json
import sys

import pytest
from failover_client.uri import BrokerAddress
from proton import symbol, ulong

from failover_client import BrokerUnavailable
from failover_client.adapter import AdvertisedBrokers
from failover_client.cli import Environment, ExitCode, run
from failover_client.cli._probe_amqp import (
    MAX_PROPERTIES,
    MAX_VALUE,
    open_properties,
    server_text,
)
from failover_client.testing import FakeClock

URI = "failover:(amqp://a:5672,amqp://b:5672)"

RABBITMQ = {
    symbol("cluster_name"): "rabbit@a",
    symbol("platform"): "Erlang/OTP 25.2.3",
    symbol("product"): "RabbitMQ",
    symbol("version"): "3.10.8",
}


class OpenedSession:
    """The part of an AMQP session the probe reads: its broker's open-frame properties."""

    def __init__(self, address: BrokerAddress, properties: dict[object, object]) -> None:
        self.address = address
        self.remote_properties = dict(properties)
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Brokers:
    """A connector whose brokers open with ``properties``, naming ``advertised`` as they do.

    As the AMQP adapter does, brokers named in the open (or a redirect) reach the listener
    before ``connect`` returns (or fails).
    """

    def __init__(
        self,
        properties: dict[object, object],
        advertised: tuple[BrokerAddress, ...] = (),
        *,
        redirect: BrokerAddress | None = None,
    ) -> None:
        self.properties = properties
        self.advertised = advertised
        self.redirect = redirect
        self.sessions: list[OpenedSession] = []

    def connect(self, address, *, timeout, listener, cancel):
        session = OpenedSession(address, self.properties)
        if self.redirect is not None:
            listener.on_brokers(
                session, AdvertisedBrokers((self.redirect,), "amqp-redirect", redirect=True)
            )
            raise BrokerUnavailable(
                "broker redirected the connection: redirected", broker=str(address)
            )
        if self.advertised:
            listener.on_brokers(session, AdvertisedBrokers(self.advertised, "amqp-open"))
        self.sessions.append(session)
        return session


def probe(connector: object, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        stdin=io.StringIO(),
        stdout=out,
        stderr=err,
        environ={},
        clock=FakeClock(autojump=True),
        connector=connector,  # type: ignore[arg-type]
        styled=False,
    )
    code = run(["probe", *argv], env)
    return code, out.getvalue(), err.getvalue()


# --- the open frame's properties as text -----------------------------------------------------


def test_scalars_become_text_in_the_order_sent() -> None:
    shown = open_properties({symbol("product"): "RabbitMQ", symbol("max-frames"): ulong(7)})
    assert shown == {"product": "RabbitMQ", "max-frames": "7"}
    assert list(shown) == ["product", "max-frames"]


def test_lists_and_maps_are_described_by_size() -> None:
    shown = open_properties(
        {
            "failover-server-list": [{"network-host": "b", "port": 5672}],
            "capabilities": {"a": 1, "b": 2},
            "blob": b"\x00\x01\x02",
            "nothing": None,
        }
    )
    assert shown == {
        "failover-server-list": "(list of 1)",
        "capabilities": "(map of 2)",
        "blob": "(3 bytes)",
        "nothing": "",
    }


def test_secrets_never_show() -> None:
    shown = open_properties(
        {
            "admin-password": "hunter2",
            "session-token": "abc",
            "console": "http://admin:hunter2@broker:8161/",
        }
    )
    assert shown["admin-password"] == "***"
    assert shown["session-token"] == "***"
    assert "hunter2" not in shown["console"]
    assert shown["console"].startswith("http://admin:")


def test_hostile_values_stay_on_one_short_line() -> None:
    long_name = "n" * 500
    shown = open_properties({"motd": "line one\nline two\x1b[31m", long_name: "x" * 500})
    assert shown["motd"] == "line one\\x0aline two\\x1b[31m"
    (name,) = (k for k in shown if k.startswith("n"))
    assert len(name) == MAX_VALUE
    assert len(shown[name]) == MAX_VALUE
    assert shown[name].endswith("...")


def test_at_most_max_properties_are_kept() -> None:
    shown = open_properties({f"p{i}": i for i in range(MAX_PROPERTIES + 10)})
    assert len(shown) == MAX_PROPERTIES
    assert list(shown)[-1] == f"p{MAX_PROPERTIES - 1}"


@pytest.mark.parametrize(
    ("properties", "text"),
    [
        ({"product": "RabbitMQ", "version": "3.10.8"}, "RabbitMQ/3.10.8"),
        ({"product": "apache-activemq-artemis"}, "apache-activemq-artemis"),
        ({"version": "2.0"}, "2.0"),
        ({}, ""),
    ],
)
def test_server_text_is_product_slash_version(properties: dict[str, str], text: str) -> None:
    assert server_text(properties) == text


# --- the command -----------------------------------------------------------------------------


def test_probe_shows_each_members_product_and_open_properties() -> None:
    brokers = Brokers(RABBITMQ)
    code, out, _ = probe(brokers, URI)
    assert code == ExitCode.OK
    assert out == (
        "members:\n"
        "  member         answered  ms   version  server           heart-beat\n"
        "  amqp://a:5672  yes       0.0  1.0      RabbitMQ/3.10.8  -\n"
        "  amqp://b:5672  yes       0.0  1.0      RabbitMQ/3.10.8  -\n"
        "\n"
        "open-frame properties:\n"
        "  member         property      value\n"
        "  amqp://a:5672  cluster_name  rabbit@a\n"
        "  amqp://a:5672  platform      Erlang/OTP 25.2.3\n"
        "  amqp://a:5672  product       RabbitMQ\n"
        "  amqp://a:5672  version       3.10.8\n"
        "  amqp://b:5672  cluster_name  rabbit@a\n"
        "  amqp://b:5672  platform      Erlang/OTP 25.2.3\n"
        "  amqp://b:5672  product       RabbitMQ\n"
        "  amqp://b:5672  version       3.10.8\n"
    )
    assert [s.closed for s in brokers.sessions] == [True, True]


def test_probe_shows_the_server_list_as_parsed_brokers() -> None:
    backup = BrokerAddress("amqp", "backup", 5673)
    properties = {
        symbol("product"): "apache-activemq-artemis",
        symbol("version"): "2.31.0",
        symbol("failover-server-list"): [{symbol("network-host"): "backup", "port": 5673}],
    }
    code, out, _ = probe(Brokers(properties, (backup,)), "amqp://a:5672")
    assert code == ExitCode.OK
    assert "  amqp://a:5672  failover-server-list  (list of 1)\n" in out
    assert out.endswith(
        "advertised brokers:\n"
        "  member         source     advertised broker\n"
        "  amqp://a:5672  amqp-open  amqp://backup:5673\n"
    )


def test_probe_json_carries_properties_and_advertised_brokers() -> None:
    backup = BrokerAddress("amqp", "backup", 5673)
    code, out, _ = probe(Brokers(RABBITMQ, (backup,)), "--json", "amqp://a:5672")
    assert code == ExitCode.OK
    (member,) = json.loads(out)["members"]
    assert member["protocol"] == "amqp"
    assert member["server"] == "RabbitMQ/3.10.8"
    assert member["extra"]["product"] == "RabbitMQ"
    assert member["advertised"] == [{"broker": "amqp://backup:5673", "source": "amqp-open"}]


def test_a_redirect_is_an_unanswered_probe_that_names_the_target() -> None:
    target = BrokerAddress("amqp", "other", 5672)
    code, out, _ = probe(Brokers({}, redirect=target), "amqp://a:5672")
    assert code == ExitCode.CONNECTION
    assert "      BrokerUnavailable: amqp://a:5672: broker redirected the connection" in out
    assert "  amqp://a:5672  amqp-redirect  amqp://other:5672\n" in out


def test_a_missing_amqp_adapter_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, "failover_client.amqp", None)
    code, _, err = probe(None, "amqp://a:5672")
    assert code == ExitCode.MISSING_EXTRA
    assert "pip install 'failover-client[amqp]'" in err
