"""The configuration part of the adapter contract: :class:`ConfigurationContract`.

Re-exported by :mod:`failover_client.testing.contract`, where :class:`AdapterContract` includes
it; it needs no broker, so an adapter's configuration can be checked in unit tests alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from failover_client._errors import ConfigurationError, ConnectionFailure
from failover_client.adapter import Connector
from failover_client.uri import FailoverOptions

__all__ = ["ConfigurationContract", "ConnectorFactory"]

ConnectorFactory = Callable[..., Connector]
"""Builds a connector of the adapter under test from the keyword arguments every adapter's
constructor takes: ``options`` (:class:`FailoverOptions`), ``heartbeat`` ((send, receive)
milliseconds) and ``close_timeout`` (seconds)."""


class ConfigurationContract:
    """Settings every adapter refuses alike: :class:`ConfigurationError` at construction.

    A wrong setting is the user's mistake, not an outage: raised when the connector is built
    (or at the latest by the first connect), it is never a :class:`ConnectionFailure`, which the
    reconnect loop would retry for ever. Override ``connector_factory`` (or, through
    :class:`AdapterContract`, set ``ContractTarget.build_connector``).
    """

    @pytest.fixture
    def connector_factory(self) -> ConnectorFactory:
        """Override in the subclass: builds connectors of the adapter under test."""
        pytest.fail(f"{type(self).__name__} must override the connector_factory fixture")

    @staticmethod
    def _refused(build: Callable[[], Connector], *named: str) -> ConfigurationError:
        with pytest.raises(ConfigurationError) as info:
            build()
        error = info.value
        assert not isinstance(error, ConnectionFailure), "a setting must not look like an outage"
        for name in named:
            assert name in str(error), f"the error does not name {name}: {error}"
        return error

    def test_good_settings_build_a_connector(self, connector_factory: ConnectorFactory) -> None:
        connector_factory(options=FailoverOptions(), heartbeat=(0, 0), close_timeout=0.0)
        connector_factory(options=FailoverOptions(), heartbeat=(1000, 500), close_timeout=1.5)

    def test_a_key_file_without_its_certificate_is_refused(
        self, connector_factory: ConnectorFactory, tmp_path: Path
    ) -> None:
        key = tmp_path / "client.key"
        key.write_text("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
        options = FailoverOptions(tls_key_file=str(key))
        self._refused(lambda: connector_factory(options=options), "tls_key_file", "tls_cert_file")

    @pytest.mark.parametrize("kind", ["missing", "not PEM", "a directory"])
    def test_an_unreadable_ca_file_is_refused(
        self, connector_factory: ConnectorFactory, tmp_path: Path, kind: str
    ) -> None:
        ca = tmp_path / "ca.pem"
        if kind == "not PEM":
            ca.write_text("this is not a certificate\n")
        elif kind == "a directory":
            ca.mkdir()
        options = FailoverOptions(tls_ca_file=str(ca))
        self._refused(lambda: connector_factory(options=options), "tls_ca_file", str(ca))

    @pytest.mark.parametrize(
        "heartbeat",
        [(-1, 0), (0, -1000), (1000,), (1, 2, 3), (1.5, 0), (True, 0), ("10", "10"), "10,10"],
        ids=repr,
    )
    def test_bad_heart_beat_values_are_refused(
        self, connector_factory: ConnectorFactory, heartbeat: object
    ) -> None:
        self._refused(lambda: connector_factory(heartbeat=heartbeat), "heartbeat")

    @pytest.mark.parametrize("close_timeout", [-1, -0.001, math.nan, math.inf, "1", True], ids=repr)
    def test_a_bad_close_timeout_is_refused(
        self, connector_factory: ConnectorFactory, close_timeout: object
    ) -> None:
        self._refused(lambda: connector_factory(close_timeout=close_timeout), "close_timeout")
