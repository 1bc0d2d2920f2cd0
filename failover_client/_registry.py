"""Factories by name: built-ins, code-registered ones and entry points, behind one lock.

Broker-selection policies and topology sources are both found this way, so a connection string
or an option names code only through a registry, never through an import path, and cannot make
the library import arbitrary code. Each registry is a :class:`NamedRegistry` that keeps its own
error types and wording: the class only owns the mechanism (which name wins, when entry points
are listed and imported, what the lock covers).

Entry points of the registry's group are listed, which reads package metadata but imports
nothing, the first time a name is looked up that is neither built in nor registered; one is
imported only when its factory is asked for, and then once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from failover_client._errors import ConfigurationError

if TYPE_CHECKING:
    import importlib.metadata

__all__ = ["EntryPointFailure", "NamedRegistry"]

F = TypeVar("F")
"""The factory type a registry hands out (a policy factory, a topology-source factory)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class EntryPointFailure:
    """What went wrong with an entry point, for a registry to word as its own error.

    ``error`` is what importing it raised; when it is None the import worked but gave
    ``loaded``, which is not callable. ``known`` is every name the registry had at lookup.
    """

    name: str
    entry_point: importlib.metadata.EntryPoint
    known: list[str]
    error: Exception | None = None
    loaded: object = None

    @property
    def error_text(self) -> str:
        """``"ModuleNotFoundError: ..."``: the exception's type says more than its text alone."""
        return f"{type(self.error).__name__}: {self.error}"


class NamedRegistry(Generic[F]):
    """Factories of type ``F`` by name, for one entry-point ``group``.

    A name resolves to, in this order: a built-in, a factory registered in code, an entry point.
    Built-ins (and the ``reserved`` names, such as aliases) cannot be registered over, so what a
    documented name means cannot change behind the user's back.

    The registry raises ``unknown(name, known)`` for a name it does not have and
    ``broken(failure)`` for an entry point that does not import or is not callable; the refusals of
    :meth:`register` are :class:`ConfigurationError` worded with ``kind`` (e.g. ``"policy"``).
    ``builtin_kind`` is what the "is built in" refusal calls the name (``kind`` when None), and
    ``show_rejected_factory`` adds the repr of a non-callable factory to its refusal; both exist
    only so that each registry's messages stay the ones it has always had.
    """

    def __init__(
        self,
        *,
        kind: str,
        group: str,
        builtins: Mapping[str, F],
        unknown: Callable[[str, list[str]], Exception],
        broken: Callable[[EntryPointFailure], Exception],
        reserved: Collection[str] = (),
        builtin_kind: str | None = None,
        show_rejected_factory: bool = False,
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = builtins
        self._reserved = reserved
        self._unknown = unknown
        self._broken = broken
        self._builtin_kind = kind if builtin_kind is None else builtin_kind
        self._show_rejected_factory = show_rejected_factory
        # One lock guards the three tables below. It is never held while plugin code runs: an
        # entry point's import may itself look names up, which would deadlock on it.
        self._lock = threading.Lock()
        self._registered: dict[str, F] = {}
        self._loaded: dict[str, F] = {}
        # None until first needed: listing the group reads every installed distribution's
        # metadata, a cost a program that names only built-ins should not pay.
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None

    def _plugins_locked(self) -> dict[str, importlib.metadata.EntryPoint]:
        if self._entry_points is None:
            # Imported here: importlib.metadata (with the email parser it reads metadata with)
            # cost more than the rest of the package's import, for a listing few programs need.
            import importlib.metadata  # noqa: PLC0415

            self._entry_points = {
                ep.name: ep for ep in importlib.metadata.entry_points(group=self.group)
            }
        return self._entry_points

    def _known_locked(self) -> list[str]:
        return sorted(set(self._builtins) | set(self._registered) | set(self._plugins_locked()))

    def names(self) -> list[str]:
        """Every name, sorted: built-in, registered and entry-point names."""
        with self._lock:
            return self._known_locked()

    def require(self, name: str, *, asked: str | None = None) -> str:
        """Return ``name`` if the registry has it, without importing anything.

        ``asked`` is the name as the user wrote it (e.g. an alias of ``name``); the unknown-name
        error reports that spelling, since it is the one the user can find in their own input.
        """
        with self._lock:
            if name in self._builtins or name in self._registered:
                return name
            if name in self._plugins_locked():
                return name
            raise self._unknown(name if asked is None else asked, self._known_locked())

    def register(self, name: str, factory: F, *, replace: bool = False) -> None:
        """Make ``factory`` available as ``name``; ``replace=True`` replaces a registered one.

        Raises :class:`ConfigurationError` for a malformed, built-in, reserved or taken name and
        for a factory that is not callable, before anything is changed.
        """
        if not _NAME.fullmatch(name):
            raise ConfigurationError(
                f"{self.kind} name {name!r} must start with a letter or digit and contain only "
                "letters, digits, '.', '_' and '-'"
            )
        if name in self._builtins or name in self._reserved:
            raise ConfigurationError(
                f"{self._builtin_kind} {name!r} is built in and cannot be replaced"
            )
        if not callable(factory):
            detail = f": {factory!r}" if self._show_rejected_factory else ""
            raise ConfigurationError(f"{self.kind} factory for {name!r} is not callable{detail}")
        with self._lock:
            if name in self._registered and not replace:
                raise ConfigurationError(
                    f"{self.kind} {name!r} is already registered; pass replace=True to replace it"
                )
            self._registered[name] = factory

    def unregister(self, name: str) -> None:
        """Remove a factory added with :meth:`register`; ``unknown`` if ``name`` is not one.

        The error lists only the registered names: those are the ones that can be removed.
        """
        with self._lock:
            if self._registered.pop(name, None) is None:
                raise self._unknown(name, sorted(self._registered))

    def factory(self, name: str, *, asked: str | None = None) -> F:
        """The factory for ``name``, importing its entry point on first use.

        ``asked`` is as in :meth:`require`. Raises ``unknown`` for a name the registry does not
        have and ``broken`` for an entry point that does not import or is not callable.
        """
        with self._lock:
            found = self._builtins.get(name) or self._registered.get(name) or self._loaded.get(name)
            if found is not None:
                return found
            entry_point = self._plugins_locked().get(name)
            known = self._known_locked()
        if entry_point is None:
            raise self._unknown(name if asked is None else asked, known)
        # Imported outside the lock: a plugin's import may itself look names up.
        try:
            loaded = entry_point.load()
        except Exception as err:
            raise self._broken(EntryPointFailure(name, entry_point, known, error=err)) from err
        if not callable(loaded):
            raise self._broken(EntryPointFailure(name, entry_point, known, loaded=loaded))
        with self._lock:
            # Another thread may have imported the same entry point meanwhile: the first
            # factory stored wins, so every caller gets the same one.
            stored: F = self._loaded.setdefault(name, loaded)
            return stored

    def reset(
        self, entry_points: Mapping[str, importlib.metadata.EntryPoint] | None = None
    ) -> None:
        """Forget registrations and loaded plugins; optionally pin the entry points.

        For tests: pinned entry points replace what installed distributions declare, so a test
        neither depends on nor is disturbed by the environment it runs in. None re-reads them.
        """
        with self._lock:
            self._registered.clear()
            self._loaded.clear()
            self._entry_points = dict(entry_points) if entry_points is not None else None
