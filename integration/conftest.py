"""Loads the harness plugin for ``pytest integration`` when it was not registered otherwise.

The project may register it for every run (``-p integration.plugin``); this conftest must then
not register it a second time, hence the check instead of ``pytest_plugins``.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("integration.plugin"):
        # Registering from inside this hook still gives the plugin its own pytest_addoption
        # call (the hook is historic), so --broker-backend exists before arguments are parsed.
        pluginmanager.import_plugin("integration.plugin")
