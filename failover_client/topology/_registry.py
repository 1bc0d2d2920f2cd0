"""Topology-source names: built-ins, code-registered and entry-point sources.

Like the policies' registry: configuration names a source only through this registry, never
through an import path, so a connection string cannot make the library import arbitrary code.
Third-party packages add sources through the ``failover_client.topology_sources`` entry-point
group; its names are listed (without importing anything) the first time a name is looked up
that is not built in or registered, and an entry point is imported only when it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from failover_client._errors import TopologySourceError
from failover_client._registry import EntryPointFailure, NamedRegistry

from ._advisory import AdvisorySource
from ._base import TopologySource
from ._dns import DnsSource
from ._file import FileSource
from ._openwire import OpenWireSource
from ._url import UrlSource

__all__ = [
    "ENTRY_POINT_GROUP",
    "TopologySourceError",
    "TopologySourceFactory",
    "register_topology_source",
    "registered_topology_sources",
    "topology_source_factory",
    "unregister_topology_source",
]

ENTRY_POINT_GROUP = "failover_client.topology_sources"


TopologySourceFactory = Callable[..., TopologySource]
"""Builds a new, not yet started source from keyword settings (each source documents its own,
e.g. :class:`FileSource`'s ``path``, ``interval``, ``clock``; :class:`DnsSource`'s ``name``,
``srv``, ``port``; :class:`AdvisorySource`'s ``uri_or_members``, ``scheme_map``)."""


_BUILTINS: Mapping[str, TopologySourceFactory] = MappingProxyType(
    {
        "advisory": AdvisorySource,
        "dns": DnsSource,
        "file": FileSource,
        "openwire": OpenWireSource,
        "url": UrlSource,
    }
)


def _broken_entry_point(failure: EntryPointFailure) -> TopologySourceError:
    where = f"entry point {failure.entry_point.value!r}"
    problem = (
        f"{where} is not a callable factory"
        if failure.error is None
        else f"{where}: {failure.error_text}"
    )
    return TopologySourceError(failure.name, failure.known, problem)


_REGISTRY: NamedRegistry[TopologySourceFactory] = NamedRegistry(
    kind="topology source",
    group=ENTRY_POINT_GROUP,
    builtins=_BUILTINS,
    unknown=TopologySourceError,
    broken=_broken_entry_point,
)


def registered_topology_sources() -> list[str]:
    """Every topology-source name, sorted: built-in, registered and entry-point names."""
    return _REGISTRY.names()


def register_topology_source(
    name: str, factory: TopologySourceFactory, *, replace: bool = False
) -> None:
    """Make ``factory`` available as source ``name`` (for code that cannot ship an entry point).

    Built-in names cannot be replaced; another registered name can with ``replace=True``.
    Raises :class:`ConfigurationError` for a bad or taken name.
    """
    _REGISTRY.register(name, factory, replace=replace)


def unregister_topology_source(name: str) -> None:
    """Remove a source added with :func:`register_topology_source`."""
    _REGISTRY.unregister(name)


def topology_source_factory(name: str) -> TopologySourceFactory:
    """The factory registered as ``name``; :class:`TopologySourceError` if there is none."""
    return _REGISTRY.factory(name)


# Tests forget registrations and loaded plugins, and pin the entry points, through this name;
# it is the registry's own reset, under the name both registries have always offered tests.
_reset_for_tests = _REGISTRY.reset
