"""The harness's authentication setting, without brokers: spec validation and broker.xml."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from failover_client.testing.brokers._activemq_config import ActiveMQConfig, render_broker_xml
from failover_client.testing.brokers._model import BrokerKind, BrokerUser, ClusterSpec
from failover_client.testing.brokers._readiness import stomp_connect_frame

NS = "{http://activemq.apache.org/schema/core}"
TRICKY = "p&<w>\"o'r:d"


def _config(users: tuple[BrokerUser, ...] = (), peers: tuple[str, ...] = ()) -> ActiveMQConfig:
    return ActiveMQConfig(
        "b0", "/data", "127.0.0.1", 20001, 20002, network_peers=peers, users=users
    )


def _root(cfg: ActiveMQConfig) -> ET.Element:
    return ET.fromstring(render_broker_xml(cfg))


# --- broker.xml ------------------------------------------------------------------------------


def test_without_users_the_broker_has_no_authentication() -> None:
    root = _root(_config(peers=("127.0.0.1:20004",)))
    assert list(root.iter(NS + "simpleAuthenticationPlugin")) == []
    (bridge,) = root.iter(NS + "networkConnector")
    assert bridge.get("userName") is None
    assert bridge.get("password") is None
    (plugins,) = root.iter(NS + "plugins")
    assert [child.tag for child in plugins] == [NS + "statisticsBrokerPlugin"]


def test_users_become_a_simple_authentication_plugin_that_refuses_anonymous() -> None:
    root = _root(_config((BrokerUser("app", "pw1"), BrokerUser("ops", "pw2"))))
    (plugins,) = root.iter(NS + "plugins")
    assert [child.tag for child in plugins] == [
        NS + "simpleAuthenticationPlugin",
        NS + "statisticsBrokerPlugin",
    ]
    (auth,) = plugins.iter(NS + "simpleAuthenticationPlugin")
    assert auth.get("anonymousAccessAllowed") == "false"
    accounts = [
        (u.get("username"), u.get("password"), u.get("groups"))
        for u in auth.iter(NS + "authenticationUser")
    ]
    assert accounts == [("app", "pw1", "users"), ("ops", "pw2", "users")]
    # Authentication only: no authorization map to keep in step with the destinations.
    assert list(root.iter(NS + "authorizationPlugin")) == []


def test_xml_special_characters_in_names_and_passwords_are_escaped() -> None:
    text = render_broker_xml(_config((BrokerUser("a&b<c>", TRICKY),)))
    assert "p&amp;&lt;w&gt;&quot;o'r:d" in text
    assert TRICKY not in text
    (user,) = ET.fromstring(text).iter(NS + "authenticationUser")
    assert user.get("username") == "a&b<c>"
    assert user.get("password") == TRICKY


def test_network_bridges_log_in_as_the_first_user() -> None:
    users = (BrokerUser("app", TRICKY), BrokerUser("ops", "other"))
    root = _root(_config(users, peers=("127.0.0.1:20004", "127.0.0.1:20006")))
    bridges = [(b.get("userName"), b.get("password")) for b in root.iter(NS + "networkConnector")]
    assert bridges == [("app", TRICKY), ("app", TRICKY)]


# --- ClusterSpec / BrokerUser ----------------------------------------------------------------


def test_pairs_become_broker_users_and_the_label_says_auth() -> None:
    spec = ClusterSpec(BrokerKind.ACTIVEMQ, 2, users=(("app", "pw"), BrokerUser("ops", "x")))  # type: ignore[arg-type]
    assert spec.users == (BrokerUser("app", "pw"), BrokerUser("ops", "x"))
    assert spec.label == "activemq-auth"
    plain = ClusterSpec(BrokerKind.ACTIVEMQ)
    assert plain.users == ()
    assert plain.label == "activemq"


def test_a_spec_with_users_is_a_hashable_key_that_tells_passwords_apart() -> None:
    one = ClusterSpec(BrokerKind.ACTIVEMQ, users=[("app", "pw")])  # type: ignore[arg-type]
    same = ClusterSpec(BrokerKind.ACTIVEMQ, users=(BrokerUser("app", "pw"),))
    other = ClusterSpec(BrokerKind.ACTIVEMQ, users=(BrokerUser("app", "pw2"),))
    assert one == same
    assert hash(one) == hash(same)
    assert one != other
    assert one != ClusterSpec(BrokerKind.ACTIVEMQ)


def test_passwords_stay_out_of_reprs() -> None:
    spec = ClusterSpec(BrokerKind.ACTIVEMQ, users=(BrokerUser("app", "hunter2-secret"),))
    assert "hunter2-secret" not in repr(spec)
    assert repr(BrokerUser("app", "hunter2-secret")) == "BrokerUser(name='app')"


@pytest.mark.parametrize("kind", [BrokerKind.RABBITMQ, BrokerKind.ARTEMIS])
def test_users_are_refused_for_brokers_that_bring_their_own_login(kind: BrokerKind) -> None:
    with pytest.raises(ValueError, match=f"only supported for ActiveMQ, not {kind.value}"):
        ClusterSpec(kind, 2, users=(BrokerUser("app", "pw"),))


@pytest.mark.parametrize(
    ("name", "password", "message"),
    [
        ("", "pw", "the name is empty"),
        ("app", "", "the password is empty"),
        ("app", "pw\nlogin:root", "line break or NUL"),
        ("app", "pw\r", "line break or NUL"),
        ("app", "p\0w", "line break or NUL"),
        ("a\nb", "pw", "line break or NUL"),
        ("app", " pw", "whitespace"),
        ("app ", "pw", "whitespace"),
    ],
)
def test_bad_users_are_refused_without_showing_the_password(
    name: str, password: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as info:
        BrokerUser(name, password)
    if password.strip():
        assert password.strip() not in str(info.value)


@pytest.mark.parametrize(
    ("users", "error", "message"),
    [
        ((("app", "pw"), ("app", "other")), ValueError, r"\['app'\] appear more than once"),
        ((("app", "pw", "extra"),), TypeError, "not tuple"),
        (("app:pw",), TypeError, "not str"),
        ("app", TypeError, "a sequence of"),
        ((("app", 42),), TypeError, "the password must be a string"),
    ],
)
def test_cluster_spec_rejects_malformed_users(
    users: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        ClusterSpec(BrokerKind.ACTIVEMQ, users=users)  # type: ignore[arg-type]
    assert "pw" not in str(info.value)


# --- the readiness probe's CONNECT frame -------------------------------------------------------


def test_connect_frame_carries_the_login_only_when_given() -> None:
    assert stomp_connect_frame() == b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0"
    assert stomp_connect_frame("app", TRICKY, "vh") == (
        b"CONNECT\naccept-version:1.2\nhost:vh\nheart-beat:0,0\n"
        b"login:app\npasscode:" + TRICKY.encode() + b"\n\n\0"
    )


@pytest.mark.parametrize(
    ("login", "passcode", "name"),
    [("app", "pw\nlogin:root", "passcode"), ("a\rb", "pw", "login"), ("app", "p\0", "passcode")],
)
def test_connect_frame_refuses_values_that_would_forge_headers(
    login: str, passcode: str, name: str
) -> None:
    with pytest.raises(ValueError, match=f"the {name} holds a line break or NUL") as info:
        stomp_connect_frame(login, passcode)
    assert passcode not in str(info.value)
