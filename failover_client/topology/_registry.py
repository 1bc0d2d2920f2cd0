"""Topology-source names: built-ins, code-registered and entry-point sources.

Like the policies' registry: configuration names a source only through this registry, never
through an import path, so a connection string cannot make the library import arbitrary code.
Third-party packages add sources through the ``failover_client.topology_sources`` entry-point
group; its names are listed (without importing anything) the first time a name is looked up
that is not built in or registered, and an entry point is imported only when it is used.
"""

from __future__ import annotations

import importlib.metadata
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from failover_client._errors import ConfigurationError

from ._base import TopologySource
from ._file import FileSource

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
e.g. :class:`FileSource`'s ``path``, ``interval``, ``clock``)."""


class TopologySourceError(ConfigurationError):
    """An unknown topology-source name; ``known`` lists the registered names.

    Also raised, with ``problem`` set, when a known name's code is broken (an entry point
    that does not import or is not callable).
    """

    def __init__(self, name: str, known: Sequence[str], problem: str | None = None) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        self.problem = problem
        listed = ", ".join(self.known) or "(none)"
        if problem is None:
            message = f"unknown topology source {name!r}; registered sources: {listed}"
        else:
            message = f"topology source {name!r} could not be used: {problem}"
        super().__init__(message)


_BUILTINS: Mapping[str, TopologySourceFactory] = MappingProxyType({"file": FileSource})

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

_lock = threading.Lock()
_registered: dict[str, TopologySourceFactory] = {}
_entry_points: dict[str, importlib.metadata.EntryPoint] | None = None
_loaded: dict[str, TopologySourceFactory] = {}


def _plugins_locked() -> dict[str, importlib.metadata.EntryPoint]:
    global _entry_points  # noqa: PLW0603  # one lazily filled, process-wide cache
    if _entry_points is None:
        _entry_points = {
            ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        }
    return _entry_points


def _known_locked() -> list[str]:
    return sorted(set(_BUILTINS) | set(_registered) | set(_plugins_locked()))


def registered_topology_sources() -> list[str]:
    """Every topology-source name, sorted: built-in, registered and entry-point names."""
    with _lock:
        return _known_locked()


def register_topology_source(
    name: str, factory: TopologySourceFactory, *, replace: bool = False
) -> None:
    """Make ``factory`` available as source ``name`` (for code that cannot ship an entry point).

    Built-in names cannot be replaced; another registered name can with ``replace=True``.
    Raises :class:`ConfigurationError` for a bad or taken name.
    """
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"topology source name {name!r} must start with a letter or digit and contain only "
            "letters, digits, '.', '_' and '-'"
        )
    if name in _BUILTINS:
        raise ConfigurationError(f"topology source {name!r} is built in and cannot be replaced")
    if not callable(factory):
        raise ConfigurationError(f"topology source factory for {name!r} is not callable")
    with _lock:
        if name in _registered and not replace:
            raise ConfigurationError(
                f"topology source {name!r} is already registered; pass replace=True to replace it"
            )
        _registered[name] = factory


def unregister_topology_source(name: str) -> None:
    """Remove a source added with :func:`register_topology_source`."""
    with _lock:
        if _registered.pop(name, None) is None:
            raise TopologySourceError(name, sorted(_registered))


def topology_source_factory(name: str) -> TopologySourceFactory:
    """The factory registered as ``name``; :class:`TopologySourceError` if there is none."""
    with _lock:
        factory = _BUILTINS.get(name) or _registered.get(name) or _loaded.get(name)
        if factory is not None:
            return factory
        entry_point = _plugins_locked().get(name)
        known = _known_locked()
    if entry_point is None:
        raise TopologySourceError(name, known)
    # Imported outside the lock: a plugin's import may itself look sources up.
    try:
        loaded = entry_point.load()
    except Exception as err:
        raise TopologySourceError(
            name, known, f"entry point {entry_point.value!r}: {type(err).__name__}: {err}"
        ) from err
    if not callable(loaded):
        raise TopologySourceError(
            name, known, f"entry point {entry_point.value!r} is not a callable factory"
        )
    with _lock:
        return _loaded.setdefault(name, loaded)


def _reset_for_tests(
    entry_points: Mapping[str, importlib.metadata.EntryPoint] | None = None,
) -> None:
    """Forget registrations and loaded plugins; optionally pin the entry points (tests only)."""
    global _entry_points  # noqa: PLW0603  # see _plugins_locked
    with _lock:
        _registered.clear()
        _loaded.clear()
        _entry_points = dict(entry_points) if entry_points is not None else None
