"""Opt-in pytest plugin for the real-broker harness: options only, fixtures when asked for.

Installing failover-client registers this module with pytest (entry point ``pytest11``, name
``failover_client``), so it is loaded by every pytest run on the machine. It therefore imports
nothing (beyond the standard library), adds only options, and defines no fixtures or test
hooks. Brokers are switched on by any one of:

* ``pytest --failover-brokers``;
* ``failover_brokers = true`` in the ``[pytest]`` ini section (``[tool.pytest.ini_options]``);
* ``pytest_plugins = ["failover_client.testing.broker_fixtures"]`` in a root conftest.

Then :mod:`failover_client.testing.broker_fixtures` is registered and its fixtures
(``activemq_cluster``, ``broker_cluster``, ``unique_queue``, ...) exist.
``--broker-backend=auto|local|docker`` (else ``$FAILOVER_BROKER_BACKEND``, else auto) picks
how brokers run. ``-p no:failover_client`` removes even the options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["BACKENDS", "FIXTURES", "pytest_addoption", "pytest_configure"]

#: the module that holds the fixtures, registered on activation
FIXTURES = "failover_client.testing.broker_fixtures"
#: values of ``--broker-backend`` (the harness's ``BACKENDS``; repeated to keep this import-free)
BACKENDS = ("auto", "local", "docker")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--failover-brokers``, ``--broker-backend`` and the ini key ``failover_brokers``."""
    group = parser.getgroup("failover_client", "failover-client real-broker harness")
    group.addoption(
        "--failover-brokers",
        action="store_true",
        default=False,
        help="activate the real-broker fixtures (activemq_cluster, broker_cluster, ...)",
    )
    group.addoption(
        "--broker-backend",
        choices=BACKENDS,
        default=None,
        help="how to run brokers: local processes, docker containers, or auto "
        "(default: $FAILOVER_BROKER_BACKEND, else auto)",
    )
    parser.addini(
        "failover_brokers",
        type="bool",
        default=False,
        help="activate the failover-client real-broker fixtures for every run",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the fixtures module when the run asked for brokers."""
    if config.getoption("--failover-brokers") or config.getini("failover_brokers"):
        config.pluginmanager.import_plugin(FIXTURES)
