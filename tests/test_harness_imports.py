"""The shipped broker harness and its pytest plugin import without any optional library."""

from __future__ import annotations

import subprocess
import sys

from failover_client.testing import brokers, pytest_plugin

OPTIONAL = ("stomp", "proton", "testcontainers", "docker", "trustme", "cryptography", "requests")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )


def test_harness_imports_with_no_optional_library_installed() -> None:
    # None in sys.modules makes "import stomp" fail as if stomp.py were not installed.
    code = (
        "import sys\n"
        f"for name in {OPTIONAL!r}:\n"
        "    sys.modules[name] = None\n"
        "import failover_client.testing.brokers as b\n"
        "import failover_client.testing.broker_fixtures\n"
        "import failover_client.testing.pytest_plugin\n"
        "spec = b.ClusterSpec('activemq', 3)\n"
        "print(spec.label, len(b.__all__))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["activemq", str(len(brokers.__all__))]


def test_a_missing_library_is_named_when_it_is_needed() -> None:
    code = (
        "import sys\n"
        "sys.modules['stomp'] = None\n"
        "from failover_client.testing.brokers import StompClient\n"
        "StompClient('127.0.0.1', 1)\n"
    )
    done = _run(code)
    assert done.returncode != 0
    assert "ModuleNotFoundError: import of stomp halted" in done.stderr


def test_the_always_loaded_plugin_adds_no_third_party_import() -> None:
    # pytest loads the entry point on every run on the machine: it must not pull in anything
    # beyond what importing failover_client itself already did.
    code = (
        "import sys\n"
        "import failover_client.testing\n"
        "before = set(sys.modules)\n"
        "import failover_client.testing.pytest_plugin\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['failover_client.testing.pytest_plugin']"


def test_plugin_backend_choices_are_the_harness_backends() -> None:
    assert pytest_plugin.BACKENDS == brokers.BACKENDS


def test_stomp_client_is_the_harness_name_not_the_adapter_one() -> None:
    assert "StompClient" in brokers.__all__
    assert "StompSession" not in brokers.__all__
