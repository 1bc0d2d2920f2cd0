"""ConnectorSettings: one validated value for what every adapter's connector shares."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme
from failover_client.uri import BrokerAddress

from failover_client import ConfigurationError, ConnectorSettings, FailoverOptions
from failover_client.adapter import Cancel
from failover_client.amqp import AmqpConnector
from failover_client.net._tls import LazyTls
from failover_client.stomp import StompConnector
from failover_client.testing import FakeClock, FakeConnector
from failover_client.testing.contract import ContractListener

SECRET = "s3cret-passcode"


def test_the_heartbeat_defaults_to_the_options_and_an_argument_wins() -> None:
    options = FailoverOptions(heartbeat=(4000, 5000))
    assert ConnectorSettings(options).beats == (4000, 5000)
    assert ConnectorSettings(options, heartbeat=(0, 0)).beats == (0, 0)


def test_a_member_s_credentials_beat_the_defaults_and_a_bare_user_sends_no_password() -> None:
    settings = ConnectorSettings(login="default", passcode=SECRET)
    assert settings.credentials_for(BrokerAddress("stomp", "h", 1)) == ("default", SECRET)
    member = BrokerAddress("stomp", "h", 1, user="u", password="p")
    assert settings.credentials_for(member) == ("u", "p")
    assert settings.credentials_for(BrokerAddress("stomp", "h", 1, user="u")) == ("u", None)


@pytest.mark.parametrize("build", [ConnectorSettings, StompConnector, AmqpConnector])
def test_no_repr_shows_the_passcode(build: type) -> None:
    shown = repr(build(login="user", passcode=SECRET))
    assert "user" in shown
    assert SECRET not in shown


def test_a_wrong_passcode_type_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigurationError, match="passcode must be a string; got bytes") as info:
        ConnectorSettings(passcode=SECRET.encode())  # type: ignore[arg-type]
    assert SECRET not in str(info.value)


def test_replace_checks_again() -> None:
    settings = ConnectorSettings(close_timeout=1.0)
    with pytest.raises(ConfigurationError, match="close_timeout"):
        dataclasses.replace(settings, close_timeout=-1.0)


def test_without_tls_files_the_context_is_built_on_first_use_and_once() -> None:
    built: list[FailoverOptions] = []

    def build(options: FailoverOptions) -> object:
        built.append(options)
        return object()

    lazy = LazyTls(FailoverOptions(), build)
    assert built == []
    first = lazy.get()
    assert lazy.get() is first
    assert len(built) == 1


def test_a_ready_context_is_used_as_it_is() -> None:
    context = ssl.create_default_context()
    settings = ConnectorSettings(ssl_context=context)
    assert settings.tls_context() is context


def test_named_tls_files_are_loaded_at_construction(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(ConfigurationError, match="tls_ca_file"):
        ConnectorSettings(FailoverOptions(tls_ca_file=missing))


def test_the_fake_builds_the_tls_context_a_real_adapter_would_for_a_tls_member() -> None:
    settings = ConnectorSettings()
    connector = FakeConnector(clock=FakeClock(), settings=settings)
    assert repr(settings._tls) == "LazyTls(built=False)"
    connector.connect(
        BrokerAddress("stomp+ssl", "a", 61614),
        timeout=1.0,
        listener=ContractListener(),
        cancel=Cancel(),
    )
    assert repr(settings._tls) == "LazyTls(built=True)"


def _client_files(tmp_path: Path) -> tuple[str, str, str]:
    """(CA file, certificate file, key file of another identity)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    mine = ca.issue_cert("client.example")
    other = ca.issue_cert("other.example")
    mine.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    other.private_key_pem.write_to_path(str(tmp_path / "other.key"))
    return str(tmp_path / "ca.pem"), str(tmp_path / "client.pem"), str(tmp_path / "other.key")


@pytest.mark.parametrize(
    "build",
    [
        StompConnector,
        AmqpConnector,
        lambda options: FakeConnector(settings=ConnectorSettings(options)),
    ],
    ids=["stomp", "amqp", "fake"],
)
def test_a_key_that_is_not_the_certificate_s_is_refused_by_every_adapter_at_construction(
    build: Callable[[FailoverOptions], object], tmp_path: Path
) -> None:
    ca, cert, wrong_key = _client_files(tmp_path)
    options = FailoverOptions(tls_ca_file=ca, tls_cert_file=cert, tls_key_file=wrong_key)
    with pytest.raises(ConfigurationError, match=r"tls_cert_file .* cannot be loaded"):
        build(options)


def test_usable_files_build_the_amqp_domain_at_construction(tmp_path: Path) -> None:
    ca, _, _ = _client_files(tmp_path)
    connector = AmqpConnector(FailoverOptions(tls_ca_file=ca))
    assert repr(connector._ssl_domain) == "LazyTls(built=True)"
    assert repr(AmqpConnector()._ssl_domain) == "LazyTls(built=False)"
