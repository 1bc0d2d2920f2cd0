"""Every real adapter refuses the same settings in the same way, without a broker.

The configuration part of the contract suite runs here against the STOMP and AMQP connectors
(the integration suite runs it again beside the broker tests, and ``test_contract_fake`` for
the shipped fake): before the settings were shared, a key file without its certificate was a
configuration error for STOMP and an endless "broker unavailable" retry for AMQP.
"""

from __future__ import annotations

import pytest

from failover_client.amqp import AmqpConnector
from failover_client.stomp import StompConnector
from failover_client.testing.contract import ConfigurationContract, ConnectorFactory


class TestStompConfiguration(ConfigurationContract):
    @pytest.fixture
    def connector_factory(self) -> ConnectorFactory:
        return StompConnector


class TestAmqpConfiguration(ConfigurationContract):
    @pytest.fixture
    def connector_factory(self) -> ConnectorFactory:
        return AmqpConnector
