"""This repository's real-broker tests use the shipped broker fixtures.

They are switched on here, for this directory, the way a user's conftest would; the option
plugin is registered first when pytest's plugin autoload is off (it is an entry point).
"""

from __future__ import annotations

import pytest

from failover_client.testing.pytest_plugin import FIXTURES
from failover_client.testing.spark_fixtures import *  # noqa: F403 - Spark fixtures for test_spark_*

# The name pytest gives the plugin that the package's pytest11 entry point registers.
_ENTRY_POINT = "failover_client"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if pluginmanager.get_plugin(_ENTRY_POINT) is None:
        # Registering from inside this hook still gives the plugin its own pytest_addoption
        # call (the hook is historic), so --broker-backend exists before arguments are parsed.
        pluginmanager.import_plugin("failover_client.testing.pytest_plugin")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.import_plugin(FIXTURES)
