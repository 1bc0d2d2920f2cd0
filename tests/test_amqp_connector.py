"""What the AMQP connector decides before any socket: settings, credentials, redaction."""

from __future__ import annotations

import pytest

from failover_client import BrokerAddress, ConfigurationError, ConnectCancelled, FailoverOptions
from failover_client.adapter import Cancel
from failover_client.amqp import AmqpConnector
from failover_client.amqp._handler import ConnectSettings
from failover_client.testing.contract import ContractListener

SECRET = "pa55-word"


def test_the_member_credentials_beat_the_connector_defaults() -> None:
    connector = AmqpConnector(login="default", passcode=SECRET)
    assert connector.credentials_for(BrokerAddress("amqp", "h", 5672)) == ("default", SECRET)
    member = BrokerAddress("amqp", "h", 5672, user="u", password="p")
    assert connector.credentials_for(member) == ("u", "p")
    without_password = BrokerAddress("amqp", "h", 5672, user="u")
    assert connector.credentials_for(without_password) == ("u", None)


def test_no_password_in_reprs() -> None:
    connector = AmqpConnector(login="user", passcode=SECRET)
    assert SECRET not in repr(connector)
    settings = ConnectSettings(
        url="amqp://h:5672",
        hostname="h",
        user="user",
        password=SECRET,
        idle_timeout=10.0,
        ssl_domain=None,
        close_timeout=1.0,
        sasl_mechanisms="PLAIN",
    )
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)


def test_the_heartbeat_comes_from_the_options_unless_given() -> None:
    assert AmqpConnector(FailoverOptions(heartbeat=(500, 700))).heartbeat == (500, 700)
    assert AmqpConnector(FailoverOptions(), heartbeat=(0, 0)).heartbeat == (0, 0)


@pytest.mark.parametrize(
    "kwargs",
    [{"heartbeat": (-1, 0)}, {"close_timeout": -1.0}],
)
def test_bad_settings_are_configuration_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        AmqpConnector(FailoverOptions(), **kwargs)  # type: ignore[arg-type]


def test_an_unreadable_ca_file_is_a_configuration_error_at_once() -> None:
    with pytest.raises(ConfigurationError, match="tls_ca_file"):
        AmqpConnector(FailoverOptions(tls_ca_file="/nonexistent/ca.pem"))


def test_a_stomp_member_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        AmqpConnector().connect(
            BrokerAddress("stomp", "h", 61613),
            timeout=1.0,
            listener=ContractListener(),
            cancel=Cancel(),
        )


def test_a_cancelled_token_ends_the_connect_before_any_socket() -> None:
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(ConnectCancelled):
        AmqpConnector().connect(
            BrokerAddress("amqp", "h", 5672),
            timeout=1.0,
            listener=ContractListener(),
            cancel=cancel,
        )
