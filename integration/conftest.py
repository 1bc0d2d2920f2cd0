"""This repository's real-broker tests use the shipped broker fixtures.

They are switched on here, for this directory, the way a user's conftest would; the option
plugin is registered first when pytest's plugin autoload is off (it is an entry point).
"""

from __future__ import annotations

import signal

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
    # A shell without job control starts a background command with SIGINT ignored, and an
    # ignored signal stays ignored across exec: the programs the tests stop with Ctrl-C would
    # then never see it. A handled signal is reset to the default on exec, so handle it here.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
