"""The broker fixtures are opt-in: installed, the plugin adds options and nothing else."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USES_FIXTURES = """
def test_queue(unique_queue):
    assert unique_queue.startswith("/queue/test-queue-")

def test_factory(broker_cluster):
    assert callable(broker_cluster)
"""

FIXTURE_NAMES = (
    "activemq_cluster",
    "activemq_master_slave",
    "activemq_network",
    "artemis_cluster",
    "broker_cluster",
    "broker_pool",
    "rabbitmq_cluster",
    "unique_queue",
)


def test_not_activated_the_fixtures_are_absent(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(USES_FIXTURES)
    result = pytester.runpytest()
    result.assert_outcomes(errors=2)
    listed = pytester.runpytest("--fixtures")
    assert not [name for name in FIXTURE_NAMES if name in listed.stdout.str()]


def test_not_activated_a_test_asking_for_one_says_how_to_switch_them_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_app(activemq_cluster):\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "fixture 'activemq_cluster' is one of failover-client's real-broker fixtures" in out
    assert "--failover-brokers" in out
    assert "failover_brokers = true" in out
    assert "failover_client.testing.broker_fixtures" in out
    assert "fixture 'activemq_cluster' not found" not in out


def test_a_users_own_fixture_of_the_same_name_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture\ndef unique_queue():\n    return '/queue/mine'\n"
    )
    pytester.makepyfile("def test_app(unique_queue):\n    assert unique_queue == '/queue/mine'\n")
    pytester.runpytest().assert_outcomes(passed=1)


def test_an_unrelated_missing_fixture_keeps_pytests_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_app(no_such_thing):\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'no_such_thing' not found*"])


def test_the_plugin_names_every_harness_fixture() -> None:
    from failover_client.testing import broker_fixtures, pytest_plugin  # noqa: PLC0415

    defined = sorted(
        name
        for name, value in vars(broker_fixtures).items()
        if hasattr(value, "_fixture_function_marker")
        or type(value).__name__ == "FixtureFunctionDefinition"
    )
    assert sorted(pytest_plugin.HARNESS_FIXTURES) == defined == sorted(FIXTURE_NAMES)


def test_not_activated_only_the_options_exist(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        ["*--failover-brokers*", "*--broker-backend=*", "*failover_brokers*"]
    )
    assert result.ret == 0


def test_the_command_line_option_activates_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(USES_FIXTURES)
    pytester.runpytest("--failover-brokers").assert_outcomes(passed=2)
    listed = pytester.runpytest("--failover-brokers", "--fixtures").stdout.str()
    assert [name for name in FIXTURE_NAMES if name in listed] == list(FIXTURE_NAMES)


def test_the_ini_key_activates_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfailover_brokers = true\n")
    pytester.makepyfile(USES_FIXTURES)
    pytester.runpytest().assert_outcomes(passed=2)


def test_a_false_ini_key_leaves_them_off(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfailover_brokers = false\n")
    pytester.makepyfile(USES_FIXTURES)
    pytester.runpytest().assert_outcomes(errors=2)


def test_a_conftest_can_register_the_fixtures_module(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["failover_client.testing.broker_fixtures"]\n')
    pytester.makepyfile(USES_FIXTURES)
    pytester.runpytest().assert_outcomes(passed=2)


def test_with_the_plugin_disabled_the_conftest_route_still_works(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest('pytest_plugins = ["failover_client.testing.broker_fixtures"]\n')
    pytester.makepyfile(USES_FIXTURES)
    pytester.runpytest("-p", "no:failover_client").assert_outcomes(passed=2)
    refused = pytester.runpytest("-p", "no:failover_client", "--failover-brokers")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR


def test_a_bad_backend_is_refused_with_the_choices(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--broker-backend=kubernetes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid choice: 'kubernetes'*auto*local*docker*"])
