"""Topology sources by name: built-ins, registered factories and entry points."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator

import pytest

from failover_client import ConfigurationError
from failover_client.topology import (
    ENTRY_POINT_GROUP,
    FileSource,
    TopologySource,
    TopologySourceError,
    _registry,
    register_topology_source,
    registered_topology_sources,
    topology_source_factory,
    unregister_topology_source,
)


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    _registry._reset_for_tests(entry_points={})
    yield
    _registry._reset_for_tests()


def entry_point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)


def test_file_is_built_in_and_builds_a_source(tmp_path):
    assert registered_topology_sources() == ["advisory", "dns", "file", "openwire", "url"]
    source = topology_source_factory("file")(path=tmp_path / "brokers.txt", interval=5.0)
    assert isinstance(source, FileSource)
    assert isinstance(source, TopologySource)
    assert source.name == "file"


def test_an_unknown_name_lists_the_registered_names_and_is_a_configuration_error():
    register_topology_source("mine", FileSource)
    with pytest.raises(TopologySourceError) as info:
        topology_source_factory("failover_client.topology:FileSource")
    assert isinstance(info.value, ConfigurationError)
    assert str(info.value) == (
        "unknown topology source 'failover_client.topology:FileSource'; "
        "registered sources: advisory, dns, file, mine, openwire, url"
    )
    assert info.value.known == ("advisory", "dns", "file", "mine", "openwire", "url")


def test_register_replace_and_unregister():
    register_topology_source("mine", FileSource)
    assert topology_source_factory("mine") is FileSource
    with pytest.raises(ConfigurationError, match="already registered"):
        register_topology_source("mine", FileSource)
    register_topology_source("mine", FileSource, replace=True)
    unregister_topology_source("mine")
    assert registered_topology_sources() == ["advisory", "dns", "file", "openwire", "url"]
    with pytest.raises(TopologySourceError, match="unknown topology source 'mine'"):
        unregister_topology_source("mine")


@pytest.mark.parametrize(
    ("name", "factory", "message"),
    [
        ("file", FileSource, "built in and cannot be replaced"),
        ("-bad", FileSource, "must start with a letter or digit"),
        ("a b", FileSource, "must start with a letter or digit"),
        ("x", "not callable", "is not callable"),
    ],
)
def test_bad_registrations_are_refused(name, factory, message):
    with pytest.raises(ConfigurationError, match=message):
        register_topology_source(name, factory)
    assert registered_topology_sources() == ["advisory", "dns", "file", "openwire", "url"]


def test_entry_points_are_listed_without_import_and_loaded_on_use():
    _registry._reset_for_tests(
        entry_points={
            "plugin": entry_point("plugin", "failover_client.topology._file:FileSource"),
            "broken": entry_point("broken", "no_such_module_for_topology:Source"),
            "odd": entry_point("odd", "failover_client.topology._file:_log"),
        }
    )
    assert registered_topology_sources() == [
        "advisory",
        "broken",
        "dns",
        "file",
        "odd",
        "openwire",
        "plugin",
        "url",
    ]
    assert topology_source_factory("plugin") is FileSource
    with pytest.raises(TopologySourceError, match=r"'broken' could not be used: .*ModuleNotFound"):
        topology_source_factory("broken")
    with pytest.raises(TopologySourceError, match="not a callable factory"):
        topology_source_factory("odd")
