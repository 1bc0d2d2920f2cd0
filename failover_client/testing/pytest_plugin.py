"""Opt-in pytest plugin for the real-broker harness: options only, fixtures when asked for.

Installing failover-client registers this module with pytest (entry point ``pytest11``, name
``failover_client``), so it is loaded by every pytest run on the machine. It therefore imports
nothing (beyond the standard library), adds options, and defines no fixtures. Its one test
hook acts only on a test that asks for a harness fixture (:data:`HARNESS_FIXTURES`) while the
harness is off and nothing else defines that name: the test fails with a message saying how to
switch the fixtures on, instead of pytest's bare "fixture 'activemq_cluster' not found".
Brokers are switched on by any one of:

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

__all__ = [
    "BACKENDS",
    "FIXTURES",
    "HARNESS_FIXTURES",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_setup",
]

#: the module that holds the fixtures, registered on activation
FIXTURES = "failover_client.testing.broker_fixtures"
#: values of ``--broker-backend`` (the harness's ``BACKENDS``; repeated to keep this import-free)
BACKENDS = ("auto", "local", "docker")
#: the fixtures :data:`FIXTURES` defines (repeated to keep this import-free; a test compares)
HARNESS_FIXTURES = (
    "activemq_cluster",
    "activemq_master_slave",
    "activemq_network",
    "artemis_cluster",
    "broker_cluster",
    "broker_pool",
    "rabbitmq_cluster",
    "unique_queue",
)
#: how to switch them on, as the failing test's message says it
HOW_TO_ACTIVATE = (
    "run pytest with --failover-brokers, or set failover_brokers = true in the [pytest] ini "
    "section ([tool.pytest.ini_options] in pyproject.toml), or add "
    'pytest_plugins = ["failover_client.testing.broker_fixtures"] to a root conftest.py'
)


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


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a test that asks for an absent harness fixture, saying how to switch them on."""
    if item.config.pluginmanager.hasplugin(FIXTURES):
        return
    info = getattr(item, "_fixtureinfo", None)
    defined = getattr(info, "name2fixturedefs", None)
    if defined is None:
        return  # not a function test (a doctest, a plug-in's own item): nothing to say
    missing = [
        name
        for name in getattr(item, "fixturenames", ())
        if name in HARNESS_FIXTURES and name not in defined
    ]
    if missing:
        import pytest  # noqa: PLC0415 - this module imports nothing at load time

        names = ", ".join(repr(name) for name in missing)
        pytest.fail(
            f"fixture {names} is one of failover-client's real-broker fixtures, which are "
            f"off in this run: {HOW_TO_ACTIVATE}",
            pytrace=False,
        )
